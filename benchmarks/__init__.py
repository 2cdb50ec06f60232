"""Speed and efficiency benchmarks: `python -m benchmarks.run`."""
