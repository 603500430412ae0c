"""pagedctx.protocol: the formats of PCP, with no I/O (DESIGN.md section 1), one package per format.

- `paged_context/`: the `<PagedContext>` XML and its RELAX NG schema;
- `worker/`: the Worker's instruction grammar (call syntax, JSON, GBNF);
- `code_evidence/`: PCR requests and PCES answers;
- `modules/`: module manifests, folder contracts and envelopes (Cognitive Modules v2.2).

Shared by them, here: token counting (`tokens`, `bpe_crate`) and the budget (`budget`), strict
readers of untrusted JSON and YAML (`_strict_json`, `strict_yaml`), and text that is not Unicode
(`text`). Imports pages (and the errors module).
"""
