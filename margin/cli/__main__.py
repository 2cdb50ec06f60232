"""`python -m margin.cli`, the same as the `margin` command."""

from margin.cli import main

main()
