"""What a run trusts of its repository, and what a candidate may not change without a person's approval.

The rule (DESIGN.md, "Security"): the repository is written by agents, so its
files cannot decide what docket trusts. When `docket go` plans a run it records
the digest of the docket.toml it read (from the user's checkout, which only the
user and gated deliveries write) and the run's *trusted paths*: docket.toml,
``.gitattributes`` and ``.gitmodules`` (they change how git and checks read the
tree), and every file of the repository a check, a hook or a ``[worktree] setup``
command names. A candidate that changes a trusted path is never queued on its
checks alone: it waits until a person approves it (``docket approve``), whatever
the checks said.

A command names a repository file when one of its words (a shell string's words
too: ``sh -c './ci.sh && make'``) is a relative path that stays inside the
repository and looks like a file: it has a folder part, starts with ``./`` or
ends in a known script suffix. ``make`` names the makefiles. What a program reads
by convention beyond that (pytest's ``conftest.py``, npm's ``package.json``) is
not a trusted path: the base's tests cover it (see the README's "Agents are
untrusted").
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Sequence

__all__ = ["ALWAYS_TRUSTED", "MAX_TRUSTED_PATHS", "named_paths", "trusted_changes"]

ALWAYS_TRUSTED = ("docket.toml", ".gitattributes", ".gitmodules")
MAX_TRUSTED_PATHS = 1000
SCRIPT_SUFFIXES = frozenset({".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php",
                             ".ps1", ".cfg", ".ini", ".toml", ".json", ".yaml", ".yml", ".mk"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def _words(argv: Sequence[str]) -> list[str]:
    """The argv's words; a shell's arguments (its script, or the script file it runs) split into words as the shell
    would, operators apart."""
    if not argv or posixpath.basename(argv[0]) not in _SHELLS:
        return list(argv)
    words = [argv[0]]
    for script in (word for word in argv[1:] if not word.startswith("-")):
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words += list(lexer)
        except ValueError:  # an unclosed quote: its plain words are still looked at
            words += script.replace("'", " ").replace('"', " ").split()
    return words


def _repository_file(word: str) -> str | None:
    """The repository path a word names, normalised; None for an option, an absolute path, one that leaves the
    repository, or a word that does not look like a file."""
    if not word or word.startswith("-") or word.startswith("/") or any(c in word for c in "\x00=*?["):
        return None
    looks_like_file = "/" in word.rstrip("/") or posixpath.splitext(word)[1] in SCRIPT_SUFFIXES
    if not looks_like_file or word.endswith("/"):
        return None
    path = posixpath.normpath(word)
    if path == "." or path == ".." or path.startswith("../"):
        return None
    return path


def named_paths(commands: Iterable[Sequence[str]]) -> set[str]:
    """Every repository path the commands name (argv lists), the makefiles of ``make``."""
    found: set[str] = set()
    for argv in commands:
        words = _words(argv)
        if any(posixpath.basename(word) in ("make", "gmake") for word in words):
            found.update(_MAKEFILES)
        found.update(path for path in map(_repository_file, words) if path is not None)
    return found


def trusted_changes(changed: Iterable[str], trusted: Iterable[str]) -> tuple[str, ...]:
    """The trusted paths among the changed ones (a changed path under a trusted folder counts, and a .gitattributes
    in any folder: it changes how git writes the files below it into a checkout), sorted."""
    wanted = set(trusted)
    return tuple(sorted(path for path in set(changed)
                        if path in wanted or posixpath.basename(path) == ".gitattributes"
                        or any(path.startswith(folder.rstrip("/") + "/") for folder in wanted)))
