"""Family adapters: each family's own template and parse rule, independent of any backend."""
