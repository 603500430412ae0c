"""pagedctx.configs: data shipped in the wheel (default.yaml, profiles/, modules/). No code."""
