"""Whose data is in docket's data folder, and what is left there by repositories that are gone.

A repository's task workspaces and check executions live at ``<root>/workspaces/<key>`` and
``<root>/executions/<key>`` (paths.py: root is the data folder, or a [workspace] root). The key names the repository
(its docket identity, or a digest of its path) but not where it is, so a repository deleted or moved away leaves its
folders there for good. docket therefore records, in ``<key>/.repositories`` (a dot name: every listing of the
folder skips it), the real path of each git common dir it makes the folder for (``record_owner``): one JSON string a
line, appended, never rewritten; a clone sharing its identity with another (a shared ledger) adds its own line.

``forgotten_data`` lists, for every key folder under the given roots, the data of a repository that is gone: every
repository the folder was made for is no longer there (its path missing, no longer a git repository, or a git
repository with another docket identity now). Folders made before docket kept that record are judged by the
repositories their workspaces borrow objects from (``objects/info/alternates``), written by docket but within an
agent's reach, so they count only as far as they agree with the key (a path key must be their digest). A folder
whose repository may still be there is never listed as removable: one still there with its key, one that cannot be
looked at (a permission, an unmounted disk answering otherwise than "no such file"), or one never recorded. A
repository moved elsewhere looks gone too (nothing says where it went; its workspaces borrow objects from where it
was, so they no longer work): the listing names the path it was at, and only --apply removes.

With apply, each such folder is removed without following a symlink anywhere: every folder is opened from its
parent's descriptor with O_NOFOLLOW, a symlink (at any depth) is unlinked, never entered; the record goes last, so
a removal a crash cut short is found and finished by the next.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from ..ledger.identity import read_identity
from ..git.own_repositories import alternates_of

__all__ = ["OWNERS_FILE", "Forgotten", "forgotten_data", "record_owner"]

OWNERS_FILE = ".repositories"
DATA_FOLDERS = ("workspaces", "executions")  # <root>/<folder>/<key>/...
_KEY = re.compile(r"(repo|path)-[0-9a-f]{32}")
_DEPTH = {"workspaces": 2, "executions": 3}  # <key>/<run>/<task>, <key>/<run>/<binding>/<check-attempt>
_OWNERS_LIMIT = 1 << 16  # bytes of the record read: a few hundred clones' paths
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Forgotten:
    """A key folder of the data folder (or a [workspace] root) whose repository is gone, or may be."""

    key: str  # the repository key (repo-..., path-...)
    path: str  # <root>/<workspaces|executions>/<key>
    repositories: tuple[str, ...]  # the repositories it was made for (a checkout, or a bare git dir), as far as known
    action: str  # remove | removed | keep
    reason: str


def record_owner(folder: Path, common: Path) -> None:
    """Record that docket made the key folder (made already, by files.own_folder) for the repository whose git
    common dir is common; nothing when it is recorded already. Never raises: a record that cannot be written (a
    symlink planted at its name, a full disk) leaves the folder's owner unknown, which gc never removes."""
    owner = os.path.realpath(common)
    try:
        fd = os.open(folder, _FOLDER)
    except OSError:
        return
    try:
        if owner in _read_owners(fd):
            return
        line = (json.dumps(owner) + "\n").encode("utf-8", "surrogateescape")
        out = os.open(OWNERS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                      dir_fd=fd)
        try:
            if stat.S_ISREG(os.fstat(out).st_mode):
                os.write(out, line)  # one write, appended whole: two clones recording at once both stay
        finally:
            os.close(out)
    except OSError:
        return
    finally:
        os.close(fd)


def forgotten_data(roots: Iterable[Path], *, keep_keys: Iterable[str] = (), apply: bool) -> list[Forgotten]:
    """The key folders under each root whose repository is gone (remove; apply: removed) or cannot be told (keep,
    saying why); those of a repository still there, and those of keep_keys (the repository gc runs in), are not
    listed. A key's folders (its workspaces and executions, under every root) are judged together."""
    kept = set(keep_keys)
    folders: dict[str, list[tuple[str, Path]]] = {}  # key -> (data folder name, key folder)
    for root in dict.fromkeys(Path(r) for r in roots):
        for name in DATA_FOLDERS:
            top = root / name
            if not _is_folder(top):
                continue  # absent, or a symlink planted there: never followed ('docket reconcile' reports it)
            try:
                entries = sorted(os.listdir(top))
            except OSError:
                continue
            for key in entries:
                # a name docket never makes is nobody's data of docket's; a symlink or file at a key's name is not
                # followed or removed ('docket reconcile' in its repository moves it aside)
                if _KEY.fullmatch(key) and key not in kept and _is_folder(top / key):
                    folders.setdefault(key, []).append((name, top / key))
    found: list[Forgotten] = []
    for key, places in sorted(folders.items()):
        owners, recorded = _owners(key, places)
        removable, reason = _judge(key, owners, recorded)
        if removable is None:
            continue  # its repository is still there
        items = [Forgotten(key, str(path), tuple(_shown_path(o) for o in owners), "remove" if removable else "keep",
                           reason) for _, path in places]
        if apply and removable:
            items = _remove_key(key, places, items)
        found += items
    return sorted(found, key=lambda f: f.path)


def _remove_key(key: str, places: Sequence[tuple[str, Path]], items: list[Forgotten]) -> list[Forgotten]:
    """Remove every folder of a gone repository's key (judged again first); each item removed, or kept saying why."""

    owners, recorded = _owners(key, places)
    removable, reason = _judge(key, owners, recorded)
    if not removable:
        why = reason if removable is not None else "its repository is there again"
        return [replace(item, action="keep", reason=why) for item in items]
    done = []
    for (_, path), item in zip(places, items):
        failed = _remove_folder(path, owners)
        done.append(replace(item, action="removed") if failed is None
                    else replace(item, action="keep", reason=f"{item.reason}; {failed}"))
    return done


def _remove_folder(path: Path, owners: Sequence[str]) -> str | None:
    """Remove a key folder, never following a symlink; None when removed (or gone already), else why it stays.
    Whose it was is written in its record first (a folder judged by its workspaces' borrowed objects, or by a
    sibling's record), and the record removed last: a removal a crash cut short is judged the same next time."""
    try:
        parent = os.open(path.parent, _FOLDER)
    except OSError as e:
        return f"{path.parent} cannot be opened: {e.strerror}"
    try:
        try:
            fd = os.open(path.name, _FOLDER, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as e:
            return f"not removed: {e.strerror} (a symlink or no folder is never followed)"
        try:
            for owner in owners:
                _append_owner(fd, owner)
            for name in sorted(os.listdir(fd)):
                if name != OWNERS_FILE:
                    _remove_at(fd, name)
            _remove_at(fd, OWNERS_FILE)
        finally:
            os.close(fd)
        os.rmdir(path.name, dir_fd=parent)
    except OSError as e:
        return f"not removed: {e.strerror}" + (f": {e.filename}" if e.filename else "")
    finally:
        os.close(parent)
    return None


# Whose it is ---------------------------------------------------------------------------------------------------------


def _owners(key: str, places: Sequence[tuple[str, Path]]) -> tuple[list[str], bool]:
    """The repositories the key's folders were made for, and whether docket's record says so (else: read from the
    alternates of the workspaces and executions in them, those of a path key checked against it)."""
    recorded: list[str] = []
    for _, folder in places:
        try:
            fd = os.open(folder, _FOLDER)
        except OSError:
            continue
        try:
            recorded += [o for o in _read_owners(fd) if o not in recorded]
        finally:
            os.close(fd)
    if recorded:
        return recorded, True
    borrowed: list[str] = []
    for name, folder in places:
        for place in _places(folder, _DEPTH.get(name, 2)):
            for line in _alternates(place):
                owner = os.path.dirname(line.rstrip("/"))
                if line.rstrip("/").endswith("/objects") and owner not in borrowed and _fits(key, owner):
                    borrowed.append(owner)
    return borrowed, False


def _judge(key: str, owners: Sequence[str], recorded: bool) -> tuple[bool | None, str]:
    """(True, why) when every repository the folder was made for is gone; (False, why) when that cannot be told;
    (None, "") when one is still there."""
    if not owners:
        return False, ("which repository it belongs to is unknown: docket made it before it recorded that, and no "
                       "workspace in it borrows a repository's objects ('docket gc' in its repository records it)")
    gone: list[str] = []
    unknown: list[str] = []
    for owner in owners:
        state, why = _state(key, owner)
        if state == "here":
            return None, ""
        (gone if state == "gone" else unknown).append(f"{_shown_path(owner)} {why}")
    if unknown:
        return False, "its repository may still be there: " + "; ".join(unknown)
    source = "" if recorded else " (as its workspaces' borrowed objects say)"
    return True, (f"its repository is gone{source}: " + "; ".join(gone) + "; its workspaces and executions (and any "
                  "work left in them) can never be used again")


def _state(key: str, owner: str) -> tuple[str, str]:
    """here, gone or unknown, and why, for the repository whose git common dir was owner."""
    try:
        st = os.stat(owner)
    except (FileNotFoundError, NotADirectoryError):
        return "gone", "no longer exists"
    except OSError as e:
        return "unknown", f"cannot be looked at ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "gone", "is no longer a folder"
    head, objects = Path(owner) / "HEAD", Path(owner) / "objects"
    if not (os.path.isfile(head) and os.path.isdir(objects)):
        return "gone", "is no longer a git repository"
    if key.startswith("path-"):
        return "here", ""  # a git repository at the very path its key is the digest of

    try:
        identity = read_identity(Path(owner))
    except OSError as e:  # its identity file opens but does not read (a folder planted at its name)
        return "unknown", f"holds a docket identity that cannot be read ({e.strerror})"
    if identity == key:
        return "here", ""
    if identity is not None:
        return "gone", f"now holds another repository ({identity})"
    if not os.path.lexists(Path(owner) / "docket" / "repository-id"):
        return "gone", "now holds a repository without a docket identity"
    return "unknown", "holds a docket identity that cannot be read"


def _fits(key: str, owner: str) -> bool:
    """Whether owner can be the repository of key: a path key is the digest of its repository's real path."""
    if key.startswith("path-"):
        return hashlib.sha256(os.fsencode(owner)).hexdigest()[:32] == key[5:]
    return True


def _shown_path(owner: str) -> str:
    """The repository's path as a user names it: the checkout for a .git folder."""
    return os.path.dirname(owner) if os.path.basename(owner) == ".git" else owner


# Reading and removing without following a symlink ---------------------------------------------------------------


def _read_owners(fd: int) -> list[str]:
    try:
        record = os.open(OWNERS_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(record).st_mode):
            return []
        data = os.read(record, _OWNERS_LIMIT)
    finally:
        os.close(record)
    owners = []
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        try:
            owner = json.loads(line)
        except ValueError:
            continue  # a line a crash cut short
        if isinstance(owner, str) and os.path.isabs(owner) and "\0" not in owner and owner not in owners:
            owners.append(owner)
    return owners


def _append_owner(fd: int, owner: str) -> None:
    if owner in _read_owners(fd):
        return
    out = os.open(OWNERS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
    try:
        os.write(out, (json.dumps(owner) + "\n").encode("utf-8", "surrogateescape"))
    finally:
        os.close(out)


def _places(folder: Path, depth: int) -> list[Path]:
    """The folders depth levels below folder (dot names skipped: the pool's entries hold no git dir of their own
    while idle), never through a symlink."""
    if depth == 0:
        return [folder]
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except OSError:
        return []
    return [p for n in names if _is_folder(folder / n) for p in _places(folder / n, depth - 1)]


def _alternates(place: Path) -> list[str]:
    git = place / ".git"
    if not _is_folder(git) or not _is_folder(git / "objects") or not _is_folder(git / "objects" / "info"):
        return []
    try:
        return list(alternates_of(git))
    except (OSError, UnicodeDecodeError):
        return []


def _remove_at(fd: int, name: str) -> None:
    """Whatever is at name in the folder open at fd removed, never following a symlink; folders a check made
    unwritable or unlistable made the owner's again first."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=fd)
        return
    try:
        shutil.rmtree(name, dir_fd=fd)  # fd-based: a symlink inside is unlinked, never followed
    except PermissionError:
        _writable(fd, name)
        shutil.rmtree(name, dir_fd=fd)


def _writable(fd: int, name: str) -> None:
    try:
        os.chmod(name, 0o700, dir_fd=fd, follow_symlinks=False)
    except (NotImplementedError, OSError):
        pass
    try:
        child = os.open(name, _FOLDER, dir_fd=fd)
    except OSError:
        return
    try:
        for entry in os.scandir(child):
            if entry.is_dir(follow_symlinks=False):
                _writable(child, entry.name)
    finally:
        os.close(child)


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
