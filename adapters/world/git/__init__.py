"""Git through dulwich: objects, trees, refs (created once or moved by compare-and-swap), merges, captures."""
