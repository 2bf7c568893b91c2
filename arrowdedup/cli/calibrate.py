"""`arrowdedup calibrate` (benchmarks and quality issue)."""
