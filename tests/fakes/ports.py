"""The five fake git ports over one FakeWorld (for tests that drive several at once)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .candidate_refs import FakeCandidateRefs
from .capture import FakeCapture
from .inventory import FakeInventory
from .merges import FakeMerges
from .repository import FakeRepository, FakeWorld
from .workspaces import FakeWorkspaces

__all__ = ["FakeGitPorts"]


class FakeGitPorts:
    """Every fake git port, sharing one world: what one port changes (a worktree made), the others see."""

    def __init__(self, repositories: Mapping[str | Path, FakeRepository] | None = None):
        self.world = FakeWorld(repositories)
        self.capture = FakeCapture(self.world)
        self.candidate_refs = FakeCandidateRefs(self.world)
        self.workspaces = FakeWorkspaces(self.world)
        self.merges = FakeMerges(self.world)
        self.inventory = FakeInventory(self.world)

