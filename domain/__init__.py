"""docket's pure core: events, aggregates, canonical JSON and the hash chain.

Nothing here touches files, databases, git, processes, the clock or randomness.
"""
