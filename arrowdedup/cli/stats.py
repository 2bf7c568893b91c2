"""`arrowdedup stats` and `arrowdedup report` (analytics issue)."""
