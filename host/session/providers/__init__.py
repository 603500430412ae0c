"""PBlock providers (P2, P17): dialogue, stream, document and code blocks, pieces and pages."""
