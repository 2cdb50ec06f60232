"""The call engine: every model call margin makes (guard verdicts, protected-model
responses, judge outputs) goes through it.

- `book`: one request book — dedup and joining of identical requests, memory, the
  persistent cache, resume replay, attempts and backoff;
- `calls`: the one place a model is called (`call_batch`, `call_remote`);
- pools, chosen by where the model runs: `local` (in this process), `actors` (Ray actors
  with dynamic batches; `batcher`), `stream` (a remote endpoint: requests stream with many
  in flight and no batch barrier; `limits`);
- `loop`: runs the pools around the book; `cluster`: joins or starts Ray;
- `settings`: every setting of how calls are made, defined once (default, flag, YAML keys, help).
"""
