"""A check's protected paths: the files that decide what its tests test, which a candidate cannot weaken.

A check (docket.toml's ``[checks.NAME]``) names them as globs (``protected``; the
default below). When a candidate's tree holds other protected files than the run's
base does, and the base holds at least one, the check also runs on the candidate's
code with the base's protected files: the *base-tests tree*, the candidate's tree
with every protected path as the base has it (a file the candidate changed or
deleted comes back, one it added is gone). The candidate passes the check only if
both executions pass (adapters/service_layer/use_cases/base_tests.py).

Globs are matched against a path's ``/``-separated parts: ``**`` stands for any
number of parts (none too), ``*``, ``?`` and ``[...]`` match within one part.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .processes import glob_matches

__all__ = ["DEFAULT_PROTECTED", "is_protected", "protected_changes"]

# pytest's and most test runners' files: the test folders, test modules anywhere, the conftest.py files that can
# deselect or rewrite them, and the files pytest reads its options from (pytest.ini, and pyproject.toml, setup.cfg
# and tox.ini at the top, whose addopts or testpaths can deselect a test). Those three hold much else an agent may
# change honestly: changing them costs the second execution, which runs the candidate's code with the base's copies.
DEFAULT_PROTECTED = ("tests/**", "test/**", "**/conftest.py", "**/test_*.py", "**/*_test.py", "pytest.ini",
                     "pyproject.toml", "setup.cfg", "tox.ini")


def _matches(parts: Sequence[str], pattern: Sequence[str]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and glob_matches(parts[0], head) and _matches(parts[1:], rest)


def is_protected(path: str, globs: Iterable[str]) -> bool:
    """Whether the repository path (``/``-separated, relative) matches one of the globs."""
    parts = [p for p in path.split("/") if p]
    return any(_matches(parts, [p for p in glob.split("/") if p]) for glob in globs)


def protected_changes(changed_paths: Iterable[str], globs: Iterable[str]) -> tuple[str, ...]:
    """The changed paths that are protected, sorted."""
    globs = tuple(globs)
    return tuple(sorted(p for p in set(changed_paths) if is_protected(p, globs)))
