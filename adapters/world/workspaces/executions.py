"""Executions: repositories of their own detached at a candidate commit, where one check runs, inspected afterwards.

An execution lives at ``<root>/executions/<repository key>/<run>/<binding>/<check>-<attempt>`` (paths.py: root is
[workspace] root, else docket's data folder), outside the user's repository and outside every agent's workspace:
made in-process like a task's workspace (own_repositories.py: its own git dir borrowing the user's objects, a
checkout in a staging folder, one rename into place), with a detached HEAD. Its folder comes from the repository's
pool of executions and goes back to it (execution_pool.py): brought to the commit by writing only the paths that
differ, observed and inspected by stat against records kept outside it. Nothing here follows a symlink inside the
execution.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from ....domain.effects import ExecutionInspection, ExecutionObservation
from ....domain.kernel.errors import BadInput, Refused
from ....domain.kernel.names import has_unsafe_characters
from .execution_pool import POOL, clear_idle, discard_records, place, records_of, remnant, sweep, untrusted
from .execution_return import give_back, inspect_placed, observe_placed
from ..git.own_repositories import borrows_from, make_own_repository, read_own_repository
from ..files.paths import executions_root, repository_key
from ..git.repository import make_parents, making_worktrees, open_repo, remove_checkout, unsafe_parent
from ....domain.kernel.codes import Code
from ..git.flat_trees import flattened

__all__ = ["create_execution", "empty_execution_folders", "execution_path", "execution_remnants", "idle_executions",
           "inspect_execution", "observe_execution", "remove_execution", "untrusted_pool_entries"]

_LINK_MODE, _GITLINK_MODE = 0o120000, 0o160000


def execution_path(common: Path, run: str, binding: str, check: str, attempt: int, root: Path | None = None) -> Path:
    """``<root>/executions/<repository key>/<run>/<binding>/<check>-<attempt>``; BadInput ``bad-execution-path``
    unless each part is one safe path component and attempt is a positive integer."""
    for part in (run, binding, check):
        if not part or "/" in part or "\0" in part or part.startswith(".") or has_unsafe_characters(part):
            raise BadInput(Code.BAD_EXECUTION_PATH, f"{part!r} is not a single safe path component")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise BadInput(Code.BAD_EXECUTION_PATH, f"attempt {attempt!r} is not a positive integer")
    return executions_root(Path(common), root) / run / binding / f"{check}-{attempt}"


def _anchor(path: Path) -> Path:
    """``<root>`` of ``<root>/executions/<key>/<run>/<binding>/<name>``: the parents below it are docket's."""
    return path.parents[4] if len(path.parents) > 4 else path.parent


def is_execution_place(common: Path, path: Path) -> bool:
    """Whether path (as spelled) is ``.../executions/<common's key>/<run>/<binding>/<name>``, safe names only."""
    parts = Path(path).parts
    if len(parts) < 6 or parts[-5] != "executions" or parts[-4] != repository_key(common):
        return False
    return all(p not in ("", ".", "..") and not p.startswith(".") for p in parts[-3:])


def observe_execution(repository: Path, path: Path, commit: str) -> ExecutionObservation:
    """absent (nothing at path; a stale admin entry naming it is harmless), ready (this repository's registered
    linked worktree, detached at commit, index and files exactly the commit's tree, no untracked file at all, ignored
    ones included), diverged (anything else; detail says what) or unreadable. Never raises."""
    from dulwich.errors import NotGitRepository

    repository, path = Path(repository), Path(path)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return ExecutionObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    with repo:
        try:
            with making_worktrees(repository, exclusive=False):
                return _observe(repo, repository, path, commit)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            return ExecutionObservation("unreadable", detail=f"cannot read {path} or {repository}: {e}")


def create_execution(repository: Path, path: Path, commit: str) -> None:
    """From absent only: an execution of its own at path, detached at commit (a commit of the repository), appearing whole.

    Stale admin entries naming path and staging leftovers of an interrupted
    creation are removed first. Any other state of the world is left alone
    (observe again); only OSError for real I/O failures propagates, and Refused
    ``execution-unsafe-tree`` for a commit whose tree names a path git would
    refuse to write ('..', '.git', an absolute path), after undoing the creation.
    """
    from dulwich.errors import NotGitRepository
    from dulwich.index import InvalidPathError
    from dulwich.objects import Commit

    repository, path = Path(repository), Path(path)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return
    with repo:
        try:
            if not isinstance(repo[commit.encode("ascii")], Commit):
                return
        except (KeyError, ValueError, UnicodeEncodeError):
            return
        with making_worktrees(repository, exclusive=True):
            observed = _observe(repo, repository, path, commit)
            if observed.state == "unsafe":  # nothing made: the effector records this as the check's outcome
                raise Refused(Code.EXECUTION_UNSAFE_TREE, observed.detail)
            if observed.state != "absent":
                return
            anchor = _anchor(path)
            anchor.mkdir(mode=0o700, parents=True, exist_ok=True)  # the data folder (or [workspace] root)
            if not make_parents(anchor, path.parent):
                return
            for leftover in path.parent.glob(f".{path.name}.*.partial"):
                shutil.rmtree(leftover, ignore_errors=True)
            try:
                if is_execution_place(repository, path) and place(repository, path, commit):
                    return
                make_own_repository(repository, path, head=commit, commit=commit, branch=None)
            except InvalidPathError as e:  # undone already: nothing is left at the path
                raise Refused(Code.EXECUTION_UNSAFE_TREE,
                              f"commit {commit} names {e.args[0]!r}, which cannot be checked out safely") from None


def inspect_execution(repository: Path, path: Path, commit: str) -> ExecutionInspection:
    """After a check: matching, mutated or missing. Never raises (what cannot be read counts as mutated).

    The check ran on exactly the pinned commit if HEAD and the tracked content
    are still the pin's. missing: nothing at path, or no worktree of this
    repository there. mutated: path is a symlink or not a folder, HEAD is not
    detached at commit, or the index or any tracked file (its mode, its content,
    a symlink or a folder where it was) differs from the commit's tree. What the
    check wrote for itself, untracked files ignored by git or not (bytecode,
    caches, reports), is its own output and never a mutation; files under the
    artifact folder among them are copied back by the caller.
    """
    from dulwich.errors import NotGitRepository

    repository, path = Path(repository), Path(path)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return ExecutionInspection("mutated", detail=f"cannot open repository {repository}: {e}")
    with repo:
        try:
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return ExecutionInspection("missing", detail=f"nothing at {path}")
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
                return ExecutionInspection("mutated", detail=f"{path} is a symlink or not a folder")
            own = read_own_repository(path)
            if own is None or not borrows_from(own, repository):
                return ExecutionInspection("missing", detail=f"{path} is no execution of {repository}")
            if own.head != commit:
                return ExecutionInspection("mutated", detail=f"HEAD is {own.head}, not detached at {commit}")
            records = records_of(path) if is_execution_place(repository, path) else None
            if records is not None and records.commit == commit:
                change = inspect_placed(repo, path, records, commit)
                return ExecutionInspection("matching") if change is None else ExecutionInspection("mutated",
                                                                                                  detail=change)
            change = _first_change(repo, path, path / ".git", commit, untracked_count=False)
            if change is not None:
                return ExecutionInspection("mutated", detail=change)
            return ExecutionInspection("matching")
        except (OSError, UnicodeDecodeError, ValueError, KeyError) as e:
            return ExecutionInspection("mutated", detail=f"cannot inspect {path}: {e}")


def execution_remnants(repository: Path, path: Path) -> bool:
    """Whether a removal killed half-way left something of the execution at path: its folder set aside and not yet
    deleted, or given back to the pool and not yet recorded idle there. (observe_execution calls the path absent then: a new execution may be
    made there, but the removal is not finished.) Never raises."""
    repository, path = Path(repository), Path(path)
    try:
        return any(path.parent.glob(f".{path.name}.*.removing")) or (is_execution_place(repository, path)
                                                                     and remnant(path))
    except OSError:
        return False


def remove_execution(repository: Path, path: Path, *, group_alive: bool) -> None:
    """Remove the execution's folder (never following a symlink).

    Refused ``execution-busy`` while the check's process group is alive (pass
    True when its liveness is unknown). An unregistered, absent path is already
    removed. Only OSError for real I/O failures propagates.
    """
    repository, path = Path(repository), Path(path)
    if group_alive:
        raise Refused(Code.EXECUTION_BUSY, f"the check running in {path} is still alive; stop its process group first")
    if not is_execution_place(repository, path):
        raise ValueError(f"{path} is not an execution place of {repository}")
    with making_worktrees(repository, exclusive=True):
        if unsafe_parent(_anchor(path), path) is not None:
            return  # a symlinked parent was planted: removing through it would reach outside docket's folders
        records = records_of(path)
        if records is not None and _is_folder(path) and os.lstat(path).st_ino == records.top_ino:
            give_back(repository, path, records)  # reused by the next execution, not removed file by file
        else:
            discard_records(path)
        remove_checkout(repository, path)
        sweep(path)  # what a give back killed half-way left in the pool
        for folder in (path.parent, path.parent.parent):  # <binding>, then <run>, once nothing is left in them
            try:
                os.rmdir(folder)
            except OSError:
                break


def empty_execution_folders(repository: Path, root: Path | None = None, *, apply: bool) -> list[Path]:
    """The ``<run>/<binding>`` folders under the repository's executions root that hold nothing (a crash between
    making one and renaming an execution into it leaves it); apply removes each, and its run folder once that is
    empty too, under the worktrees lock (no execution is being made meanwhile). A symlink is never entered."""
    base = executions_root(Path(repository), root)
    found: list[Path] = []
    with making_worktrees(Path(repository), exclusive=apply):
        if unsafe_parent(base.parent.parent, base / "x") is not None or not _is_folder(base):
            return []
        for run in sorted(os.listdir(base)):
            if run.startswith("."):
                continue  # the pool (execution_pool.py), not a run's
            run_folder = base / run
            if not _is_folder(run_folder):
                continue
            bindings = sorted(os.listdir(run_folder))
            empty = [run_folder / b for b in bindings if _is_folder(run_folder / b) and not os.listdir(run_folder / b)]
            found += empty if bindings else [run_folder]  # a run folder left empty itself
            if apply:
                for folder in empty:
                    os.rmdir(folder)
                if not os.listdir(run_folder):
                    os.rmdir(run_folder)
    return found


def idle_executions(repository: Path, root: Path | None = None, *, keep: int, apply: bool) -> list[Path]:
    """The idle folders of the repository's pool of executions beyond the newest keep (execution_pool.py); apply
    removes them, under the worktrees lock. A placed execution is never one of them."""
    return _in_pool(repository, root, apply, lambda pool: clear_idle(pool, keep=keep, apply=apply))


def untrusted_pool_entries(repository: Path, root: Path | None = None, *, apply: bool) -> list[Path]:
    """What the repository's pool of executions holds that no trustworthy record describes (a give back or a
    placement killed half-way); apply discards it, under the worktrees lock."""
    return _in_pool(repository, root, apply, lambda pool: untrusted(pool, apply=apply))


def _in_pool(repository: Path, root: Path | None, apply: bool, found) -> list[Path]:  # noqa: ANN001
    base = executions_root(Path(repository), root)
    pool = base / POOL
    with making_worktrees(Path(repository), exclusive=apply):
        if unsafe_parent(base.parent.parent, pool) is not None or not _is_folder(pool):
            return []
        return [pool / name for name in found(pool)]


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _absent_or_unsafe(repo, commit: str) -> ExecutionObservation:  # noqa: ANN001
    """absent, or unsafe when the commit's tree names a path no checkout may write ('.GIT/hooks', pinned before the
    capture refused it) or nests past MAX_TREE_DEPTH: making it would raise on every pass, with no outcome recorded,
    and stop the whole run; observed here, it is that check's failed outcome."""
    from dulwich.objects import Commit

    try:
        found = repo[commit.encode("ascii")]
        if isinstance(found, Commit):
            flattened(repo.object_store, found.tree)
    except Refused as e:
        if e.code in (Code.UNSAFE_TREE_PATH, Code.TREE_TOO_DEEP):
            return ExecutionObservation("unsafe", detail=f"commit {commit} cannot be checked out safely ({e.code}): "
                                                         f"{e.message.split('; nothing was pinned')[0]}"[:4000])
        return ExecutionObservation("unreadable", detail=f"commit {commit}: {e.message}"[:4000])
    except (KeyError, ValueError):
        pass  # making it says what is missing, as before
    return ExecutionObservation("absent")


def _observe(repo, common: Path, path: Path, commit: str) -> ExecutionObservation:  # noqa: ANN001
    def diverged(detail: str) -> ExecutionObservation:
        return ExecutionObservation("diverged", detail=detail)

    unsafe = unsafe_parent(_anchor(path), path)
    if unsafe is not None:
        return diverged(f"{unsafe}, a parent of {path}, is a symlink or not a directory (not followed)")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return _absent_or_unsafe(repo, commit)
    if stat.S_ISLNK(st.st_mode):
        return diverged(f"{path} is a symlink (not followed)")
    if not stat.S_ISDIR(st.st_mode):
        return diverged(f"{path} is a file, not an execution")
    own = read_own_repository(path)
    if own is None or not borrows_from(own, common):
        return diverged(f"{path} is not an execution of {common}")
    if own.head != commit:
        return diverged(f"the execution at {path} has HEAD {own.head}, not detached at {commit}")
    records = records_of(path) if is_execution_place(common, path) else None
    if records is not None:
        change = observe_placed(path, records, commit)
        return ExecutionObservation("ready") if change is None else diverged(
            f"the execution at {path} is not clean: {change}")
    change = _first_change(repo, path, path / ".git", commit, untracked_count=True)
    if change is not None:
        return diverged(f"the execution at {path} is not clean: {change}")
    return ExecutionObservation("ready")


def _first_change(repo, root: Path, admin: Path, commit: str, *, untracked_count: bool) -> str | None:  # noqa: ANN001
    """The first difference between the worktree at root (and its index) and the commit's tree; None if none.

    untracked_count: any untracked file is a difference, ignored or not (a fresh
    execution must be exactly the commit). Otherwise only the tracked content
    is compared, and folders the tree does not have are not even entered.
    """
    from dulwich.index import ConflictedIndexEntry, Index

    tree = repo[repo[commit.encode("ascii")].tree]
    expected = {e.path.decode("utf-8", "surrogateescape"): (e.mode, e.sha.decode("ascii"))
                for e in repo.object_store.iter_tree_contents(tree.id)}
    try:
        index = Index(str(admin / "index"))
    except FileNotFoundError:
        return "the worktree has no index"
    staged = {}
    for name, entry in index.items():
        if isinstance(entry, ConflictedIndexEntry):
            return f"{name.decode(errors='replace')} has a merge conflict in the index"
        staged[name.decode("utf-8", "surrogateescape")] = (entry.mode, entry.sha.decode("ascii"))
    if staged != expected:
        differing = sorted(set(staged.items()) ^ set(expected.items()))
        return f"the index differs from the commit at {differing[0][0]}"
    tracked_folders = {p.rsplit("/", 1)[0] for p in expected if "/" in p}
    tracked_folders |= {f.rsplit("/", i)[0] for f in list(tracked_folders) for i in range(1, f.count("/") + 1)}

    def skipped(rel: str) -> bool:
        """A folder whose content is not compared: a submodule's, or (untracked files aside) one the tree lacks."""
        if expected.get(rel, (0,))[0] == _GITLINK_MODE:
            return True
        return not untracked_count and rel not in tracked_folders

    seen = set()
    for rel, st in _walk(root, skipped):
        if rel in expected:
            seen.add(rel)
            mode, sha = expected[rel]
            found = _describe(root / rel, st)
            if found is None:
                return f"{rel} is no longer a regular file or symlink"
            if found != (mode, sha):
                return f"tracked {rel} was changed"
            continue
        if untracked_count and not stat.S_ISDIR(st.st_mode):
            return f"untracked {rel} appeared"
    missing = sorted(p for p, (mode, _) in expected.items() if p not in seen and mode != _GITLINK_MODE)
    if missing:
        return f"tracked {missing[0]} was deleted"
    return None


def _walk(root: Path, skipped, rel: str = "") -> Iterator[tuple[str, os.stat_result]]:  # noqa: ANN001
    """Every entry under root (relative, '/'-separated) with its lstat, folders before what they hold; the
    top-level .git is skipped, symlinked folders are not entered, nor folders for which skipped(rel) is true."""
    for name in sorted(os.listdir(root / rel if rel else root)):
        if not rel and name == ".git":
            continue
        child = f"{rel}/{name}" if rel else name
        st = os.lstat(root / child)
        if stat.S_ISDIR(st.st_mode) and skipped(child):
            continue
        yield child, st
        if stat.S_ISDIR(st.st_mode):
            yield from _walk(root, skipped, child)


def _describe(path: Path, st: os.stat_result) -> tuple[int, str] | None:
    """(git mode, blob id) of a regular file or symlink, read without following it; None for anything else."""
    if stat.S_ISLNK(st.st_mode):
        data = os.fsencode(os.readlink(path))
        mode = _LINK_MODE
    elif stat.S_ISREG(st.st_mode):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        mode = 0o100755 if st.st_mode & 0o100 else 0o100644
    elif stat.S_ISDIR(st.st_mode):
        return (_GITLINK_MODE, "")  # a folder where a tracked file was: never equal to what the tree names
    else:
        return None
    return mode, hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
