"""Task prompts beside the ledger, by content: ``<docket dir>/prompts/<sha256>.txt``.

The ledger keeps the digest (TaskPlanned); the text is stored create-only,
0600, never through a symlink, and read back only if it still has that digest.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ....domain.kernel.errors import BadInput, VerificationFailed
from ....domain.kernel.codes import Code
from .files import own_folder

__all__ = ["MAX_PROMPT_BYTES", "prompt_path", "read_prompt", "store_prompt"]

MAX_PROMPT_BYTES = 1 << 20


def prompt_path(docket_dir: Path, sha256: str) -> Path:
    return docket_dir / "prompts" / f"{sha256}.txt"


def store_prompt(docket_dir: Path, text: str) -> tuple[str, Path]:
    """Store the prompt's text (idempotent: the same text is one file); its digest and path."""
    data = text.encode("utf-8")
    if len(data) > MAX_PROMPT_BYTES:
        raise BadInput(Code.PROMPT_TOO_LARGE, f"a prompt holds at most {MAX_PROMPT_BYTES} bytes; this one has {len(data)}")
    if "\x00" in text:
        raise BadInput(Code.BAD_PROMPT, "a prompt cannot contain NUL characters")
    sha = hashlib.sha256(data).hexdigest()
    path = prompt_path(docket_dir, sha)

    own_folder(docket_dir, path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        read_prompt(docket_dir, sha)  # one already there must hold this very text
        return sha, path
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return sha, path


def read_prompt(docket_dir: Path, sha256: str) -> tuple[Path, str]:
    path = prompt_path(docket_dir, sha256)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise VerificationFailed(Code.PROMPT_MISSING, f"the prompt {sha256} is not at {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_PROMPT_BYTES + 1)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise VerificationFailed(Code.PROMPT_CHANGED, f"{path} no longer holds the prompt the ledger names ({sha256})")
    return path, data.decode("utf-8")
