"""The CapturePort's fake: what a capture returns is set by the test; trees are what FakeRepository records."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from docket.adapters.world.git.capture import Capture, Unstable
from docket.domain.kernel.errors import Conflict, Refused
from docket.domain.kernel.values import DEFAULT_MAX_FILE_SIZE

from .repository import FakeGitPort, FakeRepository, FakeWorld

__all__ = ["FakeCapture"]


class FakeCapture(FakeGitPort):
    """The CapturePort over FakeRepository values: captures and trees are what the test sets."""

    def __init__(self, world: FakeWorld | Mapping[str | Path, FakeRepository] | None = None):
        super().__init__(world)
        self.captures: dict[Path, Capture | Unstable] = {}  # worktree -> what capture_twice returns
        self.tracked: dict[tuple[str, str], list[str]] = {}  # (commit, folder) -> files its tree holds there
        self.limits: list[int] = []  # the max_file_size of each capture_twice, in order

    def capture_twice(self, worktree: Path, *, expected_head: str | None, base: str,
                      artifact_dir: str | None, repository: Path | None = None,
                      max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Capture | Unstable:
        """What the test set in ``captures[worktree]``; raises as capture does when nothing is set or HEAD moved.
        max_file_size is recorded in ``limits`` (the fake has no files to measure)."""
        self.limits.append(max_file_size)
        found = self.captures.get(Path(worktree))
        if found is None:
            raise Refused("worktree-unreadable", f"{worktree} is not a git worktree (no capture set in the fake)")
        head = found.head if isinstance(found, Capture) else found.first.head
        if expected_head is not None and head != expected_head:
            raise Conflict("head-moved", f"HEAD of {worktree} is {head}, not the expected {expected_head}")
        return found

    def commit_tree(self, repository: Path, commit: str) -> str:
        return self.repositories[Path(repository)].commits[commit][1]

    def tree_paths(self, repository: Path, commit: str, folder: str) -> list[str]:
        return sorted(self.tracked.get((commit, folder.strip("/")), ()))

    def changed_paths(self, repository: Path, base: str, commit: str) -> tuple[str, ...]:
        """Every path changed in a worktree of the repository (the fake keeps no trees' contents)."""
        repo = self.repositories[Path(repository)]
        return tuple(sorted(set().union(*repo.changed.values()))) if repo.changed else ()
