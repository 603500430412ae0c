"""The worker instruction grammar (SPEC P5, P9; seed 002 section 7.3).

A worker answers with instructions: `Consult(reason, id)`, `Explore(reason, handle, keywords)` and
`Shelve(reason, id)`, either in call syntax or inside a v2.2 module envelope. This module turns that
text into validated models, and anything else into a `BusFault` whose message is written for the
model that produced it. The grammar (docs/instructions.md has the full reference):

```
program     := ws instruction (sep instruction)* ws EOF
sep         := ws (';' | newline) ws | ws
instruction := NAME ws '(' ws args ws ')'            NAME: Consult | Explore | Shelve
args        := arg (ws ',' ws arg)* (ws ',')?
arg         := (PARAM ws '=' ws)? value
value       := string | list | bare
string      := "..." | '...'                        JSON escapes; \\' also in '...'
list        := '[' ws (string (ws ',' ws string)* (ws ',')?)? ws ']'
bare        := [A-Za-z0-9_:.-]+                       only for id and handle
ws          := (' ' | TAB | CR | LF)*
```

The parser is hand-written and iterative: no recursion, no eval, linear in the input length.
"""

from pagedctx.protocol.worker._instruction_rules import (
    VALID_FORMS,
    Consult,
    Explore,
    Instruction,
    Shelve,
    WorkerOutput,
    format_instruction,
)
from pagedctx.protocol.worker._instruction_syntax import parse_instructions
from pagedctx.protocol.worker._worker_output import instructions_from_json, parse_worker_output

__all__ = [
    "VALID_FORMS",
    "Consult",
    "Explore",
    "Instruction",
    "Shelve",
    "WorkerOutput",
    "format_instruction",
    "instructions_from_json",
    "parse_instructions",
    "parse_worker_output",
]
