"""What the index records per file, and what an update reports (S1, P17)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FILE_FORMAT",
    "FastMeta",
    "FileMeta",
    "IndexMeta",
    "IndexStatus",
    "LanguageStats",
    "RootSettings",
    "SkippedFile",
    "UpdateReport",
    "stamp_role",
]


class FileMeta(BaseModel):
    """The full record of an indexed file (`pagedctx/files`), read only when the file changes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    language: str
    size: int = Field(ge=0)
    mtime_ns: int
    sha256: str
    tokens: int = Field(ge=0, description="exact cl100k token count of the whole file")
    lines: int = Field(ge=0)
    chunk_ids: tuple[str, ...] = ()
    errors: tuple[str, ...] = Field(default=(), description="syntax errors tree-sitter recovered from")
    role: str | None = Field(
        default=None,
        description="what the file is for (`file_role.FileRole`: source, test, example, docs, vendored, "
        "generated), from its path, head and the roots' .gitattributes; None: indexed before roles",
    )


# The format of a file's stored records: 2 = its chunks carry their token counts. A file
# whose stamp names another format (an older stamp names none: 1) is read again by the next update.
FILE_FORMAT = 2


@dataclass(frozen=True, slots=True)
class FastMeta:
    """The compact value of `sys/files/meta` (S4: path -> modification time), read every update.

    `mtime_ns:size` decides whether a file is looked at; tokens, chunks and lines let the tree and
    the closing table be built without reading the full records of unchanged files; the file's
    role, when recorded, follows the lines (`...:lines:test:2`), so a derived cache that
    follows these stamps (the selection catalog) sees a role change as a change of the file.
    The last field is the format the file's records were written in (`FILE_FORMAT`); a value
    without one is of format 1.
    """

    mtime_ns: int
    size: int
    tokens: int
    chunks: int
    lines: int
    role: str | None = None
    format: int = FILE_FORMAT

    @property
    def stamp(self) -> str:
        return f"{self.mtime_ns}:{self.size}"

    def encode(self) -> str:
        head = f"{self.mtime_ns}:{self.size}:{self.tokens}:{self.chunks}:{self.lines}"
        if self.format == 1:  # the form of a value written before formats, as it was read
            return f"{head}:{self.role}" if self.role else head
        return f"{head}:{self.role or ''}:{self.format}"

    @classmethod
    def decode(cls, value: str) -> FastMeta:
        parts = value.split(":")
        mtime, size, tokens, chunks, lines = (int(part) for part in parts[:5])
        return cls(mtime, size, tokens, chunks, lines, _role(parts), int(parts[6]) if len(parts) > 6 else 1)

    @staticmethod
    def current(value: str) -> bool:
        """Whether a stored value is of this format (cheap: read for every file by every update)."""
        return value.count(":") == 6 and value.endswith(f":{FILE_FORMAT}")

    @classmethod
    def of(cls, meta: FileMeta) -> FastMeta:
        return cls(meta.mtime_ns, meta.size, meta.tokens, len(meta.chunk_ids), meta.lines, meta.role)


def stamp_role(stamp: str) -> str | None:
    """The role recorded after the lines in a `sys/files/meta` value, or None (indexed before roles)."""
    return _role(stamp.split(":"))


def _role(parts: list[str]) -> str | None:
    return parts[5] if len(parts) > 5 and parts[5] else None


class LanguageStats(BaseModel):
    """Counts per language after an update."""

    model_config = ConfigDict(extra="forbid")

    files: int = 0
    chunks: int = 0
    lines: int = 0


class RootSettings(BaseModel):
    """How a root was indexed: re-indexing it from select, pcr or a session
    reuses these, so it sees the same files `pagedctx index` admitted; an explicit value replaces them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_file_bytes: int = Field(ge=1, description="files larger than this are skipped (too_large)")


class IndexMeta(BaseModel):
    """The index's own record (`pagedctx/index`): its base, roots, their settings and tree handles."""

    model_config = ConfigDict(extra="forbid")

    base: str | None = Field(default=None, description="common parent of every root indexed so far")
    roots: list[str] = Field(default_factory=list)
    settings: dict[str, RootSettings] = Field(
        default_factory=dict, description="absolute root path -> the settings it is indexed with"
    )
    root_handles: list[str] = Field(default_factory=list)
    tree_handles: list[str] = Field(default_factory=list)
    languages: dict[str, LanguageStats] = Field(default_factory=dict, description="totals, kept by deltas")
    last_update: str | None = Field(default=None, description="time of the last update that wrote")
    generation: int = Field(default=0, ge=0, description="bumped by every update that changed the chunks")
    instance: str = Field(default="", description="random id of this index, set by its first update")
    attributes: str = Field(
        default="",
        description="digest of the roots' .gitattributes the file roles were computed with ('' none): "
        "an update that finds another re-reads every file's role",
    )


class SkippedFile(BaseModel):
    """A file or folder the update passed over, with the reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    reason: str
    detail: str


class UpdateReport(BaseModel):
    """What one `Index.update` did."""

    model_config = ConfigDict(extra="forbid")

    base: str
    roots: list[str]
    files: int = Field(description="code files present after the update")
    parsed: list[str] = Field(default_factory=list, description="files (re-)parsed, in path order")
    rehashed: list[str] = Field(default_factory=list, description="mtime changed, content did not")
    removed: list[str] = Field(default_factory=list, description="files deleted since the last update")
    unchanged: int = 0
    chunks: int = Field(default=0, description="chunks in the index after the update")
    symbols: int = Field(default=0, description="distinct symbols defined by the files parsed in this update")
    languages: dict[str, LanguageStats] = Field(default_factory=dict)
    skipped: list[SkippedFile] = Field(default_factory=list)
    syntax_errors: dict[str, int] = Field(default_factory=dict, description="path -> recovered error count")
    empty_roots: dict[str, str] = Field(
        default_factory=dict, description="root (absolute) -> why it holds no indexed file, for people"
    )
    seconds: float = 0.0


class IndexStatus(BaseModel):
    """What the store holds now."""

    model_config = ConfigDict(extra="forbid")

    store: str
    base: str | None
    roots: list[str]
    files: int
    chunks: int
    languages: dict[str, LanguageStats]
    skipped: list[SkippedFile]
    last_update: str | None
    settings: dict[str, RootSettings] = Field(
        default_factory=dict, description="absolute root path -> the settings it is indexed with"
    )
