"""Assembly and linker-script layout as PCES evidence shows it (SPEC C3: the asm and summary views).

An assembly chunk's labels (`name @ path:line (section ...)`) and instruction flow
(`path:line: instruction`), directives and comments left out; a linker-script section's summary
(where, its memory region, its size, the symbols it sets); the layout section of an assembly label.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pagedctx.host.code.chunk import Chunk, ChunkKind
from pagedctx.host.pces.lookups import ASM
from pagedctx.protocol.code_evidence.pces import SummaryValue

__all__ = ["asm_many", "asm_parts", "layout_section", "script_summary", "span_text"]

_ASM_LABEL = re.compile(r"\s*([A-Za-z_.$][\w.$@]*|[0-9]+)\s*:(?!:)\s*(.*)")
_ASM_COMMENT = ("//", ";", "/*", "*", "# ", "@ ")
_LD_REGION = re.compile(r">\s*([A-Za-z_]\w*)")
_LD_SIZE = re.compile(r"\.\s*(?:=\s*\.\s*\+|\+=)\s*([^;]+);")


def span_text(chunk: Chunk) -> str:
    """Where a chunk is, as evidence says it: `path:start-end` (1-based lines)."""
    return f"{chunk.path}:{chunk.start_line}-{chunk.end_line}"


def layout_section(chunk: Chunk) -> str | None:
    """The layout section of an assembly label (`.text`), None for other chunks."""
    return chunk.section if chunk.language == ASM else None


def script_summary(section: Chunk, scripts: list[Chunk]) -> dict[str, SummaryValue]:
    """key: value pairs of a linker-script section: where, region, size, the symbols it sets."""
    pairs: dict[str, SummaryValue] = {"script": span_text(section)}
    region = _LD_REGION.search(section.body.rsplit("}", 1)[-1])
    if region is not None:
        pairs["region"] = region.group(1)
    size = _LD_SIZE.search(section.body)
    if size is not None:
        pairs["size"] = size.group(1).strip()
    for child in scripts:
        if child.parent == section.name and child.path == section.path and child.kind is ChunkKind.CONSTANT:
            value = child.body.split("=", 1)[1].rstrip(";").rstrip(")").strip()
            pairs[child.name] = value
    return pairs


def asm_parts(chunk: Chunk) -> tuple[list[str], list[str]]:
    """Labels (`name @ path:line (section ...)`) and flow (`path:line: instruction`) of one chunk."""
    info = chunk.skeleton.split("\n", 1)[0]
    info = f" ({info[2:]})" if info.startswith("; section ") else ""
    labels: list[str] = []
    flow: list[str] = []
    own = False
    for offset, line in enumerate(chunk.body.split("\n")):
        number = chunk.start_line + offset
        text = line.strip()
        if not text or text.startswith(_ASM_COMMENT) or text == "#":
            continue
        match = _ASM_LABEL.fullmatch(line)
        if match is not None:
            name = match.group(1)
            is_own = name == chunk.name and not own
            own = own or is_own
            labels.append(f"{name} @ {chunk.path}:{number}{info if is_own else ''}")
            text = match.group(2).strip()
            if not text or text.startswith(_ASM_COMMENT):
                continue
        if text.startswith("."):
            continue  # a directive: layout, not flow
        flow.append(f"{chunk.path}:{number}: {text}")
    if not own:
        labels.insert(0, f"{chunk.name} @ {chunk.path}:{chunk.start_line}{info}")
    return labels, flow


def asm_many(chunks: Sequence[Chunk]) -> tuple[list[str], list[str]]:
    labels: list[str] = []
    flow: list[str] = []
    for chunk in chunks:
        more_labels, more_flow = asm_parts(chunk)
        labels += more_labels
        flow += more_flow
    return labels, flow
