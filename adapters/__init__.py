"""The world: the chained event store, git, processes, clock and the effector."""
