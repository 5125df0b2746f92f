"""Bindings: the names docket derives from captured content (binding ids, candidate refs), as in DOMAIN-NOTES.

A binding id names one capture of one worker's worktree: the same run, boundary,
HEAD, tree, changed paths and worktree always give the same id, and anything
else gives another. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .kernel.canonical import canonical_json
from .kernel.errors import BadInput
from .kernel.names import check_branch_name
from .kernel.codes import Code

__all__ = [
    "BINDING_VERSION",
    "CANDIDATE_REF_PREFIX",
    "CopiedArtifact",
    "binding_id",
    "binding_seed",
    "candidate_ref",
    "quote_path",
    "worktree_identity",
]

BINDING_VERSION = "docket-binding-v1"
CANDIDATE_REF_PREFIX = "refs/docket/candidates/"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_OBJECT_ID = re.compile(r"[0-9a-f]{40}")


def _digest(value: object) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


_C_ESCAPES = {0x07: "\\a", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0B: "\\v", 0x0C: "\\f", 0x0D: "\\r",
              0x22: '\\"', 0x5C: "\\\\"}


def quote_path(raw: bytes) -> str:
    """A path of a git tree as text: as ``git -c core.quotePath=false`` prints it, when it is UTF-8.

    A name that is valid UTF-8 with no control character, double quote or
    backslash is itself. Any other is put in double quotes with C escapes
    (``\\n``, ``\\"``, ``\\\\``, and ``\\ooo`` octal for other control bytes), and a byte
    that is not UTF-8 is escaped in octal as ``core.quotePath=true`` would (git
    itself would print it raw). So every path has one text form, none drives
    a terminal, and none is mistaken for another.
    """
    text = raw.decode("utf-8", "surrogateescape")
    if not any(b < 0x20 or b in (0x22, 0x5C, 0x7F) for b in raw) and not any("\udc80" <= c <= "\udcff" for c in text):
        return text
    out = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\{code - 0xDC00:03o}")
        elif code in _C_ESCAPES:
            out.append(_C_ESCAPES[code])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\{code:03o}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def worktree_identity(realpath: str, git_dir: str) -> str:
    """sha256 of canonical {realpath, git_dir}: which checkout a capture came from (both absolute paths)."""
    return _digest({"git_dir": git_dir, "realpath": realpath})


def binding_seed(run_id: str, boundary: str) -> str:
    """sha256 of canonical {run_id, boundary}; the boundary says which phase the capture closes."""
    return _digest({"boundary": boundary, "run_id": run_id})


def binding_id(seed: str, head: str, tree: str, changed_paths: Sequence[str], worktree_identity: str) -> str:
    """sha256 of canonical {version, binding_seed, expected_head, tree, changed_paths (sorted), worktree_identity}.

    The changed paths are sorted and deduplicated first, so the id does not depend on the order they were listed in.
    """
    for name, oid in (("head", head), ("tree", tree)):
        if not _OBJECT_ID.fullmatch(oid):
            raise BadInput(Code.BAD_OBJECT_ID, f"{name} {oid!r} is not a 40-digit lower-case hex object id")
    return _digest({
        "binding_seed": seed,
        "changed_paths": sorted(set(changed_paths)),
        "expected_head": head,
        "tree": tree,
        "version": BINDING_VERSION,
        "worktree_identity": worktree_identity,
    })


def candidate_ref(run_id: str, binding: str) -> str:
    """``refs/docket/candidates/<run>/<binding>``; BadInput ``bad-candidate-ref`` unless both are safe ref parts."""
    if not _SHA256.fullmatch(binding):
        raise BadInput(Code.BAD_CANDIDATE_REF, f"binding id {binding!r} is not a 64-digit lower-case hex digest")
    if not run_id or "/" in run_id:
        raise BadInput(Code.BAD_CANDIDATE_REF, f"run id {run_id!r} is not a single ref name component")
    try:
        check_branch_name(f"candidates/{run_id}/{binding}")
    except BadInput as e:
        raise BadInput(Code.BAD_CANDIDATE_REF, e.message) from None
    return f"{CANDIDATE_REF_PREFIX}{run_id}/{binding}"


@dataclass(frozen=True)
class CopiedArtifact:
    """One artifact file copied back: its path relative to the artifact directory, sha256 and size in bytes."""

    path: str
    sha256: str
    size: int
