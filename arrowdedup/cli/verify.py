"""`arrowdedup verify` (reliability issue)."""
