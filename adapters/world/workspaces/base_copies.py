"""The base commit's copies of the repository files a hook or a ``[worktree] setup`` command names.

A hook or a setup command comes from the user's docket.toml, but the files of
the repository it names (``./notify.sh``, ``scripts/setup.py``, ``make``'s
makefiles: ``domain.trust.named_paths``) are written by agents: a checkout's or
a workspace's copy may be a candidate's. Such a command runs the *run's base
commit's* copy, and never another, in one of two ways, the simplest each launch
allows:

- **a hook** runs in a private folder of its own (``<docket>/hooks/<intent>.base``)
  holding the base's copies of the files it names, at their paths: ``./notify.sh``,
  ``sh -c './a.sh && make'`` and ``scripts/x.py`` all find the base's files there
  without their argv being rewritten. A hook notifies; it needs no checkout.
- **a setup command** must run in the new task workspace (``npm ci`` works there),
  which a dependent task starts from another task's candidate. Each argv word that
  names a repository file is rewritten to the base's copy, kept in a private
  folder outside the workspace (``<docket>/setup/<task>/<n>.base``); a file named
  only inside a shell string (``sh -c './a.sh'``) or implied (``make``'s Makefile)
  cannot be rewritten safely, so the workspace's copy must then be the base's,
  byte for byte (or both absent): otherwise the command is refused
  (``script-not-from-base``) before anything runs.

The copies are written from the base commit's blobs through dulwich (no filter,
no checkout), regular files only (a link or a submodule is not copied: a link
could lead anywhere), read-only (0444, 0555 when executable in git). The sandbox
gives the folder as a read root only, so the command cannot change them.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from ....domain.kernel.codes import Code
from ....domain.kernel.errors import Refused
from ....domain.containment.trust import _repository_file, named_paths
from ..git.repository import commit_of, open_repo

__all__ = ["base_blobs", "materialise", "setup_command"]

_MAX_FILE = 64 << 20  # a script larger than this is not copied (refused instead)


def base_blobs(repository: Path, base: str, paths: Iterable[str]) -> dict[str, tuple[bytes, bool] | None]:
    """For each path: (its bytes, executable) as the base commit holds it as a regular file, or None when the base
    has no regular file there. KeyError when the base is no commit of the repository."""
    from dulwich.object_store import tree_lookup_path
    from dulwich.objects import Blob

    found: dict[str, tuple[bytes, bool] | None] = {}
    with open_repo(repository) as repo:
        commit = commit_of(repo, base)
        if commit is None:
            raise KeyError(f"{base} is not a commit in {repository}")
        for path in sorted(set(paths)):
            try:
                mode, sha = tree_lookup_path(repo.object_store.__getitem__, commit.tree,
                                             path.encode("utf-8", "surrogateescape"))
                blob = repo[sha]
            except (KeyError, OSError, ValueError, NotADirectoryError):
                found[path] = None
                continue
            if not isinstance(blob, Blob) or not stat.S_ISREG(mode) or blob.raw_length() > _MAX_FILE:
                found[path] = None
                continue
            found[path] = (blob.as_raw_string(), bool(mode & 0o111))
    return found


def materialise(repository: Path, base: str, paths: Iterable[str], folder: Path) -> dict[str, Path]:
    """Write the base's copies of paths under folder (made, 0700; it must not exist yet or be empty of them): the
    copy of each path the base holds as a regular file, by its path there. KeyError for an unknown base."""
    folder.mkdir(mode=0o700, parents=False, exist_ok=True)
    copies: dict[str, Path] = {}
    for path, content in base_blobs(repository, base, paths).items():
        if content is None:
            continue
        data, executable = content
        target = folder.joinpath(*path.split("/"))
        for parent in reversed(target.relative_to(folder).parents[:-1]):
            (folder / parent).mkdir(mode=0o700, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(target, 0o555 if executable else 0o444)
        copies[path] = target
    return copies


def _same_as_base(workspace: Path, path: str, content: tuple[bytes, bool] | None) -> bool:
    """Whether the workspace's file at path is the base's (content), byte for byte, or absent as in the base."""
    where = workspace / path
    if not Path(os.path.realpath(where.parent)).is_relative_to(os.path.realpath(workspace)):
        return False  # a linked folder: docket opens nothing outside the workspace on its behalf
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO does not hold docket
    except FileNotFoundError:
        return content is None
    except OSError:
        return False  # a link, a folder, unreadable: not the base's regular file
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return False
        data = f.read(_MAX_FILE + 1)
    return content is not None and data == content[0]


def setup_command(argv: Sequence[str], *, repository: Path, base: str, workspace: Path,
                  folder: Path) -> tuple[list[str], Path | None]:
    """(the argv to run, the folder of base copies it reads, if any) for one setup command in workspace: its words
    naming repository files rewritten to the base's copies (made under folder), the other files it names checked
    to be the base's in the workspace. Refused (script-not-from-base) when one is not."""
    names = named_paths([argv])
    if not names:
        return list(argv), None
    try:
        blobs = base_blobs(repository, base, names)
    except (KeyError, OSError) as e:
        raise Refused(Code.SCRIPT_NOT_FROM_BASE, f"the base commit {base} cannot be read to run setup command "
                                                 f"{list(argv)!r} from its copies: {e}") from e
    direct = {path for index, word in enumerate(argv)
              if (path := _repository_file(word)) is not None and path in names and blobs.get(path) is not None
              and (index > 0 or "/" in word)}  # a bare program name is looked up on PATH, not in the repository
    copies = materialise(repository, base, direct, folder) if direct else {}
    argv_out = [str(copies[path]) if (path := _repository_file(word)) is not None and path in copies
                and (index > 0 or "/" in word) else word for index, word in enumerate(argv)]
    for path in sorted(names - set(copies)):
        if not _same_as_base(workspace, path, blobs.get(path)):
            raise Refused(Code.SCRIPT_NOT_FROM_BASE,
                          f"setup command {list(argv)!r} names {posixpath.join('.', path)!r}, whose copy in the task's "
                          "workspace is not the run's base's (a candidate's), and it cannot be pointed at the base's "
                          "copy (it is named inside a shell string, or read by convention); name the file as its "
                          "own argv word, or keep it unchanged")
    return argv_out, folder if copies else None
