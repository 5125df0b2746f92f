"""Symlinks (or files) planted where docket keeps its own folders, found and moved aside.

docket makes every folder it writes into through ``files.own_folder``, which refuses (``unsafe-path``) a folder on
the way that is a symlink or not a folder, so nothing is ever written through one. That refusal would stop every
resume for good; `docket reconcile` lists what is in the way and `--apply` renames it to a name beside it
(``<name>.planted-<n>``, never deleted: it may be somebody's) and makes the folder again, empty, 0700.

Nothing here is recorded in the ledger: these folders are docket's own scratch space (logs, prompts, receipts
exported again from the ledger, workspaces and executions that their intents observe afresh); moving a link aside
changes no fact the ledger states, and the reconcile output names where it went.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from .files import own_folder

__all__ = ["DOCKET_FOLDERS", "Planted", "find_planted", "move_aside"]

# The folders docket makes beside the ledger (<git common dir>/docket), and those of them whose entries are folders
# docket makes too (one per worker, binding, run, ...).
DOCKET_FOLDERS = ("receipts", "logs", "workers", "prompts", "checks", "hooks", "import-guard", "integrations",
                  "worktrees", "executions", "views.checkpoints", "ref-claims", "setup")
_NESTED = ("logs", "workers", "checks", "integrations", "setup")
DATA_FOLDERS = ("workspaces", "executions")  # in the data folder: <data>/<folder>/<repository key>/...


@dataclass(frozen=True)
class Planted:
    path: str
    found: str  # what is there: "a symlink to <target>" or "a file, not a folder"
    root: str  # the folder below which docket makes path (path's own parents up to it are docket's)
    kind: str = "folder"  # or "file": the views database, made again from the ledger on its next use
    applied: str | None = None  # with --apply: where it was moved


def find_planted(docket_dir: Path, data_roots: list[tuple[Path, str]], files: tuple[Path, ...] = ()) -> list[Planted]:
    """Every symlink or non-folder where docket makes a folder: under docket_dir, and under each (data root,
    repository key) at <root>/workspaces/<key> and <root>/executions/<key> (and the run folders in them); and a
    symlink at any of files (files docket makes again when missing: the views)."""
    found: list[Planted] = []
    for file in files:
        if os.path.islink(file):
            found.append(Planted(str(file), f"a symlink to {os.readlink(file)}", str(file.parent), kind="file"))
    for name in DOCKET_FOLDERS:
        folder = docket_dir / name
        found += _check(folder, docket_dir)
        if name in _NESTED and _is_folder(folder):
            found += [p for child in _children(folder) for p in _check(child, docket_dir)]
    for root, key in data_roots:
        for name in DATA_FOLDERS:
            top = root / name
            found += _check(top, root)
            if _is_folder(top):
                found += _check(top / key, root)
                if _is_folder(top / key):
                    found += [p for child in _children(top / key) for p in _check(child, root)]
    return found


def move_aside(planted: Planted) -> Planted:
    """Rename what is at planted.path to the first free ``<name>.planted-<n>`` beside it and make the folder again
    (never through a symlink); the finding with where it went."""
    path = Path(planted.path)
    for n in range(1, 1000):
        aside = path.with_name(f"{path.name}.planted-{n}")
        if not os.path.lexists(aside):
            break
    else:
        return replace(planted, applied="not moved: no free name beside it")
    os.rename(path, aside)  # renames the link itself, never what it points to
    if planted.kind == "file":
        return replace(planted, applied=f"moved to {aside}; made again from the ledger when next used")
    own_folder(Path(planted.root), path)
    return replace(planted, applied=f"moved to {aside}; folder made again")


def _check(path: Path, root: Path) -> list[Planted]:
    try:
        st = os.lstat(path)
    except OSError:
        return []  # absent: made when needed
    if stat.S_ISLNK(st.st_mode):
        return [Planted(str(path), f"a symlink to {os.readlink(path)}", str(root))]
    if not stat.S_ISDIR(st.st_mode):
        return [Planted(str(path), "a file, not a folder", str(root))]
    return []


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder / name for name in os.listdir(folder) if not name.startswith("."))
    except OSError:
        return []
