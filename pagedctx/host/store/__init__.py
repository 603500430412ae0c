"""pagedctx.host.store: where state lives (S4; DESIGN.md section 5): embedded SQLite or Redis."""
