"""`CodeModification` (S6): what a model asks to change, anchored on a chunk id, never a line number."""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ActionType", "CodeModification", "ModificationBatch"]


class ActionType(enum.StrEnum):
    MODIFY = "MODIFY"  # replace the chunk with new_content (the whole new definition)
    DELETE = "DELETE"  # remove the chunk
    CREATE_FILE = "CREATE_FILE"  # a new file holding new_content
    INSERT_AFTER = "INSERT_AFTER"  # a new definition right after the chunk
    APPEND = "APPEND"  # a new definition at the end of the file


class CodeModification(BaseModel):
    """One change (S6). Fields are closed: a line number anywhere is refused by the schema itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    file_path: str = Field(min_length=1, description="POSIX path relative to the repository root")
    target_chunk_id: str | None = Field(
        default=None,
        description="`path::Qualified.name` (suffix `#N` for the N-th); MODIFY, DELETE, INSERT_AFTER",
    )
    action_type: ActionType
    new_content: str = Field(default="", description="the whole new AST node (or file, for CREATE_FILE)")
    reasoning: str = ""

    @field_validator("file_path", "target_chunk_id", "new_content", "reasoning")
    @classmethod
    def _utf8(cls, value: str | None) -> str | None:
        """Text is written as UTF-8: a lone surrogate (e.g. JSON `"\\ud800"`) is refused here."""
        if value is not None:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(
                    f"holds a lone surrogate at position {exc.start} (not encodable as UTF-8)"
                ) from None
        return value

    @model_validator(mode="after")
    def _shape(self) -> CodeModification:
        anchored = {ActionType.MODIFY, ActionType.DELETE, ActionType.INSERT_AFTER}
        if self.action_type in anchored and not self.target_chunk_id:
            raise ValueError(f"{self.action_type} needs target_chunk_id (edits are anchored on chunks)")
        if self.action_type not in anchored and self.target_chunk_id:
            raise ValueError(f"{self.action_type} takes no target_chunk_id")
        if self.action_type is not ActionType.DELETE and not self.new_content.strip():
            raise ValueError(f"{self.action_type} needs new_content")
        if self.target_chunk_id and not self.target_chunk_id.startswith(f"{self.file_path}::"):
            raise ValueError(
                f"target_chunk_id {self.target_chunk_id!r} is not in file_path {self.file_path!r}"
            )
        return self


class ModificationBatch(BaseModel):
    """Changes applied all or nothing, in order (two edits to one file: each finds its chunk anew)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    modifications: tuple[CodeModification, ...] = Field(min_length=1)
