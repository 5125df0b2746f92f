"""The ledger kernel: the ledger application, the effector and its intents, the ports, the views, replay and verification."""
