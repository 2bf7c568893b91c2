"""Benchmarks of arrowdedup: `python -m benchmarks run [--quick]` (see benchmarks/common.py)."""
