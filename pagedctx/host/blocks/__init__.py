"""PBlock providers (P2, P16, P17): the block model (`base`), text cut into pieces (`cutting`), and the
code, dialogue, document and stream providers."""
