"""Blobs larger than dulwich holds in memory, hashed and inflated by streaming (as git does).

dulwich reads a loose object whole and refuses one that inflates past its limit (512 MiB, or
``core.bigFileThreshold``) with ``zlib.error``. A capture hashes a large file without reading it whole
(``file_blob_id``); a checkout writes a large loose blob a chunk at a time (``write_loose_blob``), each chunk
hashed on the way, so what lands on disk is exactly the blob its id names. Chunks of zeros are skipped with a
seek, so a sparse file stays sparse.
"""

from __future__ import annotations

import hashlib
import os
import zlib

__all__ = ["CHUNK", "file_blob_id", "has_object", "is_too_large_to_read", "oversized_blobs", "stored_size", "write_loose_blob"]

CHUNK = 1 << 20
_ZEROS = bytes(CHUNK)


def is_too_large_to_read(error: BaseException) -> bool:
    """Whether error is dulwich refusing to inflate an object past its limit."""
    return isinstance(error, zlib.error) and "exceeds maximum size" in str(error)


def has_object(store, sha: bytes) -> bool:  # noqa: ANN001
    """``sha in store``: dulwich tells a loose object is there by reading it whole, and refuses one past its limit
    (then it is there). A disk store's loose object is found by its file alone (one stat, nothing read), as git
    does; the rest (packs, alternates) is dulwich's lookup."""
    from dulwich.object_store import DiskObjectStore

    if type(store) is DiskObjectStore and len(sha) == 40:
        hex_id = sha.decode("ascii")
        if os.path.isfile(os.path.join(store.path, hex_id[:2], hex_id[2:])):
            return True
    try:
        return sha in store
    except zlib.error as e:
        if is_too_large_to_read(e):
            return True
        raise


def file_blob_id(fd: int, size: int) -> bytes:
    """The blob id (40 hex bytes) of the open file's content, read a chunk at a time; ValueError when it does not
    hold exactly size bytes (it changed while read)."""
    digest = hashlib.sha1(b"blob %d\0" % size)
    read = 0
    while chunk := os.read(fd, CHUNK):
        read += len(chunk)
        digest.update(chunk)
    if read != size:
        raise ValueError(f"holds {read} bytes, not the {size} it had a moment before")
    return digest.hexdigest().encode("ascii")


def _loose_file(store, sha: bytes) -> str:  # noqa: ANN001
    """The path of sha's loose object in store or a store it borrows from; FileNotFoundError when none has it."""
    hex_id = sha.decode("ascii")
    stores = [store, *getattr(store, "alternates", [])]
    for each in stores:
        path = os.path.join(getattr(each, "path", ""), hex_id[:2], hex_id[2:])
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no loose object {hex_id}")


def write_loose_blob(store, sha: bytes, fd: int) -> int:  # noqa: ANN001
    """Inflate the loose blob sha into the open file fd, a chunk at a time; its size. ValueError when the object
    is no blob or its bytes do not hash to sha (what was written is then not that blob: the caller removes it);
    FileNotFoundError when it is not a loose object of store."""
    inflate = zlib.decompressobj()
    sink = _Sink(sha, fd)
    with open(_loose_file(store, sha), "rb") as source:
        while True:
            if inflate.unconsumed_tail:
                sink.take(inflate.decompress(inflate.unconsumed_tail, CHUNK))
                continue
            compressed = source.read(CHUNK)
            if not compressed:
                sink.take(inflate.flush())
                break
            sink.take(inflate.decompress(compressed, CHUNK))
    return sink.finish()


class _Sink:
    """The inflated bytes of one loose object: its header read, its content hashed and written (zeros seeked)."""

    def __init__(self, sha: bytes, fd: int) -> None:
        self.sha, self.fd = sha, fd
        self.header, self.written = b"", 0
        self.size: int | None = None
        self.digest = hashlib.sha1()

    def take(self, data: bytes) -> None:
        if self.size is None:
            self.header += data
            if b"\0" not in self.header:
                if len(self.header) > 64:
                    raise ValueError(f"object {self.sha.decode()} has no header")
                return
            head, _, data = self.header.partition(b"\0")
            kind, _, length = head.partition(b" ")
            if kind != b"blob" or not length.isdigit():
                raise ValueError(f"object {self.sha.decode()} is no blob")
            self.size = int(length)
            self.digest.update(head + b"\0")
        if not data:
            return
        self.digest.update(data)
        self.written += len(data)
        if data == _ZEROS[:len(data)]:
            os.lseek(self.fd, len(data), os.SEEK_CUR)
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def finish(self) -> int:
        os.ftruncate(self.fd, self.written)  # a last run of zeros was seeked over: the file ends where the blob does
        if self.size != self.written or self.digest.hexdigest().encode("ascii") != self.sha:
            raise ValueError(f"object {self.sha.decode()} holds other bytes than its id names")
        return self.written


_OFS_DELTA, _REF_DELTA = 6, 7
_TREE_MODE, _GITLINK_MODE = 0o040000, 0o160000


def stored_size(store, sha: bytes) -> int | None:  # noqa: ANN001
    """The size of the object sha as store (or a store it borrows from) holds it, read from its header alone
    (never inflated whole); None when no store has it."""
    hex_id = sha.decode("ascii")
    try:
        for each in [store, *getattr(store, "alternates", [])]:
            path = os.path.join(getattr(each, "path", ""), hex_id[:2], hex_id[2:])
            if os.path.isfile(path):
                return _loose_size(path)
            for pack in getattr(each, "packs", []):
                try:
                    offset = pack.index.object_offset(sha)
                except KeyError:
                    continue
                return _packed_size(pack._data_path, offset)
    except (IndexError, zlib.error, ValueError) as e:
        raise ValueError(f"object {hex_id} has a header that cannot be read: {e}") from None
    return None


def _loose_size(path: str) -> int:
    with open(path, "rb") as f:
        head = zlib.decompressobj().decompress(f.read(4096), 64)
    kind_and_size = head.partition(b"\0")[0]
    return int(kind_and_size.partition(b" ")[2])


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A delta header's size (7 bits a byte, least significant first) at data[at:]; (value, where it ends)."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _packed_size(path: str, offset: int) -> int:
    """The size of the object at offset in a pack: its header's, or for a delta, the size the delta makes."""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(8192)
    byte, at = data[0], 1
    kind, size, shift = (byte >> 4) & 7, byte & 0x0F, 4
    while byte & 0x80:
        byte = data[at]
        at += 1
        size |= (byte & 0x7F) << shift
        shift += 7
    if kind not in (_OFS_DELTA, _REF_DELTA):
        return size
    if kind == _OFS_DELTA:
        while data[at] & 0x80:
            at += 1
        at += 1
    else:
        at += 20
    delta = zlib.decompressobj().decompress(data[at:], 32)
    _, after_source = _varint(delta, 0)
    return _varint(delta, after_source)[0]


def oversized_blobs(source, target, head: str, tree: str, limit: int) -> list[tuple[bytes, int]]:  # noqa: ANN001
    """The blobs (id, size) over limit that head's history and tree would bring into target (which lacks them):
    the walk import_objects makes, each blob's size read from its header alone."""
    from dulwich.objects import Commit

    trees, pending, seen = [tree.encode("ascii")], [head.encode("ascii")], set()
    while pending:
        sha = pending.pop()
        if sha in seen or sha in target:
            continue
        seen.add(sha)
        commit = source[sha]
        if isinstance(commit, Commit):
            trees.append(commit.tree)
            pending.extend(commit.parents)
    found = []
    while trees:
        sha = trees.pop()
        if sha in seen or sha in target:
            continue
        seen.add(sha)
        for _name, mode, child in source[sha].iteritems():
            if mode == _TREE_MODE:
                trees.append(child)
            elif mode != _GITLINK_MODE and child not in seen and child not in target:
                seen.add(child)
                size = stored_size(source, child)
                if size is not None and size > limit:
                    found.append((child, size))
    return found
