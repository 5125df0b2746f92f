"""The record and its care: init, verify, replay, receipts and their proofs, signing keys, reconcile and gc."""
