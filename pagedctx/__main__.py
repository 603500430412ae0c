"""`python -m pagedctx` runs the CLI."""

from pagedctx.cli import main

main()
