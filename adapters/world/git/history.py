"""A commit's history as a receipt names it: its root commits, and a branch's first-parent line back to a commit.
Read with dulwich, in-process; bounded, so a huge or hostile history cannot hold a seal up for long."""

from __future__ import annotations

from pathlib import Path

from .ids import commit_at
from .repository import open_repo

__all__ = ["first_parents", "root_commits"]

# Commits read at most for the roots: about 60 µs each through dulwich, so a seal waits 6 s at worst; a longer
# history's roots are left unknown (null in the receipt) rather than holding the seal up for a minute.
MAX_WALK = 100_000


def root_commits(repository: Path, commit: str) -> tuple[str, ...] | None:
    """The sorted root commits (no parents) of commit's whole history; None when commit is not in the repository
    or the history could not be read (a shallow clone's cut-off parents are not roots)."""
    from dulwich.errors import NotGitRepository

    try:
        with open_repo(repository) as repo:
            store = repo.object_store
            seen: set[bytes] = set()
            todo = [commit.encode("ascii")]
            roots = []
            while todo:
                sha = todo.pop()
                if sha in seen:
                    continue
                seen.add(sha)
                if len(seen) > MAX_WALK:
                    return None
                parents = commit_at(store, sha).parents
                if not parents:
                    roots.append(sha.decode("ascii"))
                todo.extend(p for p in parents if p not in seen)
            return tuple(sorted(roots))
    except (KeyError, NotGitRepository, OSError, ValueError, AttributeError):
        return None


def first_parents(repository: Path, tip: str, stop: str, limit: int) -> list[str]:
    """tip and its first parents, newest first, up to and with stop, or limit commits, or a root; [] when tip cannot
    be read."""
    from dulwich.errors import NotGitRepository

    found: list[str] = []
    try:
        with open_repo(repository) as repo:
            sha: bytes | None = tip.encode("ascii")
            while sha is not None and len(found) < limit:
                parents = commit_at(repo.object_store, sha).parents  # KeyError for a commit the repository lacks
                found.append(sha.decode("ascii"))
                if found[-1] == stop:
                    break
                sha = parents[0] if parents else None
    except (KeyError, NotGitRepository, OSError, ValueError, AttributeError):
        pass
    return found
