"""The per-prompt search: candidates, strategies and the drivers that run them."""
