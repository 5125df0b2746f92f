"""What the git adapters share: a repository's branches read, its linked worktrees' admin entries, the lock held
while worktrees are made, checkouts made whole and removed whole, and small files read without following symlinks.

Task worktrees (worktrees.py) and executions (executions.py) are both made from dulwich's parts: a fresh admin
entry, a checkout in a hidden staging folder, one rename into place. The inventory (inventory.py) lists and removes
them with the same helpers.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ....domain.effects import BranchObservation
from ..ledger.identity import read_identity
from .ids import object_id, ref_name
import fcntl

if TYPE_CHECKING:
    from dulwich.repo import Repo

__all__ = ["AdminEntry", "DulwichRepository", "admin_entries", "check_out_branch", "check_out_detached", "commit_of",
           "entry_for", "is_ancestor", "is_commit", "make_parents", "making_worktrees", "observe_branch", "open_repo",
           "read_text", "ref_tip", "remove_checkout", "same", "unsafe_parent"]


class DulwichRepository:
    """What every git adapter answers alike (a RepositoryPort): whose the repository is."""

    def identity(self, repository: Path) -> str | None:
        return read_identity(repository)


def open_repo(path: Path) -> Repo:
    """The dulwich Repo at path (a git common dir, or a worktree found through its .git), to be used as a context
    manager, ``with open_repo(path) as repo:``, which closes it. NotGitRepository or OSError when none is there.

    It runs nothing the repository (or an agent that wrote its config) chose: blobs go in and out as the bytes they
    are (no clean, smudge or process filter, no end-of-line conversion, whatever ``.gitattributes`` and the config
    say) and it has no hooks (dulwich would run pre-commit, commit-msg and post-commit on a porcelain commit)."""
    from dulwich.repo import Repo

    repo = Repo(str(path))
    repo.hooks.clear()
    # dulwich types the normalizer as its FilterBlobNormalizer; _Verbatim has the methods dulwich calls
    repo.get_blob_normalizer = _verbatim  # type: ignore[method-assign,assignment]
    return repo


class _Verbatim:
    """A blob normalizer that leaves every blob as it is, both ways."""

    def checkin_normalize(self, blob, tree_path):  # noqa: ANN001, ANN201
        return blob

    def checkout_normalize(self, blob, tree_path):  # noqa: ANN001, ANN201
        return blob


def _verbatim(config=None, tree=None) -> _Verbatim:  # noqa: ANN001
    return _Verbatim()


def observe_branch(repository: Path, branch: str) -> BranchObservation:
    """Which commit refs/heads/<branch> names in the repository, read with dulwich."""
    from dulwich.errors import NotGitRepository
    from dulwich.objects import Commit

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return BranchObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    with repo:
        try:
            ref = b"refs/heads/" + branch.encode("utf-8")
            try:
                sha = repo.refs[ref_name(ref)]
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



# Linked worktrees. dulwich's add_worktree names the admin entry after the path's last part (two runs' task t1
# would share worktrees/t1) and leaves half-made worktrees at the path when interrupted, so checkouts are built
# here from dulwich's parts: a fresh admin entry, a checkout in a hidden staging folder, one rename into place.


@dataclass(frozen=True)
class AdminEntry:
    folder: Path  # <common>/worktrees/<name>
    checkout: Path | None  # the folder its gitdir names (None: no gitdir)
    head: str | None


@contextmanager
def making_worktrees(common: Path, *, exclusive: bool) -> Iterator[None]:
    """Held exclusively while a worktree is made, shared while one is observed (released if the holder dies).

    Without it two launches of one task at once each clean up the other's
    half-made worktree as an interrupted one's leftovers, or observe it
    half-made, as diverged.
    """

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


def check_out_branch(common: Path, path: Path, ref: str) -> None:
    """A linked worktree at path on ref (a task's), appearing there whole or not at all."""
    _check_out_head(common, path, f"ref: {ref}")


def check_out_detached(common: Path, path: Path, commit: str) -> None:
    """check_out_branch with a detached HEAD at commit (a check's execution)."""
    _check_out_head(common, path, commit)


def _check_out_head(common: Path, path: Path, head: str) -> None:
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
        with open_repo(staging) as checkout:
            checkout.get_worktree().reset_index(config=checkout.get_config_stack())
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


def admin_entries(common: Path) -> list[AdminEntry]:
    try:
        names = sorted(os.listdir(common / "worktrees"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    entries = []
    for name in names:
        folder = common / "worktrees" / name
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            continue
        gitdir = read_text(folder / "gitdir")
        checkout = None
        if gitdir:
            checkout = Path(os.path.normpath(folder / gitdir))
            checkout = checkout.parent if checkout.name == ".git" else checkout
        entries.append(AdminEntry(folder, checkout, read_text(folder / "HEAD")))
    return entries


def entry_for(common: Path, path: Path) -> AdminEntry | None:
    """The admin entry of the linked worktree at path, if path's .git names one of common's that names path back."""
    text = read_text(path / ".git")
    if text is None or not text.startswith("gitdir:"):
        return None
    admin = path / text[len("gitdir:"):].strip()
    if not same(admin.parent, common / "worktrees"):
        return None
    entry = next((e for e in admin_entries(common) if e.folder.name == admin.name), None)
    if entry is None or entry.checkout is None or not same(entry.checkout, path):
        return None
    return entry


def remove_checkout(common: Path, path: Path) -> None:
    """Remove what is at path and every admin entry naming it; hold making_worktrees exclusively.

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
    for entry in admin_entries(common):
        if entry.checkout is not None and same(entry.checkout, path):
            shutil.rmtree(entry.folder)
    for leftover in path.parent.glob(f".{path.name}.*.removing"):
        shutil.rmtree(leftover, ignore_errors=True)


def ref_tip(repo, ref: str) -> str | None:  # noqa: ANN001
    try:
        return repo.refs[ref.encode()].decode("ascii")
    except KeyError:
        return None


def commit_of(repo, sha: str):  # noqa: ANN001, ANN201
    """The Commit sha names in repo; None when it names nothing there, or no commit."""
    from dulwich.objects import Commit

    try:
        obj = repo[sha.encode("ascii")]
    except (KeyError, ValueError, UnicodeEncodeError):
        return None
    return obj if isinstance(obj, Commit) else None


def is_ancestor(repo, ancestor: str, descendant: str) -> bool:  # noqa: ANN001
    """ancestor is descendant or one of its ancestors (both commits in the repository). A parent of descendant
    (a merge step's observation: its merge commit's two parents) is answered without walking the history."""
    from dulwich.graph import can_fast_forward

    wanted, start = object_id(ancestor), object_id(descendant)
    if wanted == start or wanted in getattr(repo[start], "parents", ()):
        return True
    return can_fast_forward(repo, wanted, start)


def is_commit(repo, sha: str) -> bool:  # noqa: ANN001
    from dulwich.objects import Commit

    try:
        return isinstance(repo[sha.encode("ascii")], Commit)
    except (KeyError, ValueError, UnicodeEncodeError):
        return False


def read_text(path: Path) -> str | None:
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


def same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _between(common: Path, folder: Path) -> list[Path] | None:
    """The folders from below common down to folder; None when folder is not inside common."""
    try:
        parts = folder.relative_to(common).parts
    except ValueError:
        return None
    return [common.joinpath(*parts[: i + 1]) for i in range(len(parts))]


def unsafe_parent(common: Path, path: Path) -> Path | None:
    """The first folder between common and path that is a symlink or not a folder (a missing one ends the walk)."""
    for folder in _between(common, path.parent) or []:
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return folder
    return None


def make_parents(common: Path, folder: Path) -> bool:
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

