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
not a trusted path: the base's tests cover it (see docs/security.md, "Agents
are untrusted").
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


def _folder(word: str, within: str) -> str | None:
    """The repository folder ``cd word`` (or ``make -C word``) enters from within; None when it leaves the
    repository or cannot be known (absolute, ``-``, ``~``, a variable)."""
    if not word or word[0] in "/-~$" or any(c in word for c in "\x00*?[`"):
        return None
    path = posixpath.normpath(posixpath.join(within, word))
    return None if path == ".." or path.startswith("../") else path


def named_paths(commands: Iterable[Sequence[str]]) -> set[str]:
    """Every repository path the commands name (argv lists), the makefiles of ``make``. A shell's ``cd folder`` (and
    ``make -C folder``) moves where the words after it are read from: ``cd scripts && ./check.sh`` names
    ``scripts/check.sh`` (and, in case the folder is not what it seems, ``check.sh`` too)."""
    found: set[str] = set()
    for argv in commands:
        words = _words(argv)
        within: str | None = "."
        entered = -1  # the index of the folder word a cd just took
        for index, word in enumerate(words):
            following = words[index + 1] if index + 1 < len(words) else ""
            base = posixpath.basename(word)
            if index == entered:
                continue
            if word == "cd":
                within = _folder(following, within) if within is not None else None
                entered = index + 1
                continue
            if base in ("make", "gmake"):
                found.update(_MAKEFILES)
                if within not in (None, "."):
                    found.update(posixpath.join(within, name) for name in _MAKEFILES)
            if word == "-C" and any(posixpath.basename(w) in ("make", "gmake") for w in words[:index]):
                folder = _folder(following, within or ".")
                if folder is not None:
                    found.update(posixpath.normpath(posixpath.join(folder, name)) for name in _MAKEFILES)
                entered = index + 1  # the folder is where make works, not a file it runs
                continue
            path = _repository_file(word)
            if path is None:
                continue
            found.add(path)
            if within not in (None, "."):
                joined = posixpath.normpath(posixpath.join(within, path))
                if not joined.startswith("../"):
                    found.add(joined)
    return found


def trusted_changes(changed: Iterable[str], trusted: Iterable[str]) -> tuple[str, ...]:
    """The trusted paths among the changed ones (a changed path under a trusted folder counts, and a .gitattributes
    in any folder: it changes how git writes the files below it into a checkout), sorted."""
    wanted = set(trusted)
    return tuple(sorted(path for path in set(changed)
                        if path in wanted or posixpath.basename(path) == ".gitattributes"
                        or any(path.startswith(folder.rstrip("/") + "/") for folder in wanted)))
