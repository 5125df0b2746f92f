"""[worktree] include: ignored files copied from the main checkout into a task's worktree, create-only."""

from __future__ import annotations

import fnmatch
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from ....domain.kernel.names import check_include_pattern

__all__ = ["copy_includes"]


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

