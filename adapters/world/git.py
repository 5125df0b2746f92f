"""Git through dulwich: the real GitPort (more git effects arrive with later issues)."""

from __future__ import annotations

from pathlib import Path

from ...domain.effects import BranchObservation
from .identity import read_identity

__all__ = ["DulwichGit", "observe_branch"]


class DulwichGit:
    """The GitPort over repositories on disk, read in-process with dulwich."""

    def identity(self, repository: Path) -> str | None:
        return read_identity(repository)

    def observe_branch(self, repository: Path, branch: str) -> BranchObservation:
        return observe_branch(repository, branch)


def observe_branch(repository: Path, branch: str) -> BranchObservation:
    """Which commit refs/heads/<branch> names in the repository, read with dulwich."""
    from dulwich.errors import NotGitRepository
    from dulwich.objects import Commit
    from dulwich.repo import Repo

    try:
        repo = Repo(str(repository))
    except (NotGitRepository, OSError) as e:
        return BranchObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    try:
        ref = b"refs/heads/" + branch.encode("utf-8")
        try:
            sha = repo.refs[ref]
        except KeyError:
            return BranchObservation("missing")
        try:
            obj = repo[sha]
        except KeyError:
            return BranchObservation("unreadable", detail=f"{ref.decode()} names missing object {sha.decode()}")
        if not isinstance(obj, Commit):
            return BranchObservation("not-a-commit", detail=f"{ref.decode()} names a {obj.type_name.decode()}")
        return BranchObservation("found", commit=sha.decode("ascii"))
    except OSError as e:
        return BranchObservation("unreadable", detail=f"cannot read {repository}: {e}")
    finally:
        repo.close()
