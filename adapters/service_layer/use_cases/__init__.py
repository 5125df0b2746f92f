"""Use cases by concept: load the aggregate, decide in the write transaction, drive the intent."""
