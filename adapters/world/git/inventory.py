"""What docket left for a repository, and its compare-and-swap removal: refs under refs/docket/, workspaces and
executions in docket's data folder (worktrees.py, executions.py), a workspace's HEAD, and the removal of a workspace
or an execution (with its branch, which lives inside it) or of a ref.

gc and reconcile list with these, decide from the ledger, then remove. Listing never raises; removal acts only on
the state it was told to expect, raises nothing for any other state of the world (the caller observes again) and
lets OSError for real I/O failures propagate. Nothing here follows a symlink in docket's folders.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from ....domain.effects import BranchObservation, DocketWorktree
from ....domain.kernel.errors import BadInput, Refused
from ....domain.kernel.names import check_branch_name
from .own_repositories import borrows_from, read_own_repository
from ..files.paths import executions_root, repository_key, workspaces_root
from .repository import (
    DulwichRepository,
    admin_entries,
    making_worktrees,
    observe_branch,
    open_repo,
    read_text,
    ref_tip,
    remove_checkout,
    same,
    unsafe_parent,
)
from ....domain.kernel.codes import Code
from .ids import object_id, ref_name
from .ref_locks import write_ref
from .stale_locks import stale_locks, remove_if_stale

__all__ = [
    "DulwichInventory",
    "branch_tip",
    "check_docket_ref",
    "check_removal",
    "delete_ref",
    "list_docket_refs",
    "list_docket_worktrees",
    "observe_head",
    "owns_branch",
    "remove_worktree",
    "worktree_kind",
]

DOCKET_REFS = "refs/docket/"
IDENTITY = b"docket <docket@localhost>"
_ROOTS = {"task": ("workspaces", 2), "execution": ("executions", 3)}  # kind -> (folder of the data dir, depth)
_OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def worktree_kind(repository: Path, path: Path) -> str | None:
    """task or execution when path (as spelled, not resolved) names a place docket puts workspaces or executions
    for this repository (``.../workspaces/<key>/<run>/<task>``, ``.../executions/<key>/<run>/<binding>/<name>``,
    under any root: [workspace] root may choose it), else None."""
    parts = Path(path).parts
    for kind, (folder, depth) in _ROOTS.items():
        if len(parts) < depth + 3 or parts[-depth - 2] != folder or parts[-depth - 1] != repository_key(repository):
            continue
        if all(p not in ("", ".", "..") and not p.startswith(".") for p in parts[-depth:]):
            return kind
    return None


def _anchor(path: Path) -> Path:
    """The root docket's place at path hangs from (the data folder, or [workspace] root)."""
    depth = _ROOTS["execution"][1] if len(Path(path).parts) > 5 and Path(path).parts[-5] == "executions" else 2
    return Path(path).parents[depth + 1]


# Listing ---------------------------------------------------------------------------------------------------------


def list_docket_refs(repository: Path) -> list[tuple[str, str]]:
    """Every ref under refs/docket/, loose or packed, with the object id it names, sorted by name.

    Never raises: an unreadable repository lists nothing, and a ref git would
    skip as broken (an invalid name, a symbolic ref that resolves to nothing,
    content that is no object id) is left out, as `git for-each-ref` leaves it.
    """
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return []
    with repo:
        try:
            found = []
            for name in sorted(repo.refs.keys(base=ref_name(DOCKET_REFS))):
                ref = DOCKET_REFS.encode() + name
                try:
                    oid = repo.refs[ref_name(ref)].decode("ascii")
                except (KeyError, OSError, ValueError, UnicodeDecodeError):
                    continue
                if _OBJECT_ID.fullmatch(oid):
                    found.append((ref.decode("utf-8", "surrogateescape"), oid))
            return found
        except OSError:
            return []


def list_docket_worktrees(repository: Path, root: Path | None = None) -> list[DocketWorktree]:
    """Everything at ``<data>/workspaces/<key>/<run>/<task>`` and ``<data>/executions/<key>/<run>/<binding>/<name>``
    (paths.py; root: [workspace] root, else the data folder), one value a path, sorted by path.

    Names starting with "." (staging and removal leftovers) are not listed.
    detail is set exactly for what is no workspace docket made: anything where
    a folder should be that is not one (a symlink, a file, a folder that cannot
    be read: listed at its own path, never followed or entered), a folder that
    is no repository of its own borrowing this repository's objects. Never
    raises: what cannot be read is listed with a detail.
    """
    from dulwich.errors import NotGitRepository

    repository = Path(repository)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        repo = None  # folders and admin entries can still be listed; branch tips cannot be resolved
    try:
        with making_worktrees(repository, exclusive=False):
            return _inventory(repo, repository, root)
    except (OSError, UnicodeDecodeError):
        return []
    finally:
        if repo is not None:
            repo.close()


def observe_head(repository: Path, worktree: Path) -> tuple[str | None, str | None]:
    """(head, branch) of the worktree at path: the commit its HEAD resolves to, and the branch (short name) HEAD is
    a symbolic ref to. Read from the admin entry the folder's .git names back; the folder gone, from a stale entry
    naming path. (None, None) when there is no such entry or nothing can be read; never raises."""
    from dulwich.errors import NotGitRepository

    repository, worktree = Path(repository), Path(worktree)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return None, None
    with repo:
        try:
            with making_worktrees(repository, exclusive=False):
                head, branch, _ = _head_of(repo, repository, worktree)
                return head, branch
        except (OSError, UnicodeDecodeError):
            return None, None


def owns_branch(repository: Path, path: Path) -> str | None:
    """The branch the worktree at path (or a stale admin entry naming it) has checked out; None if detached or none."""
    return observe_head(repository, path)[1]


def branch_tip(repository: Path, branch: str) -> str | None:
    """The commit refs/heads/<branch> names; None when it is missing, names no commit, or cannot be read."""
    return observe_branch(repository, branch).commit


# Removal ---------------------------------------------------------------------------------------------------------


def remove_worktree(repository: Path, path: Path, *, expected_head: str | None, branch: str | None,
                    group_alive: bool = False) -> None:
    """Compare-and-swap removal of a worktree docket made (a task's or an execution's), then of its branch.

    Refused ``worktree-busy`` while group_alive (pass True when the liveness of
    the group that may write there is unknown). BadInput ``bad-worktree-path``
    unless path is at a worktree place in docket's folders (see worktree_kind),
    ``bad-branch-name`` for a branch name git refuses.

    Acts only when: no parent between the common dir and path is a symlink; path
    is a folder or nothing (a symlink or file is left alone); the folder, if
    there, is this repository's registered worktree whose HEAD is at
    expected_head (None: any HEAD; an unregistered folder is removed only then)
    and, when branch is given, attached to that branch. Then the folder is
    renamed aside and deleted, every admin entry naming path goes, and last
    refs/heads/<branch> is deleted only while it names expected_head (None: the
    HEAD the worktree had) and no other checkout has it out. Replaying after a
    crash anywhere finishes the job. The caller proves first that nothing
    uncommitted is lost (a pinned capture); HEAD is compared here.
    """
    from dulwich.errors import NotGitRepository

    repository, path = Path(repository), Path(path)
    check_removal(repository, path, branch=branch, group_alive=group_alive)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return
    with repo:
        with making_worktrees(repository, exclusive=True):
            _remove(repo, repository, path, expected_head, branch)


def check_removal(repository: Path, path: Path, *, branch: str | None, group_alive: bool) -> None:
    """What remove_worktree refuses before looking at the world (the fake shares it)."""
    if group_alive:
        raise Refused(Code.WORKTREE_BUSY, f"a process group may still write in {path}; stop it first")
    if worktree_kind(repository, path) is None:
        raise BadInput(Code.BAD_WORKTREE_PATH, f"{path} is not a workspace or execution place of {repository}")
    if branch is not None:
        check_branch_name(branch)


def check_docket_ref(ref: str) -> str:
    """ref itself when it is a well-formed ref under refs/docket/; BadInput ``bad-ref`` otherwise."""
    try:
        check_branch_name(ref)  # git's rules for any ref name, and docket's safe-to-show ones
    except BadInput:
        raise BadInput(Code.BAD_REF, f"{ref!r} is not a well-formed ref name") from None
    if not ref.startswith(DOCKET_REFS):
        raise BadInput(Code.BAD_REF, f"{ref} is not under {DOCKET_REFS}: docket deletes only its own refs")
    return ref


def delete_ref(repository: Path, ref: str, expected: str) -> None:
    """Delete ref (under refs/docket/, else BadInput ``bad-ref``) only while it names expected; absent counts as
    deleted, anything else is left alone. Only OSError for real I/O failures propagates."""
    from dulwich.errors import NotGitRepository

    check_docket_ref(ref)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return

    with repo:  # a lock held now (another process changing the ref): observing again tells what became of it
        write_ref(repo, ref, lambda: repo.refs.remove_if_equals(ref_name(ref), object_id(expected),
                                                                committer=IDENTITY, message=b"docket: delete ref"))


# Inside ----------------------------------------------------------------------------------------------------------


def _inventory(repo, common: Path, root: Path | None) -> list[DocketWorktree]:  # noqa: ANN001
    found = []
    tops: tuple[tuple[Literal["task", "execution"], Path], ...] = (
        ("task", workspaces_root(common, root)), ("execution", executions_root(common, root)))
    for kind, top in tops:
        for path, detail in _places(top, _ROOTS[kind][1]):
            head, branch, admin = _head_of(repo, common, path)
            registered = admin is not None
            if not detail and not registered:
                detail = f"{path} is not a workspace of {common}"
            found.append(DocketWorktree(str(path), kind, True, registered, branch, head, admin, detail))
    return sorted(found, key=lambda w: w.path)


def _places(root: Path, depth: int) -> Iterator[tuple[Path, str]]:
    """What is at depth folders below root (dot names skipped): (path, "") for a folder at that depth, (path, why)
    for anything at or above it that is not a folder that can be entered. Never follows a symlink."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        yield root, _not_a_folder(root, st)
        return
    if depth == 0:
        yield root, ""
        return
    try:
        names = sorted(os.listdir(root))
    except OSError as e:
        yield root, f"{root} cannot be listed: {e.strerror}"
        return
    for name in names:
        if not name.startswith("."):
            yield from _places(root / name, depth - 1)


def _not_a_folder(path: Path, st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symlink to {os.readlink(path)} (not followed)"
    return f"{path} is a file, not a folder"


def _head_of(repo, common: Path, path: Path) -> tuple[str | None, str | None, str | None]:  # noqa: ANN001
    """(head, branch, ".git") of the workspace or execution at path, read from its own git dir; all None unless it
    is a repository of its own borrowing common's objects."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None, None
    if not stat.S_ISDIR(st.st_mode):
        return None, None, None
    try:
        own = read_own_repository(path)
    except (OSError, UnicodeDecodeError):
        own = None
    if own is None or not borrows_from(own, common):
        return None, None, None
    text = own.head or ""
    if text.startswith("ref: refs/heads/"):
        branch = text[len("ref: refs/heads/"):]
        try:
            with open_repo(path) as workspace:
                return ref_tip(workspace, f"refs/heads/{branch}"), branch, ".git"
        except Exception:  # noqa: BLE001  an unreadable workspace: its HEAD is unknown
            return None, branch, ".git"
    return (text if _OBJECT_ID.fullmatch(text) else None), None, ".git"


def _remove(repo, common: Path, path: Path, expected_head: str | None, branch: str | None) -> None:  # noqa: ANN001
    if unsafe_parent(_anchor(path), path) is not None:
        return  # a planted symlink on the way: removing through it would reach outside docket's folders
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        return  # a symlink or a file where the worktree was: not docket's to remove
    head, on, admin = _head_of(repo, common, path)
    if st is not None:
        if admin is None and (expected_head is not None or branch is not None):
            return  # an unregistered folder: its HEAD cannot be compared
        if expected_head is not None and head != expected_head:
            return
        if branch is not None and on != branch:
            return
    remove_checkout(common, path)
    if branch is None:
        return
    expected = expected_head if expected_head is not None else (head if on == branch else None)
    if expected is None or _checked_out_elsewhere(common, branch):
        return
    from dulwich.file import FileLocked

    try:
        repo.refs.remove_if_equals(f"refs/heads/{branch}".encode(), expected.encode("ascii"), committer=IDENTITY,
                                   message=b"docket: remove worktree branch")
    except FileLocked:
        pass  # another process is changing the branch now: observing again tells what became of it


def _checked_out_elsewhere(common: Path, branch: str) -> bool:
    """Whether another worktree's admin entry or the main checkout has refs/heads/<branch> as HEAD."""
    head = f"ref: refs/heads/{branch}"
    return any(e.head == head for e in admin_entries(common)) or read_text(common / "HEAD") == head


class DulwichInventory(DulwichRepository):
    """The InventoryPort over repositories on disk."""

    def observe_branch(self, repository: Path, branch: str) -> BranchObservation:
        return observe_branch(repository, branch)

    def branch_tip(self, repository: Path, branch: str) -> str | None:
        return branch_tip(repository, branch)

    def list_docket_refs(self, repository: Path) -> list[tuple[str, str]]:
        return list_docket_refs(repository)

    def list_docket_worktrees(self, repository: Path, root: Path | None = None) -> list[DocketWorktree]:
        return list_docket_worktrees(repository, root)

    def observe_head(self, repository: Path, worktree: Path) -> tuple[str | None, str | None]:
        return observe_head(repository, worktree)

    def owns_branch(self, repository: Path, path: Path) -> str | None:
        return owns_branch(repository, path)

    def remove_worktree(self, repository: Path, path: Path, *, expected_head: str | None, branch: str | None,
                        group_alive: bool = False) -> None:
        remove_worktree(repository, path, expected_head=expected_head, branch=branch, group_alive=group_alive)

    def delete_ref(self, repository: Path, ref: str, expected: str) -> None:
        delete_ref(repository, ref, expected)

    def stale_locks(self, repository: Path) -> list[str]:
        return [str(lock) for lock in stale_locks(Path(repository))]

    def remove_stale_lock(self, repository: Path, lock: str) -> bool:
        path = Path(lock)
        return path not in stale_locks(Path(repository)) or remove_if_stale(path)
