"""The host runtime of a PCP session (P2-P17; DESIGN.md section 3): blocks, synthesis, bus, turn loop."""
