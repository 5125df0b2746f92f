"""The ledger's nouns one step at a time (run, task, worker, candidate, check, integrate, worktree, lease) and the
settings they read (config, agents).
"""
