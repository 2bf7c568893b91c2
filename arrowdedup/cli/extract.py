"""`arrowdedup extract`: documents to a segments table (documents-to-store issue)."""
