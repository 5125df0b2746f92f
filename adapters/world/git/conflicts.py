"""What a conflicting candidate and the integration head each have at the paths they conflict on: the hunks a
repairing agent is shown (read from the object store with dulwich; bounded and escaped, since both sides are
agents' work)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from .repository import open_repo

__all__ = ["conflict_hunks"]

MAX_PATHS = 5
MAX_LINES = 30  # of one path's hunks
MAX_LINE_CHARS = 200


def conflict_hunks(repository: Path, head: str, commit: str, paths: Sequence[str]) -> str:
    """For each conflicting path (the first few): a unified diff from the integration head's version to the
    candidate's, so '-' lines are what the head has and '+' lines what the candidate has. Empty when nothing can
    be read."""

    try:
        repo = open_repo(repository)
    except Exception:  # noqa: BLE001 - the hunks are a courtesy: the paths are named anyway
        return ""
    with repo:
        try:
            parts = []
            for path in paths[:MAX_PATHS]:
                ours, theirs = _lines(repo, head, path), _lines(repo, commit, path)
                if ours is None and theirs is None:
                    continue
                diff = list(difflib.unified_diff(ours or [], theirs or [], f"integrated head: {path}",
                                                 f"your candidate: {path}", n=2, lineterm=""))
                shown = [_escaped(line) for line in diff[:MAX_LINES]]
                if len(diff) > MAX_LINES:
                    shown.append(f"... ({len(diff) - MAX_LINES} more lines)")
                parts.append("\n".join(shown))
            return "\n".join(parts)
        except Exception:  # noqa: BLE001
            return ""


def _lines(repo, commit: str, path: str) -> list[str] | None:  # noqa: ANN001
    from dulwich.object_store import tree_lookup_path

    try:
        tree = repo[repo[commit.encode()].tree]
        _, sha = tree_lookup_path(repo.__getitem__, tree.id, path.encode("utf-8", "surrogateescape"))
        data = repo[sha].data
    except (KeyError, AttributeError, NotADirectoryError, ValueError):
        return None
    if b"\0" in data[:8000]:
        return ["(binary file)"]
    return data.decode("utf-8", "replace").splitlines()


def _escaped(line: str) -> str:
    """Control characters shown as \\xNN, and the line cut short: what an agent wrote is data, not a terminal's."""
    text = "".join(c if c.isprintable() or c == "\t" else f"\\x{ord(c):02x}" for c in line)
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + "…"
