"""Benchmarks: one command each (`.venv/bin/python bench/<name>.py`), see docs/performance.md."""
