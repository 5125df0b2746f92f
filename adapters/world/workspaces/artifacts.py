"""Artifact copy-back: what a check wrote under the artifact directory, copied into the task's worktree.

Every folder on both sides is opened relative to the one above it with
O_NOFOLLOW, so a symlink anywhere (planted before or during the copy) is never
followed; files land through a temporary file and one rename() (replacing the
regular file an earlier check run left at that path, never following a link),
and are hash-checked after they land. Nothing is written outside destination_root.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from ....domain.binding import CopiedArtifact
from ....domain.kernel.errors import Refused
from ....domain.kernel.names import has_unsafe_characters
from ....domain.kernel.codes import Code

__all__ = ["copy_artifacts", "check_artifact_path", "read_report"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def check_artifact_path(rel: str) -> list[str]:
    """The parts of a relative '/'-separated path; Refused ``artifact-escape`` if it is empty, absolute, has an
    empty, '.' or '..' part, a NUL or an unsafe character."""
    parts = rel.split("/")
    if (not rel or rel.startswith("/") or "\0" in rel or has_unsafe_characters(rel)
            or any(p in ("", ".", "..") for p in parts)):
        raise Refused(Code.ARTIFACT_ESCAPE, f"artifact path {rel!r} is not a plain relative path inside its root")
    return parts


def copy_artifacts(execution_root: Path, artifact_dir: str, destination_root: Path, *,
                   tracked: Collection[str] = ()) -> list[CopiedArtifact]:
    """Copy every file under <execution_root>/<artifact_dir> to <destination_root>/<artifact_dir>.

    The artifact directory holds check output, not work: a regular file already
    at a destination (an earlier check run's report) is replaced, so each cycle's
    check leaves its own output for the next cycle to read. tracked names files
    (relative to artifact_dir) the candidate's tree holds: they are no check
    output and are not copied. Returns the files copied, sorted by path (relative
    to artifact_dir). Refused, before anything is written:
    ``artifact-escape`` for an artifact_dir that is not a plain relative path;
    ``artifact-symlink`` for a symlink at either root, at a folder on the way to
    or under either artifact directory, or among the files (at the source or the
    destination); ``artifact-not-a-file`` for a fifo, socket or device;
    ``artifact-conflict`` for a folder or anything but a regular file at a
    destination. A missing source artifact directory copies nothing.
    Each file is written to a temporary O_EXCL|O_NOFOLLOW file, fsynced, renamed
    to its name, read back and hash-checked, and its folder fsynced. OSError for
    real I/O failures propagates.
    """
    parts = check_artifact_path(artifact_dir.rstrip("/") if artifact_dir != "/" else artifact_dir)
    with _open_root(Path(execution_root)) as source_root:
        try:
            source = _open_chain(source_root, parts, create=False)
        except FileNotFoundError:
            return []
        try:
            files = sorted(_scan(source, ""))
            found = []
            skipped = set(tracked)
            for rel, st in files:
                if rel in skipped:
                    continue
                found.append((rel, _read(source, rel, st)))
        finally:
            os.close(source)
    with _open_root(Path(destination_root)) as destination_root_fd:
        for rel, data in found:
            _refuse_conflict(destination_root_fd, parts + rel.split("/"), data)
        copied = []
        for rel, data in found:
            digest = _place(destination_root_fd, parts + rel.split("/"), data[0], data[1])
            copied.append(CopiedArtifact(rel, digest, len(data[0])))
        return copied


def read_report(root: Path, rel: str, max_bytes: int) -> bytes | None:
    """The regular file root/rel (a report a check wrote), read without following a symlink anywhere, at most
    max_bytes + 1 bytes (more says it is too large); None when it is not there. Refused as copy_artifacts is for
    an escaping path, a symlink or a file that is not regular."""
    *folders, name = check_artifact_path(rel)
    with _open_root(Path(root)) as root_fd:
        try:
            folder = _open_chain(root_fd, folders, create=False)
        except FileNotFoundError:
            return None
        try:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
            except FileNotFoundError:
                return None
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise Refused(Code.ARTIFACT_SYMLINK, f"{rel} is a symlink (not followed)") from None
                raise
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise Refused(Code.ARTIFACT_NOT_A_FILE, f"{rel} is not a regular file")
                return f.read(max_bytes + 1)
        finally:
            os.close(folder)


@contextmanager
def _open_root(root: Path) -> Iterator[int]:
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(root):
            raise Refused(Code.ARTIFACT_SYMLINK, f"{root} is a symlink (not followed)") from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def _open_dir(parent: int, name: str, shown: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = "a symlink" if _is_link(parent, name) else "not a folder"
            raise Refused("artifact-symlink" if kind == "a symlink" else "artifact-not-a-file",
                          f"{shown} is {kind} (not followed)") from None
        raise


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_chain(root: int, parts: list[str], *, create: bool) -> int:
    """The folder root/parts[0]/... opened without following a symlink (made 0755 on the way when create)."""
    fd = os.dup(root)
    try:
        for i, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            inner = _open_dir(fd, part, "/".join(parts[: i + 1]))
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def _scan(folder: int, rel: str) -> Iterator[tuple[str, os.stat_result]]:
    for name in sorted(os.listdir(folder)):
        child = f"{rel}/{name}" if rel else name
        check_artifact_path(child)
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise Refused(Code.ARTIFACT_SYMLINK, f"artifact {child} is a symlink (not followed, nothing copied)")
        if stat.S_ISDIR(st.st_mode):
            inner = _open_dir(folder, name, child)
            try:
                if (os.fstat(inner).st_dev, os.fstat(inner).st_ino) != (st.st_dev, st.st_ino):
                    raise Refused(Code.ARTIFACT_SYMLINK, f"artifact folder {child} was replaced while read")
                yield from _scan(inner, child)
            finally:
                os.close(inner)
        elif stat.S_ISREG(st.st_mode):
            yield child, st
        else:
            raise Refused(Code.ARTIFACT_NOT_A_FILE, f"artifact {child} is not a regular file (nothing copied)")


def _read(root: int, rel: str, st: os.stat_result) -> tuple[bytes, int]:
    """(content, mode) of a regular file under root, opened without following a symlink anywhere."""
    *folders, name = rel.split("/")
    folder = _open_chain(root, folders, create=False)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise Refused(Code.ARTIFACT_SYMLINK, f"artifact {rel} is a symlink (not followed)") from None
            raise
        with os.fdopen(fd, "rb") as f:
            now = os.fstat(f.fileno())
            if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise Refused(Code.ARTIFACT_SYMLINK, f"artifact {rel} was replaced while read")
            return f.read(), 0o755 if now.st_mode & 0o100 else 0o644
    finally:
        os.close(folder)


def _existing(folder: int, name: str, shown: str) -> bytes | None:
    """The content of the regular file folder/name; None if nothing is there; Refused if it is anything else."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Refused(Code.ARTIFACT_SYMLINK, f"{shown} in the destination is a symlink (not followed)") from None
        if e.errno == errno.EISDIR:
            raise Refused(Code.ARTIFACT_CONFLICT, f"{shown} in the destination is a folder") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise Refused(Code.ARTIFACT_CONFLICT, f"{shown} in the destination is {kind}")
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _refuse_conflict(root: int, parts: list[str], data: tuple[bytes, int]) -> None:
    folder = root
    opened = []
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                folder = _open_dir(folder, part, "/".join(parts[: i + 1]))
            except FileNotFoundError:
                return  # the folder is made when copying: nothing is in the way
            opened.append(folder)
        _existing(folder, parts[-1], "/".join(parts))  # a regular file is replaced; anything else refused
    finally:
        for fd in opened:
            os.close(fd)


def _place(root: int, parts: list[str], data: bytes, mode: int) -> str:
    """Write data at root/parts (replacing a regular file there); its sha256 once it is there with that content."""
    shown = "/".join(parts)
    digest = hashlib.sha256(data).hexdigest()
    folder = _open_chain(root, parts[:-1], create=True)
    name = parts[-1]
    try:
        draft = f".{name}.{secrets.token_hex(4)}.docket-artifact"
        out = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                      dir_fd=folder)
        try:
            try:
                with os.fdopen(out, "wb", closefd=False) as f:
                    f.write(data)
                    f.flush()
                    os.fsync(out)
            finally:
                os.close(out)
            try:
                os.rename(draft, name, src_dir_fd=folder, dst_dir_fd=folder)
            except (IsADirectoryError, NotADirectoryError, FileExistsError) as e:
                raise Refused(Code.ARTIFACT_CONFLICT, f"{shown} in the destination is a folder") from e
            except OSError as e:
                if e.errno != errno.ENOTEMPTY:
                    raise
                raise Refused(Code.ARTIFACT_CONFLICT, f"{shown} in the destination is a folder") from e
        finally:
            try:
                os.unlink(draft, dir_fd=folder)
            except FileNotFoundError:
                pass  # renamed into place
        landed = _existing(folder, name, shown)
        if landed is None or hashlib.sha256(landed).hexdigest() != digest:
            raise Refused(Code.ARTIFACT_CONFLICT, f"{shown} in the destination has other content than the artifact")
        os.fsync(folder)
        return digest
    finally:
        os.close(folder)
