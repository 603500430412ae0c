"""The turn of a PCP session (P2-P17; DESIGN.md section 3): setup, loop, bus, synthesis, scaffold, sentry."""
