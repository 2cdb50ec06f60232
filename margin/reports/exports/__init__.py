"""A run in the formats other tools read: inspect_ai eval logs, garak report JSONL,
JailbreakBench-style artifacts, SARIF 2.1.0 and JUnit XML (one module per format)."""
