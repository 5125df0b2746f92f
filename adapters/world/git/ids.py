"""Object ids and ref names as dulwich's annotations name them (``ObjectID``, ``Ref``: bytes, told apart for a type
checker only), and a commit read from an object store; dulwich is imported on first use, as everywhere in git/."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from dulwich.objects import Commit, ObjectID
    from dulwich.refs import Ref

__all__ = ["commit_at", "object_id", "ref_name"]


def object_id(sha: str | bytes) -> ObjectID:
    """A hex object id (str or its ASCII bytes) as dulwich takes it."""
    return cast("ObjectID", sha.encode("ascii") if isinstance(sha, str) else sha)


def ref_name(name: str | bytes) -> Ref:
    """A ref's name (str, encoded as UTF-8, or bytes) as dulwich takes it."""
    return cast("Ref", name.encode() if isinstance(name, str) else name)


def commit_at(store: Any, sha: str | bytes) -> Commit:
    """The commit sha names in store (an object store or a repository): KeyError when it lacks the object,
    AttributeError when the object is no commit (as reading a commit's fields of it would)."""
    from dulwich.objects import Commit

    found = store[object_id(sha)]
    if not isinstance(found, Commit):
        shown = object_id(sha).decode("ascii", "replace")
        raise AttributeError(f"{shown} is a {found.type_name.decode()}, not a commit")
    return found
