"""The CandidateRefsPort's fake: candidate refs and the target's history over FakeRepository values."""

from __future__ import annotations

from pathlib import Path

from docket.domain.effects import CandidateRefObservation, TargetHistory

from .repository import FakeGitPort

__all__ = ["FakeCandidateRefs"]


class FakeCandidateRefs(FakeGitPort):
    """The CandidateRefsPort over FakeRepository values."""

    def observe_candidate(self, repository: Path, ref: str, parent: str, tree: str) -> CandidateRefObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return CandidateRefObservation("unreadable", detail=f"cannot open repository {repository}")
        oid = repo.refs.get(ref)
        if oid is None:
            return CandidateRefObservation("missing")
        kind = repo.objects.get(oid)
        if kind is None:
            return CandidateRefObservation("unreadable", commit=oid, detail=f"{ref} names missing object {oid}")
        if kind != "commit":
            return CandidateRefObservation("diverged", commit=oid, detail=f"{ref} names a {kind}, not a commit")
        parents, named_tree = repo.commits.get(oid, ((), ""))
        if parents != (parent,):
            return CandidateRefObservation("diverged", commit=oid,
                                           detail=f"{ref} names commit {oid} with parents {list(parents)}, not [{parent}]")
        if named_tree != tree:
            return CandidateRefObservation("diverged", commit=oid,
                                           detail=f"{ref} names commit {oid} of tree {named_tree}, not {tree}")
        return CandidateRefObservation("matching", commit=oid)

    def complete_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str, *,
                           worktree: Path | None, base: str | None) -> list[str]:
        return []  # a fake repository's objects are never pruned

    def pin_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str, *,
                      worktree: Path | None = None, base: str | None = None) -> None:
        if self.observe_candidate(repository, ref, parent, tree).state != "missing":
            return
        repo = self.repositories[Path(repository)]
        if repo.objects.get(parent) != "commit" or repo.objects.get(tree) != "tree":
            return
        repo.refs.setdefault(ref, repo.add_commit((parent,), tree, message))

    def release_candidate(self, repository: Path, ref: str, expected_commit: str) -> None:
        repo = self.repositories.get(Path(repository))
        if repo is not None and repo.readable and repo.refs.get(ref) == expected_commit:
            del repo.refs[ref]

    def observe_target_history(self, repository: Path, branch: str, base: str) -> TargetHistory:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return TargetHistory(branch, None, {}, False, detail=f"cannot open repository {repository}")
        tip = repo.branches.get(branch)
        if tip is None:
            return TargetHistory(branch, None, {}, True)
        commits: dict[str, tuple[str, tuple[str, ...]]] = {}
        todo = [tip]
        while todo:
            oid = todo.pop()
            if oid in commits or oid not in repo.commits:
                continue
            parents, tree = repo.commits[oid]
            commits[oid] = (tree, parents)
            if oid != base:
                todo.extend(parents)
        return TargetHistory(branch, tip, commits, True)
