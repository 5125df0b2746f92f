"""The application layer: use cases, the ledger application, the effector and its registry, views."""
