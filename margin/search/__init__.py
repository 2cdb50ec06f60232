"""The per-prompt search and its engine: candidates, strategies, the driver, Ray guard actors,
the verdict cache, resume, shards and merge."""
