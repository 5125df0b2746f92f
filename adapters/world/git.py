"""Git through dulwich: the real GitPort (more git effects arrive with later issues)."""

from __future__ import annotations

import errno
import fnmatch
import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...domain.effects import (
    BranchObservation,
    CandidateRefObservation,
    DocketWorktree,
    ExecutionInspection,
    ExecutionObservation,
    IntegrationObservation,
    MergeResult,
    TargetHistory,
    WorktreeObservation,
)
from ...domain.names import check_include_pattern
from .identity import read_identity
from .paths import main_worktree

if TYPE_CHECKING:
    from ...domain.integration import CheckoutObservation, TargetObservation
    from .capture import Capture, Unstable

__all__ = ["DulwichGit", "copy_includes", "create_worktree", "observe_branch", "observe_worktree"]


class DulwichGit:
    """The GitPort over repositories on disk, read in-process with dulwich."""

    def identity(self, repository: Path) -> str | None:
        return read_identity(repository)

    def observe_branch(self, repository: Path, branch: str) -> BranchObservation:
        return observe_branch(repository, branch)

    def observe_worktree(self, repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
        return observe_worktree(repository, path, branch, base)

    def create_worktree(self, repository: Path, path: Path, branch: str, base: str) -> None:
        create_worktree(repository, path, branch, base)

    def copy_includes(self, source_root: Path, worktree: Path, patterns: Sequence[str], *,
                      skipped: list[str] | None = None) -> list[str]:
        return copy_includes(source_root, worktree, patterns, skipped=skipped)

    def observe_candidate(self, repository: Path, ref: str, parent: str, tree: str) -> CandidateRefObservation:
        from .candidates import observe_candidate
        return observe_candidate(repository, ref, parent, tree)

    def pin_candidate(self, repository: Path, ref: str, parent: str, tree: str, message: str) -> None:
        from .candidates import pin_candidate
        pin_candidate(repository, ref, parent, tree, message)

    def release_candidate(self, repository: Path, ref: str, expected_commit: str) -> None:
        from .candidates import release_candidate
        release_candidate(repository, ref, expected_commit)

    def observe_target_history(self, repository: Path, branch: str, base: str) -> TargetHistory:
        from .candidates import observe_target_history
        return observe_target_history(repository, branch, base)

    def observe_execution(self, repository: Path, path: Path, commit: str) -> ExecutionObservation:
        from .executions import observe_execution
        return observe_execution(repository, path, commit)

    def create_execution(self, repository: Path, path: Path, commit: str) -> None:
        from .executions import create_execution
        create_execution(repository, path, commit)

    def inspect_execution(self, repository: Path, path: Path, commit: str) -> ExecutionInspection:
        from .executions import inspect_execution
        return inspect_execution(repository, path, commit)

    def execution_remnants(self, repository: Path, path: Path) -> bool:
        from .executions import execution_remnants
        return execution_remnants(repository, path)

    def remove_execution(self, repository: Path, path: Path, *, group_alive: bool) -> None:
        from .executions import remove_execution
        remove_execution(repository, path, group_alive=group_alive)

    def capture_twice(self, worktree: Path, *, expected_head: str | None, base: str,
                      artifact_dir: str | None) -> Capture | Unstable:
        from .capture import capture_twice
        return capture_twice(worktree, expected_head=expected_head, base=base, artifact_dir=artifact_dir)

    def list_docket_refs(self, repository: Path) -> list[tuple[str, str]]:
        from .inventory import list_docket_refs
        return list_docket_refs(repository)

    def list_docket_worktrees(self, repository: Path) -> list[DocketWorktree]:
        from .inventory import list_docket_worktrees
        return list_docket_worktrees(repository)

    def observe_head(self, repository: Path, worktree: Path) -> tuple[str | None, str | None]:
        from .inventory import observe_head
        return observe_head(repository, worktree)

    def branch_tip(self, repository: Path, branch: str) -> str | None:
        from .inventory import branch_tip
        return branch_tip(repository, branch)

    def owns_branch(self, repository: Path, path: Path) -> str | None:
        from .inventory import owns_branch
        return owns_branch(repository, path)

    def remove_worktree(self, repository: Path, path: Path, *, expected_head: str | None, branch: str | None,
                        group_alive: bool = False) -> None:
        from .inventory import remove_worktree
        remove_worktree(repository, path, expected_head=expected_head, branch=branch, group_alive=group_alive)

    def delete_ref(self, repository: Path, ref: str, expected: str) -> None:
        from .inventory import delete_ref
        delete_ref(repository, ref, expected)

    def tree_paths(self, repository: Path, commit: str, folder: str) -> list[str]:
        from .candidates import tree_paths
        return tree_paths(repository, commit, folder)

    def observe_integration(self, repository: Path, ref: str, expected_parent: str,
                            candidate_commit: str) -> IntegrationObservation:
        from .merge import observe_integration
        return observe_integration(repository, ref, expected_parent, candidate_commit)

    def merge_candidate(self, repository: Path, head: str, candidate_commit: str, message: str) -> MergeResult:
        from .merge import merge_candidate
        return merge_candidate(repository, head, candidate_commit, message)

    def advance_ref(self, repository: Path, ref: str, expected_old: str | None, new: str) -> None:
        from .merge import advance_ref
        advance_ref(repository, ref, expected_old, new)

    def observe_target(self, repository: Path, branch: str) -> TargetObservation:
        from .merge import observe_target
        return observe_target(repository, branch)

    def commit_tree(self, repository: Path, commit: str) -> str:
        from .candidates import commit_tree
        return commit_tree(repository, commit)

    def changed_paths(self, repository: Path, base: str, commit: str) -> tuple[str, ...]:
        from .merge import changed_paths
        return changed_paths(repository, base, commit)

    def observe_checkout(self, worktree: Path, old: str, new: str) -> CheckoutObservation:
        from .checkout import observe_checkout
        return observe_checkout(worktree, old, new)

    def update_checkout(self, worktree: Path, old: str, new: str) -> None:
        from .checkout import update_checkout
        update_checkout(worktree, old, new)


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


# Task worktrees. dulwich's add_worktree names the admin entry after the path's last part (two runs' task t1
# would share worktrees/t1) and leaves half-made worktrees at the path when interrupted, so the checkout is built
# here from dulwich's parts: a fresh admin entry, a checkout in a hidden staging folder, one rename into place.


@dataclass(frozen=True)
class _AdminEntry:
    folder: Path  # <common>/worktrees/<name>
    checkout: Path | None  # the folder its gitdir names (None: no gitdir)
    head: str | None


def observe_worktree(repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
    """What is at a task's worktree path, compared with the branch and base it should have. Never raises."""
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        repo = Repo(str(repository))
    except (NotGitRepository, OSError) as e:
        return WorktreeObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    try:
        with _making_worktrees(Path(repository), exclusive=False):
            return _observe(repo, Path(repository), Path(path), branch, base)
    except (OSError, UnicodeDecodeError) as e:
        return WorktreeObservation("unreadable", detail=f"cannot read {path} or {repository}: {e}")
    finally:
        repo.close()


def create_worktree(repository: Path, path: Path, branch: str, base: str) -> None:
    """Make the task's branch at base (create-only) and its linked worktree at path, only from absent or branch-only.

    Any other state of the world is left as it is (observe again to learn it).
    I/O failures that are no state of the world (disk full, permission denied
    while writing) propagate, after the staging folder and the new admin entry are removed.
    """
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    repository, path = Path(repository), Path(path)
    try:
        repo = Repo(str(repository))
    except (NotGitRepository, OSError):
        return
    try:
        with _making_worktrees(repository, exclusive=True):
            _create(repo, repository, path, branch, base)
    finally:
        repo.close()


def _create(repo, repository: Path, path: Path, branch: str, base: str) -> None:  # noqa: ANN001
    observed = _observe(repo, repository, path, branch, base)
    if observed.state not in ("absent", "branch-only"):
        return
    ref = f"refs/heads/{branch}"
    from .ref_locks import write_ref

    added: list[bool] = []
    if not write_ref(repo, ref, lambda: added.append(repo.refs.add_if_new(ref.encode(), base.encode()))):
        return  # a fresh lock on the branch (another git process now): observing again says what became of it
    if not added[0] and _tip(repo, ref) != base:
        return
    if not _make_parents(repository, path.parent):
        return
    for entry in _admin_entries(repository):
        if entry.checkout is not None and _same(entry.checkout, path):
            shutil.rmtree(entry.folder)  # left by an interrupted creation (observed as branch-only above)
    for leftover in path.parent.glob(f".{path.name}.*.partial"):
        shutil.rmtree(leftover, ignore_errors=True)
    _check_out(repository, path, ref)


@contextmanager
def _making_worktrees(common: Path, *, exclusive: bool) -> Iterator[None]:
    """Held exclusively while a worktree is made, shared while one is observed (released if the holder dies).

    Without it two launches of one task at once each clean up the other's
    half-made worktree as an interrupted one's leftovers, or observe it
    half-made, as diverged.
    """
    import fcntl

    folder = common / "docket"
    fd: int | None = None
    try:
        if exclusive:
            folder.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(folder / "worktrees.lock", os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        if exclusive:
            raise  # observed shared without it: where this process cannot make the lock, it makes no worktree
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _observe(repo, common: Path, path: Path, branch: str, base: str) -> WorktreeObservation:  # noqa: ANN001
    ref = f"refs/heads/{branch}"
    tip = _tip(repo, ref)
    entries = _admin_entries(common)
    holders = [str(e.checkout) for e in entries
               if e.head == f"ref: {ref}" and e.checkout is not None and not _same(e.checkout, path)]
    main = main_worktree(common)
    if main is not None and _read_text(common / "HEAD") == f"ref: {ref}":
        holders.append(f"the main checkout {main}")

    def diverged(detail: str) -> WorktreeObservation:
        return WorktreeObservation("diverged", detail=detail)

    unsafe = _unsafe_parent(common, path)
    if unsafe is not None:
        return diverged(f"{unsafe}, a parent of {path}, is a symlink or not a directory (not followed)")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is None:
        stale = [e for e in entries if e.checkout is not None and _same(e.checkout, path)]
        if stale and (tip != base or holders or any(e.head != f"ref: {ref}" for e in stale)):
            return diverged(f"stale worktree entry {stale[0].folder} names {path}, which does not exist")
        if tip is None:
            if not _is_commit(repo, base):
                return diverged(f"base {base} is not a commit in {common}")
            return WorktreeObservation("absent")
        if tip != base:
            return diverged(f"branch {branch} is at {tip}, not at the base {base}, and {path} has no worktree")
        if holders:
            return diverged(f"branch {branch} is checked out at {holders[0]}")
        return WorktreeObservation("branch-only")
    if stat.S_ISLNK(st.st_mode):
        return diverged(f"{path} is a symlink to {os.readlink(path)} (not followed)")
    if not stat.S_ISDIR(st.st_mode):
        return diverged(f"{path} is a file, not a worktree")
    dot_git = path / ".git"
    try:
        git_st = os.lstat(dot_git)
    except FileNotFoundError:
        return diverged(f"{path} is a directory that is not a git worktree")
    if stat.S_ISDIR(git_st.st_mode):
        return diverged(f"{path} is a repository of its own, not a linked worktree")
    text = _read_text(dot_git) if stat.S_ISREG(git_st.st_mode) else None
    if text is None or not text.startswith("gitdir:"):
        return diverged(f"{dot_git} is not a 'gitdir:' file")
    admin = path / text[len("gitdir:"):].strip()
    if not _same(admin.parent, common / "worktrees"):
        return diverged(f"{path} is a worktree of another repository (gitdir {admin})")
    entry = next((e for e in entries if e.folder.name == admin.name), None)
    if entry is None:
        return diverged(f"{path} names worktree entry {admin}, which does not exist")
    if entry.checkout is None or not _same(entry.checkout, path):
        return diverged(f"worktree entry {admin} names {entry.checkout}, not {path}")
    if entry.head != f"ref: {ref}":
        on = (f"branch {entry.head[len('ref: refs/heads/'):]}" if entry.head and entry.head.startswith("ref: ")
              else f"detached HEAD {entry.head}")
        return diverged(f"the worktree at {path} is on {on}, not on branch {branch}")
    if tip is None:
        return diverged(f"branch {branch} is missing but its worktree exists at {path}")
    if holders:
        return diverged(f"branch {branch} is also checked out at {holders[0]}")
    return WorktreeObservation("present", head=tip)


def _check_out(common: Path, path: Path, ref: str) -> None:
    _check_out_head(common, path, f"ref: {ref}")


def _check_out_detached(common: Path, path: Path, commit: str) -> None:
    """_check_out with a detached HEAD at commit (a check's execution)."""
    _check_out_head(common, path, commit)


def _check_out_head(common: Path, path: Path, head: str) -> None:
    from dulwich.repo import Repo

    worktrees = common / "worktrees"
    try:
        os.mkdir(worktrees)
    except FileExistsError:
        pass
    admin = _claim_admin_entry(worktrees, path.name)
    staging = path.parent / f".{path.name}.{secrets.token_hex(4)}.partial"

    def undo() -> None:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(admin, ignore_errors=True)

    try:
        os.mkdir(staging)
        _write_new(admin / "commondir", "../..\n")
        _write_new(admin / "HEAD", f"{head}\n")
        _write_new(admin / "gitdir", f"{os.path.abspath(path / '.git')}\n")
        _write_new(staging / ".git", f"gitdir: {os.path.abspath(admin)}\n")
        checkout = Repo(str(staging))
        try:
            checkout.get_worktree().reset_index(config=checkout.get_config_stack())
        finally:
            checkout.close()
    except BaseException:
        undo()
        raise
    try:
        os.rename(staging, path)  # the worktree appears at its path whole, or not at all
    except OSError as e:
        undo()
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            return  # something appeared at the path meanwhile: a state of the world, observed next
        raise


def _claim_admin_entry(worktrees: Path, name: str) -> Path:
    """A new worktrees/<name>, <name>1, ... made create-only, so no other worktree's entry is ever reused."""
    for n in range(10_000):
        folder = worktrees / f"{name}{n or ''}"
        try:
            os.mkdir(folder)
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free worktree entry name", str(worktrees / name))


def _admin_entries(common: Path) -> list[_AdminEntry]:
    try:
        names = sorted(os.listdir(common / "worktrees"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    entries = []
    for name in names:
        folder = common / "worktrees" / name
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            continue
        gitdir = _read_text(folder / "gitdir")
        checkout = None
        if gitdir:
            checkout = Path(os.path.normpath(folder / gitdir))
            checkout = checkout.parent if checkout.name == ".git" else checkout
        entries.append(_AdminEntry(folder, checkout, _read_text(folder / "HEAD")))
    return entries


def _entry_for(common: Path, path: Path) -> _AdminEntry | None:
    """The admin entry of the linked worktree at path, if path's .git names one of common's that names path back."""
    text = _read_text(path / ".git")
    if text is None or not text.startswith("gitdir:"):
        return None
    admin = path / text[len("gitdir:"):].strip()
    if not _same(admin.parent, common / "worktrees"):
        return None
    entry = next((e for e in _admin_entries(common) if e.folder.name == admin.name), None)
    if entry is None or entry.checkout is None or not _same(entry.checkout, path):
        return None
    return entry


def _remove_checkout(common: Path, path: Path) -> None:
    """Remove what is at path and every admin entry naming it; hold _making_worktrees exclusively.

    A folder is renamed aside first (a crash never leaves half a checkout at
    path looking like a worktree), then deleted; a symlink or file is unlinked,
    never followed. Leftovers of an earlier interrupted removal go too.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            doomed = path.parent / f".{path.name}.{secrets.token_hex(4)}.removing"
            os.rename(path, doomed)  # gone from its path at once; the rest is cleanup
            shutil.rmtree(doomed)
        else:
            os.unlink(path)
    for entry in _admin_entries(common):
        if entry.checkout is not None and _same(entry.checkout, path):
            shutil.rmtree(entry.folder)
    for leftover in path.parent.glob(f".{path.name}.*.removing"):
        shutil.rmtree(leftover, ignore_errors=True)


def _tip(repo, ref: str) -> str | None:  # noqa: ANN001
    try:
        return repo.refs[ref.encode()].decode("ascii")
    except KeyError:
        return None


def _is_commit(repo, sha: str) -> bool:  # noqa: ANN001
    from dulwich.objects import Commit

    try:
        return isinstance(repo[sha.encode("ascii")], Commit)
    except (KeyError, ValueError, UnicodeEncodeError):
        return False


def _read_text(path: Path) -> str | None:
    """A small file's stripped text, never through a symlink; None if it is not there (or is a symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO planted there must not hang us
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None
        raise
    try:
        return os.read(fd, 65536).decode("utf-8").strip()
    finally:
        os.close(fd)


def _write_new(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _between(common: Path, folder: Path) -> list[Path] | None:
    """The folders from below common down to folder; None when folder is not inside common."""
    try:
        parts = folder.relative_to(common).parts
    except ValueError:
        return None
    return [common.joinpath(*parts[: i + 1]) for i in range(len(parts))]


def _unsafe_parent(common: Path, path: Path) -> Path | None:
    """The first folder between common and path that is a symlink or not a folder (a missing one ends the walk)."""
    for folder in _between(common, path.parent) or []:
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return folder
    return None


def _make_parents(common: Path, folder: Path) -> bool:
    """Make the folders down to folder (0700), never through a symlink; False if one is in the way."""
    chain = _between(common, folder)
    if chain is None:  # outside docket's folders: the caller chose the place
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        chain = [folder]
    for step in chain:
        try:
            os.mkdir(step, 0o700)
        except FileExistsError:
            pass
        if not stat.S_ISDIR(os.lstat(step).st_mode):
            return False
    return True


# [worktree] include: ignored files copied from the main checkout.


def copy_includes(source_root: Path, worktree: Path, patterns: Sequence[str], *,
                  skipped: list[str] | None = None) -> list[str]:
    """Copy what the patterns match under source_root into worktree, create-only; the paths copied or already there.

    Every pattern is checked first (BadInput ``bad-include``). Symlinks are
    never followed: a symlinked folder is not entered; a symlink that stays
    inside source_root is copied as a symlink, one pointing outside is skipped.
    An existing different file in the worktree is left alone. Each path left
    alone or skipped is appended to ``skipped`` as "path: why".
    """
    checked = [check_include_pattern(p) for p in patterns]
    source_root, worktree = Path(source_root), Path(worktree)
    matched = sorted({rel for pattern in checked for rel in _expand(source_root, pattern)})
    done = []
    for rel in matched:
        why = _copy_one(source_root, worktree, rel)
        if why is None:
            done.append(rel)
        elif skipped is not None:
            skipped.append(f"{rel}: {why}")
    return done


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _expand(root: Path, pattern: str) -> Iterator[str]:
    """The files and symlinks (relative, '/'-separated) a pattern names; matched folders give what they hold."""
    parts = pattern.rstrip("/").split("/")
    found = [""]
    for part in parts:
        following = []
        for rel in found:
            folder = root / rel if rel else root
            st = _lstat(folder)
            if st is None or not stat.S_ISDIR(st.st_mode):
                continue  # a symlinked folder is never entered
            if not any(c in part for c in "*?["):
                names = [part] if _lstat(folder / part) is not None else []
            else:
                names = sorted(n for n in os.listdir(folder)
                               if fnmatch.fnmatchcase(n, part) and (part.startswith(".") or not n.startswith(".")))
            following += [f"{rel}/{n}" if rel else n for n in names if n != ".git"]
        found = following
    for rel in found:
        yield from _files_under(root, rel)


def _files_under(root: Path, rel: str) -> Iterator[str]:
    st = _lstat(root / rel)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        yield rel
        return
    for name in sorted(os.listdir(root / rel)):
        if name != ".git":
            yield from _files_under(root, f"{rel}/{name}")


def _copy_one(root: Path, worktree: Path, rel: str) -> str | None:
    """Copy one file or symlink create-only; None when it is there now, else why it was not copied."""
    source = root / rel
    st = os.lstat(source)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(source)
        inside = os.path.normpath(os.path.join(os.path.dirname(rel), target))
        if os.path.isabs(target) or inside == ".." or inside.startswith("../"):
            return f"a symlink to {target}, outside the checkout (not followed)"
    elif not stat.S_ISREG(st.st_mode):
        return "not a regular file or symlink"
    *folders, name = rel.split("/")
    try:
        fd = os.open(worktree, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        return f"cannot open the worktree {worktree}: {e.strerror}"
    try:
        for folder in folders:
            try:
                os.mkdir(folder, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                return f"{folder} in the worktree is a symlink or a file (not followed)"
            os.close(fd)
            fd = inner
        if stat.S_ISLNK(st.st_mode):
            return _place_symlink(fd, name, target)
        return _place_file(fd, name, source, st.st_mode & 0o777)
    finally:
        os.close(fd)


def _place_symlink(folder_fd: int, name: str, target: str) -> str | None:
    try:
        os.symlink(target, name, dir_fd=folder_fd)
        return None
    except FileExistsError:
        pass
    try:
        same = os.readlink(name, dir_fd=folder_fd) == target
    except OSError:
        same = False
    return None if same else "a different file is already in the worktree (left alone)"


def _place_file(folder_fd: int, name: str, source: Path, mode: int) -> str | None:
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        with os.fdopen(src, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(src)
    draft = f".{name}.{secrets.token_hex(4)}.docket-draft"
    out = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=folder_fd)
    try:
        with os.fdopen(out, "wb", closefd=False) as f:
            f.write(data)
    finally:
        os.close(out)
    try:
        os.link(draft, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)  # create-only, and whole
        return None
    except FileExistsError:
        pass
    finally:
        os.unlink(draft, dir_fd=folder_fd)
    try:
        existing = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder_fd)
    except OSError:
        return "a different file is already in the worktree (left alone)"
    try:
        with os.fdopen(existing, "rb", closefd=False) as f:
            same = f.read() == data
    finally:
        os.close(existing)
    return None if same else "a different file is already in the worktree (left alone)"
