"""What a session leaves behind (P3, P12, P14): trace, page registry, memory, export, JSON report, HTML view.

`trace` (one JSONL event per round), `trace_html` (`pagedctx view`: a trace drawn as one HTML
page), the pieces every HTML page shares (`html_page`: the Jinja2 environment, autoescape on, and
`templates/`; `html_text`: visible text, cuts, diffs; `charts`: the SVG charts), `registry` (a
session's state in the store, per round), `memory` and `export` (items kept outside the session),
`report` (the JSON form of a finished session).
"""
