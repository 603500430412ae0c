"""The Model Context Protocol server (issue 21): pagedctx tools for coding agents."""
