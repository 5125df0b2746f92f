"""What a candidate ref reaches, made whole again after a prune deleted part of it (issue 21, item 3).

A pin's tree and blobs are written by its capture, and the agent's own commits copied in by bring_home, before the
candidate ref names them; ``git gc --prune=now`` in between deletes them (or, having looked before the ref moved,
deletes them just after). What is missing is taken again from where it still is: the workspace's own object store
(the agent's commits, and whatever the workspace made itself), then the worktree's files, captured once more with
every object written where the repository lacks it. The candidate commit itself depends only on its parent, tree and
message, so it is made again byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .object_graphs import missing_objects, wait_out_gc
from .objects import add_object
from ....domain.kernel.errors import DocketError
from .capture import capture
from .blobs import has_object
from .flat_trees import RAW_TREES
from .repository import open_repo

__all__ = ["complete_pin", "restore_pinned"]


def restore_pinned(repo: Any, repository: Path, worktree: Path | None, parent: str, tree: str,
                   base: str | None) -> list[str]:
    """Make parent's history (down to base) and tree whole in repo's object store, from the workspace at worktree
    while it still holds them; the ids still missing (empty: whole)."""
    tips, complete = [parent, tree], [base] if base else []
    store = _KnownTrees(repo.object_store)
    missing = missing_objects(store, tips, complete=complete)
    if not missing:  # the usual case: nothing to take from the workspace, which is not even opened
        return missing
    with _workspace_store(worktree) as source:
        sources = [] if source is None else [source]
        missing = missing_objects(store, tips, complete=complete, sources=sources)
        if missing and worktree is not None and _recaptured(worktree, repository, parent, tree):
            missing = missing_objects(store, tips, complete=complete, sources=sources)
    return missing


class _KnownTrees:
    """A repository's object store whose trees known by id in this process (flat_trees.RAW_TREES: built or read and
    hashed again) are not read again, only found present (a stat of a loose object): what a walk needs to know."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def get_raw(self, sha: bytes) -> tuple[int, bytes]:
        raw = RAW_TREES.get(sha)
        if raw is not None and has_object(self.store, sha):
            return 2, raw
        return self.store.get_raw(sha)

    def __contains__(self, sha: bytes) -> bool:
        return has_object(self.store, sha)

    def __getitem__(self, sha: bytes) -> Any:
        return self.store[sha]

    def add_object(self, obj: Any) -> None:
        self.store.add_object(obj)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def complete_pin(repo: Any, repository: Path, ref: str, parent: str, tree: str, make_commit: Callable[[], Any], *,
                 worktree: Path | None, base: str | None) -> list[str]:
    """After ref moved (or was found) naming the candidate commit of (parent, tree) that make_commit makes again
    (None while parent or tree is missing): every object it reaches (down to base) is in repo's store, written
    again where missing; the ids still missing. A ref that is absent is not this pin's: nothing is done ([])."""

    try:
        named = repo.refs[ref.encode()]
    except KeyError:
        return []
    wait_out_gc(Path(repo.controldir()))
    missing = restore_pinned(repo, repository, worktree, parent, tree, base)
    commit = make_commit()
    if commit is not None and commit.id == named:
        add_object(repo.object_store, commit)
        if not missing:  # the commit's parent history and tree were just found whole: so is what it reaches
            return []
    return missing_objects(_KnownTrees(repo.object_store), [named], complete=[base] if base else [])


def _recaptured(worktree: Path, repository: Path, parent: str, tree: str) -> bool:
    """Capture the worktree again, writing every object of it the repository lacks; whether it still has tree."""

    try:
        again = capture(worktree, expected_head=parent, base=parent, artifact_dir=None, home=repository,
                        rewrite=True)
    except (DocketError, OSError, KeyError, ValueError):
        return False
    return again.tree == tree


class _workspace_store:  # noqa: N801  a context manager read as a function
    """The object store of the workspace at worktree (its own objects, then those it borrows); None without one."""

    def __init__(self, worktree: Path | None) -> None:
        self.worktree, self.repo = worktree, None

    def __enter__(self):  # noqa: ANN204
        from dulwich.errors import NotGitRepository

        if self.worktree is None:
            return None
        try:
            self.repo = open_repo(Path(self.worktree))
        except (NotGitRepository, OSError, KeyError, ValueError):
            return None
        return self.repo.object_store

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        if self.repo is not None:
            self.repo.close()
