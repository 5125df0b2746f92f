"""The merge queue, pure: a run's approvals, its queue and the move of its target branch (the Integration
aggregate), merge commits' trailers, and a target moved by someone else."""
