"""Names people type that the ledger records: each accepted in exactly one, harmless form.

A resource (``wt/x``, ``task:t1``) is a path-like name relative to the repository
root; every spelling of one place becomes the same name, so two leases cannot hold
one place under two names. A branch name follows git's own rules
(``git check-ref-format --branch``). Neither may carry characters that drive a
terminal or hide in plain sight. Lexical rules only: no filesystem, no git.
"""

from __future__ import annotations

import posixpath
import unicodedata

from .errors import BadInput
from .codes import Code

__all__ = [
    "check_branch_name",
    "check_include_pattern",
    "has_unsafe_characters",
    "is_unsafe_character",
    "normal_resource",
    "normalise_resource",
    "task_branch",
    "valid_branch_name",
]

RESOURCE_MAX_LENGTH = 512
BRANCH_MAX_LENGTH = 255

# Controls (C0, DEL, C1), invisible format characters (bidi controls, zero-width
# joiners), lone surrogates, and line/paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_BRANCH_FORBIDDEN = frozenset(" ~^:?*[\\")


def is_unsafe_character(char: str) -> bool:
    return unicodedata.category(char) in _UNSAFE_CATEGORIES


def has_unsafe_characters(text: str) -> bool:
    if text.isprintable():  # the fast path: printable text has none of them
        return False
    return any(map(is_unsafe_character, text))


def _quoted(text: str) -> str:
    quoted = repr(text)
    return quoted if len(quoted) <= 80 else quoted[:77] + "..."


def normalise_resource(text: str, root: str | None) -> str:
    """The one name of a resource, relative to the repository root ``root``.

    ``wt/x``, ``./wt/x``, ``wt//x``, ``wt/x/``, ``wt/y/../x`` and ``<root>/wt/x``
    all become ``wt/x``. Refused (BadInput ``bad-resource``): a name that escapes
    the root, is the root itself or starts with ``..``, an absolute path outside
    root (any absolute path when root is None), and unsafe characters (NUL,
    controls, bidi, zero-width).
    """

    def refuse(why: str) -> BadInput:
        return BadInput(Code.BAD_RESOURCE, f"resource {_quoted(text)} {why}")

    if has_unsafe_characters(text):
        raise refuse("contains a control, bidi or invisible character")
    path = posixpath.normpath(text) if text else ""
    if path.startswith("/"):
        if root is None:
            raise refuse("is an absolute path; name it relative to the repository root")
        path = "/" + path.lstrip("/")  # normpath keeps a leading '//'
        top = posixpath.normpath("/" + root.lstrip("/")).rstrip("/") + "/"
        if not path.startswith(top):
            raise refuse(f"is outside the repository {root}")
        path = path[len(top):] or "."
    if path in ("", "."):
        raise refuse("is the repository root itself; name something inside it")
    if path == ".." or path.startswith("../"):
        raise refuse("escapes the repository root")
    if path.startswith(".."):  # '..x' is a file name, but it reads like a way out: keep names unmistakable
        raise refuse("starts with '..'")
    if len(path) > RESOURCE_MAX_LENGTH:
        raise refuse(f"is longer than {RESOURCE_MAX_LENGTH} characters")
    return path


def check_branch_name(name: str) -> str:
    """name, if git accepts it as a branch name and it is safe to show; else BadInput ``bad-branch-name``.

    Stricter than git in three ways: unsafe characters (C1 controls, bidi,
    zero-width), ``@`` (git reads it as HEAD inside a repository) and names longer
    than 255 characters are refused too.
    """
    problem = _branch_problem(name)
    if problem:
        raise BadInput(Code.BAD_BRANCH_NAME, f"branch name {_quoted(name)} {problem}")
    return name


def _branch_problem(name: str) -> str | None:
    if not name:
        return "is empty"
    if len(name) > BRANCH_MAX_LENGTH:
        return f"is longer than {BRANCH_MAX_LENGTH} characters"
    if has_unsafe_characters(name):
        return "contains a control, bidi or invisible character"
    forbidden = sorted(_BRANCH_FORBIDDEN.intersection(name))
    if forbidden:
        return "contains " + " ".join(repr(c) for c in forbidden)
    if name.startswith("-"):
        return "starts with '-'"
    if name in ("@", "HEAD"):
        return f"is {name!r}, which git reads as the current commit"
    if name.startswith("/") or name.endswith("/") or "//" in name:
        return "has an empty path component (a leading, trailing or doubled '/')"
    if ".." in name:
        return "contains '..'"
    if "@{" in name:
        return "contains '@{'"
    if name.endswith("."):
        return "ends with '.'"
    for component in name.split("/"):
        if component.startswith("."):
            return f"has a component starting with '.' ({component!r})"
        if component.endswith(".lock"):
            return f"has a component ending in '.lock' ({component!r})"
    return None


def task_branch(run_id: str, task_id: str) -> str:
    """The branch a task's worktree is on: ``docket/<run>/<task>`` (BadInput ``bad-branch-name`` if git refuses it)."""
    for part in (run_id, task_id):
        if not part or "/" in part:
            raise BadInput(Code.BAD_BRANCH_NAME, f"id {_quoted(part)} is not a single branch name component")
    return check_branch_name(f"docket/{run_id}/{task_id}")


def check_include_pattern(pattern: str) -> str:
    """pattern, if it is a relative glob that stays inside its root; else BadInput ``bad-include``.

    Each '/'-separated part is matched on its own (``*`` never crosses a '/').
    Refused: empty, absolute, a ``..`` or ``.`` part, an empty part, unsafe characters.
    """
    def refuse(why: str) -> BadInput:
        return BadInput(Code.BAD_INCLUDE, f"include pattern {_quoted(pattern)} {why}")

    if not pattern:
        raise refuse("is empty")
    if has_unsafe_characters(pattern):
        raise refuse("contains NUL, a control, bidi or invisible character")
    if pattern.startswith("/"):
        raise refuse("is absolute; name files relative to the repository root")
    parts = pattern.rstrip("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise refuse("has an empty, '.' or '..' part")
    if len(pattern) > RESOURCE_MAX_LENGTH:
        raise refuse(f"is longer than {RESOURCE_MAX_LENGTH} characters")
    return pattern


# Validators for the event types (pydantic turns a ValueError into a ValidationError).


def normal_resource(text: str) -> str:
    """text, if it is already a resource's one name."""
    try:
        normal = normalise_resource(text, None)
    except BadInput as e:
        raise ValueError(e.message) from None
    if normal != text:
        raise ValueError(f"resource {_quoted(text)} is not in its normal form {_quoted(normal)}")
    return text


def valid_branch_name(name: str) -> str:
    try:
        return check_branch_name(name)
    except BadInput as e:
        raise ValueError(e.message) from None
