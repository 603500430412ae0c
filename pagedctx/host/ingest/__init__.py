"""pagedctx.host.ingest: roots -> files -> chunks in the store, incrementally (S1-S4, P17)."""
