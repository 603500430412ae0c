"""The system instructions a `<PagedContext>` carries (P6, P9), short by default.

`SHORT_INSTRUCTIONS` describe the dense rendering (`pagedctx.protocol.paged_context.render`) and the three
instructions in a few lines: every token of them is paid on every round, before any page.
`LONG_INSTRUCTIONS` are the seed's fuller wording
(`pagedctx.protocol.paged_context.context.SYSTEM_INSTRUCTIONS`), for a model that needs them;
`system_instructions(form)` picks one by name, as a profile would.
"""

from __future__ import annotations

from typing import Literal

from pagedctx.protocol.paged_context.context import SYSTEM_INSTRUCTIONS

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
Node: a page's text (view="Summary": its summary); nested Nodes: an opened page; time: the last \
timestamp above.
Consult(reason, id) zooms in, Shelve(reason, id) out, Explore(reason, handle, keywords) searches a \
block. Never guess; other output is a bus fault."""

LONG_INSTRUCTIONS = SYSTEM_INSTRUCTIONS


def system_instructions(form: InstructionForm = "short") -> str:
    """The instructions of a form: "short" (the default) or "long" (the seed's full wording)."""
    return SHORT_INSTRUCTIONS if form == "short" else LONG_INSTRUCTIONS
