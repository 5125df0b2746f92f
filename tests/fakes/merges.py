"""The MergePort's fake: integration refs, merges and the target's checkout over FakeRepository values."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from docket.domain.effects import ForeignCommits, IntegrationObservation, MergeResult
from docket.domain.kernel.errors import BadInput
from docket.domain.merge_queue.target_move import CheckoutObservation, TargetObservation

from .repository import FakeGitPort, FakeRepository, FakeWorld, ancestors, ref_value

__all__ = ["FakeMerges"]


class FakeMerges(FakeGitPort):
    """The MergePort over FakeRepository values."""

    def __init__(self, world: FakeWorld | Mapping[str | Path, FakeRepository] | None = None):
        super().__init__(world)
        self.merge_conflicts: dict[tuple[str, str], tuple[str, ...]] = {}  # (head, candidate) -> conflicting paths
        self.line_changes: dict[tuple[str, str], dict] = {}  # (first, second) -> path -> (first's hunks, second's)
        # a checkout's index and files: the commit they are clean at (absent: at whatever its branch names), or its
        # local changes
        self.checkouts: dict[Path, str | tuple[str, ...]] = {}

    def observe_integration(self, repository: Path, ref: str, expected_parent: str,
                            candidate_commit: str) -> IntegrationObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return IntegrationObservation("unreadable", detail=f"cannot open repository {repository}")
        oid = ref_value(repo, ref)
        if oid is None:
            return IntegrationObservation("missing")
        if oid == expected_parent:
            return IntegrationObservation("at-parent", commit=oid)
        if repo.objects.get(oid) != "commit":
            return IntegrationObservation("diverged", commit=oid, detail=f"{ref} names no commit")
        held = ancestors(repo, oid)
        if expected_parent in held and candidate_commit in held:
            return IntegrationObservation("merged", commit=oid)
        return IntegrationObservation("diverged", commit=oid, detail=f"{ref} names commit {oid}, not this step's")

    def missing_objects(self, repository: Path, tips, complete) -> list[str]:  # noqa: ANN001
        repo = self.repositories.get(Path(repository))
        return sorted(t for t in tips if repo is None or t not in repo.objects)

    def merge_candidate(self, repository: Path, head: str, candidate_commit: str, message: str, *,
                        write: bool = True) -> MergeResult:
        """Merged, unless merge_conflicts names (head, candidate): its tree is a new tree named by both commits."""
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return MergeResult("unreadable", detail=f"cannot open repository {repository}")
        for oid in (head, candidate_commit):
            if repo.objects.get(oid) != "commit":
                return MergeResult("unreadable", detail=f"{oid} is not a commit in the repository")
        if candidate_commit in ancestors(repo, head):
            return MergeResult("already-merged", commit=head, tree=repo.commits.get(head, ((), None))[1])
        conflicts = self.merge_conflicts.get((head, candidate_commit))
        if conflicts is not None:
            return MergeResult("conflicted", conflicts=tuple(sorted(conflicts)))
        tree = hashlib.sha1(f"merged tree {head} {candidate_commit}".encode()).hexdigest()
        repo.objects[tree] = "tree"
        commit = repo.add_commit((head, candidate_commit), tree, message)
        return MergeResult("merged", commit=commit, tree=tree)

    def advance_ref(self, repository: Path, ref: str, expected_old: str | None, new: str, *,
                    remerge: tuple[str, str, str] | None = None) -> None:
        if not ref.startswith("refs/") or ".." in ref or ref.endswith("/"):
            raise BadInput("bad-ref", f"{ref!r} is not a well-formed ref name under refs/")
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable or repo.objects.get(new) != "commit":
            return
        if ref_value(repo, ref) != expected_old:
            return
        if ref.startswith("refs/heads/"):
            repo.branches[ref.removeprefix("refs/heads/")] = new
        else:
            repo.refs[ref] = new

    def observe_target(self, repository: Path, branch: str) -> TargetObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return TargetObservation("unreadable", detail=f"cannot open repository {repository}")
        holder = next((str(path) for path, held in repo.worktrees.items() if held == branch), None)
        main_checkout = Path(repository).parent if Path(repository).name == ".git" else None  # as paths.main_worktree
        checked_out = str(main_checkout) if repo.main_branch == branch and main_checkout else holder
        oid = repo.branches.get(branch)
        if oid is None:
            return TargetObservation("missing", checked_out=checked_out)
        if repo.objects.get(oid) != "commit":
            return TargetObservation("unreadable", commit=oid, detail=f"refs/heads/{branch} names no commit")
        return TargetObservation("found", commit=oid, checked_out=checked_out)

    def observe_checkout(self, worktree: Path, old: str, new: str) -> CheckoutObservation:
        at = self.checkouts.get(Path(worktree), old)
        if isinstance(at, tuple):
            return CheckoutObservation("dirty", at)
        return CheckoutObservation("at-old" if at == old else "at-new" if at == new else "dirty",
                                   () if at in (old, new) else (f"staged against {at}",))

    def update_checkout(self, worktree: Path, old: str, new: str) -> None:
        if self.observe_checkout(worktree, old, new).state == "at-old":
            self.checkouts[Path(worktree)] = new

    def foreign_commits(self, repository: Path, expected: str, found: str) -> ForeignCommits:
        """found's commits that expected does not hold, newest (most recently added) first."""
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return ForeignCommits((), 0, False, False, detail=f"cannot open repository {repository}")
        held = ancestors(repo, expected) if repo.objects.get(expected) == "commit" else set()
        order = list(repo.commits)
        brought = sorted(ancestors(repo, found) - held, key=lambda c: -order.index(c) if c in order else 0)
        return ForeignCommits(tuple(brought), len(brought), bool(held), expected in ancestors(repo, found))

    def changed_lines(self, repository: Path, first: str, second: str, paths):  # noqa: ANN001, ANN201
        """Fake repositories hold no file contents: every path is compared as a whole file, unless line_changes
        names (first, second) with each path's hunks."""
        return dict(self.line_changes.get((first, second), {p: (None, None) for p in paths}))
