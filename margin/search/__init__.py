"""The per-prompt search: candidates, the strategies that decide each prompt's flip cost
(`make.STRATEGIES`: cheapest, exhaustive, adaptive, bon), and what adaptive search builds on
(edits, knock-outs, probes, sweeps, incumbents), with the exact optima it is checked against.

A strategy never calls a guard: the driver that feeds it verdicts, the verdict cache, resume,
shards and merge are `margin.runs`'; the guard actors and pools are `margin.engine`'s."""
