"""Safe filesystem operations."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["create_private_file"]


def create_private_file(path: Path) -> None:
    """Create path (and its folder) readable by its owner only, if missing."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)
