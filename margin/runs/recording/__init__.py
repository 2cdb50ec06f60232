"""Recording a run: results, snapshot and curves written from finished searches (`outputs`), shards joined (`merge`), recorded verdicts scored again (`score`, replayed by `recorded`)."""
