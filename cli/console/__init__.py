"""What every command shares: its context (the ledger, the clock, the effector), its output (JSON, text, one error
line), argument parsing, the live view.
"""
