"""What a launched process may touch and what a run trusts: sandbox policies, egress, trusted and protected paths, process identity."""
