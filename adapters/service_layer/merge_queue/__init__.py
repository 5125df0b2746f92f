"""Use cases of the merge queue: approve, queue, merge and check each step, move the target by compare-and-swap,
and go on from a target someone else moved."""
