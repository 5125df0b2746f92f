"""What every aggregate shares: canonical JSON, the hash chain, streams, snapshots, effect decisions, values and names."""
