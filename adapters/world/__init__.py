"""The world: the chained store and plain reader, git, files, identity, paths, clock, crash points."""
