"""`arrowdedup search` and `arrowdedup context` (retrieval issue)."""
