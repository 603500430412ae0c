"""The Model Context Protocol server: pagedctx tools for coding agents."""
