"""Read models derived only from the ledger: plain SQLite tables in views.sqlite."""
