"""pagedctx.host.code: source code as chunks (S2, S3): tree-sitter parsing, tags queries, skeletons."""
