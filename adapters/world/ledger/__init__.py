"""The event store: the chained ledger on SQLite or PostgreSQL, its reader, its watch, signing keys."""
