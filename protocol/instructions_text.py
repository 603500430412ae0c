"""The system instructions a `<PagedContext>` carries (P6, P9), short by default (issue 19).

`SHORT_INSTRUCTIONS` describe the dense rendering (`pagedctx.protocol.render`) and the three
instructions in a few lines: every token of them is paid on every round, before any page.
`LONG_INSTRUCTIONS` are the seed's fuller wording (`pagedctx.protocol.context.SYSTEM_INSTRUCTIONS`),
for a model that needs them; `system_instructions(form)` picks one by name, as a profile would.
"""

from __future__ import annotations

from typing import Literal

from pagedctx.protocol.context import SYSTEM_INSTRUCTIONS

__all__ = [
    "INSTRUCTION_FORMS",
    "LONG_INSTRUCTIONS",
    "SHORT_INSTRUCTIONS",
    "InstructionForm",
    "system_instructions",
]

InstructionForm = Literal["short", "long"]
INSTRUCTION_FORMS: tuple[InstructionForm, ...] = ("short", "long")

SHORT_INSTRUCTIONS = """\
Each Node is a page: its text is the full content; view="Summary": a summary only; nested Nodes: \
a Consolidated page opened. A page's time is the last timestamp (or time of day) above it; \
compare it with CURRENT_TIME.
Consult(reason, id): zoom in (Summary, full, opened). Shelve(reason, id): zoom out. \
Explore(reason, handle, keywords): search inside block `handle`.
Never guess: Consult or Explore first. Any other output is a bus fault."""

LONG_INSTRUCTIONS = SYSTEM_INSTRUCTIONS


def system_instructions(form: InstructionForm = "short") -> str:
    """The instructions of a form: "short" (the default) or "long" (the seed's full wording)."""
    return SHORT_INSTRUCTIONS if form == "short" else LONG_INSTRUCTIONS
