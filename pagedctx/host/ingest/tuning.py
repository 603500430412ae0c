"""How an index update spends processes and memory: `IndexTuning`, given to an `Index`.

The defaults suit any tree; every value only moves where a cost falls, never what is indexed (a
store written under any tuning holds the same keys and values). Tests pass smaller values to reach
the parallel, streamed and batched paths on small inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagedctx.host.code.chunker import SEGMENT_BYTES

__all__ = ["DEFAULT_TUNING", "IndexTuning"]


@dataclass(frozen=True, slots=True)
class IndexTuning:
    """The knobs of an index update (module docstring)."""

    parallel_min_files: int = 64  # below this many files, starting worker processes costs more than it saves
    stream_bytes: int = SEGMENT_BYTES  # larger files are analysed as a stream, in the updating process
    segment_bytes: int = SEGMENT_BYTES  # a streamed file is parsed a window of about this size at a time
    batch_files: int = 200  # files per atomic write
    batch_chunks: int = 20_000  # chunks per write: a batch ends after the file that reaches it
    blocks_kept: int = 100_000  # line blocks whose counts a process keeps for its next files (a few MB)

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) < 1:
                raise ValueError(f"IndexTuning.{name} must be at least 1, not {getattr(self, name)}")


DEFAULT_TUNING = IndexTuning()
