"""What commits' trees hold, read through dulwich: a commit's tree, the files under a folder, the paths two differ in."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from ....domain.binding import quote_path
from .ids import commit_at, object_id
from .repository import commit_of, open_repo
import difflib
from ....domain.containment.protected import is_protected
from .objects import add_object

__all__ = ["base_tests_tree", "changed_paths", "commit_tree", "files_diff", "tree_paths"]


def commit_tree(repository: Path, commit: str) -> str:
    """The id of the commit's tree; KeyError when the repository has no such commit."""
    from dulwich.objects import Commit

    with open_repo(repository) as repo:
        obj = repo[commit.encode("ascii")]
        if not isinstance(obj, Commit):
            raise KeyError(f"{commit} is not a commit")
        return obj.tree.decode("ascii")


def tree_paths(repository: Path, commit: str, folder: str) -> list[str]:
    """Paths of the files (blobs, symlinks) the commit's tree holds under folder, relative to it, sorted.

    Nothing (an empty list) when the folder is not in the tree or the commit cannot be read.
    """
    from dulwich.errors import NotGitRepository
    from dulwich.objects import Tree
    from dulwich.object_store import tree_lookup_path

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return []
    with repo:
        try:
            root = commit_at(repo, commit.encode()).tree
            _, sha = tree_lookup_path(repo.object_store.__getitem__, root, folder.strip("/").encode())
            if not isinstance(repo[sha], Tree):
                return []
            return sorted(entry.path.decode("utf-8", "surrogateescape")
                          for entry in repo.object_store.iter_tree_contents(sha) if entry.mode != 0o160000)
        except (KeyError, OSError, ValueError):
            return []



def changed_paths(repository: Path, base: str, commit: str) -> tuple[str, ...]:
    """The paths (quoted as candidates quote them, sorted) whose entries differ between base's tree and commit's.
    OSError or KeyError when either cannot be read."""
    from dulwich.diff_tree import tree_changes

    with open_repo(repository) as repo:
        old, new = commit_of(repo, base), commit_of(repo, commit)
        if old is None or new is None:
            raise KeyError(f"{base if old is None else commit} is not a commit in {repository}")
        paths = set()
        for change in tree_changes(repo.object_store, old.tree, new.tree):
            for entry in (change.old, change.new):
                if entry is not None and entry.path is not None:
                    paths.add(quote_path(entry.path))
        return tuple(sorted(paths))



def files_diff(repository: Path, base: str, commit: str, paths: list[str], *, max_chars: int = 20_000) -> str:
    """A unified diff of the named files from base to commit, read as blobs through dulwich (no git program, so no
    diff driver or textconv a .gitattributes names runs), cut at max_chars; a binary or unreadable file is one line.
    """

    from dulwich.object_store import tree_lookup_path
    from dulwich.objects import Blob

    def lines(repo, tree: bytes, path: str) -> list[str] | None:  # noqa: ANN001
        try:
            _, sha = tree_lookup_path(repo.object_store.__getitem__, object_id(tree),
                                      path.encode("utf-8", "surrogateescape"))
            blob = repo[sha]
        except (KeyError, OSError, ValueError):
            return []  # not in this tree: the diff shows it added or removed
        if not isinstance(blob, Blob) or len(blob.data) > 1 << 20 or b"\0" in blob.data[:8192]:
            return None
        return blob.data.decode("utf-8", "replace").splitlines(keepends=True)

    out: list[str] = []
    with open_repo(repository) as repo:
        old, new = commit_of(repo, base), commit_of(repo, commit)
        if old is None or new is None:
            raise KeyError(f"{base if old is None else commit} is not a commit in {repository}")
        for path in paths:
            before, after = lines(repo, old.tree, path), lines(repo, new.tree, path)
            if before is None or after is None:
                out.append(f"{path}: binary or too large to show\n")
                continue
            out.extend(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))
    text = "".join(line if line.endswith("\n") else line + "\n" for line in out)
    return text if len(text) <= max_chars else text[:max_chars] + f"... ({len(text) - max_chars} characters more)\n"


def base_tests_tree(repository: Path, commit: str, base: str,
                    globs: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """The base-tests tree of commit (domain/containment/protected.py): its tree with every path matching globs as base's tree
    has it (changed or deleted ones restored, added ones removed), written to the object store, and the paths it
    differs from commit's tree in (quoted as candidates quote them, sorted); None when base holds no such path, or
    the tree would be commit's own. KeyError when either commit cannot be read."""
    from dulwich.object_store import iter_tree_contents
    from dulwich.objects import Tree

    def guarded(raw: bytes) -> bool:
        return is_protected(raw.decode("utf-8", "surrogateescape"), globs)

    with open_repo(repository) as repo:
        old, new = commit_of(repo, base), commit_of(repo, commit)
        if old is None or new is None:
            raise KeyError(f"{base if old is None else commit} is not a commit in {repository}")
        store = repo.object_store
        ours = {e.path: (e.mode, e.sha) for e in iter_tree_contents(store, new.tree)}
        theirs = {e.path: (e.mode, e.sha) for e in iter_tree_contents(store, old.tree) if guarded(e.path)}
        if not theirs:
            return None
        merged = {path: entry for path, entry in ours.items() if not guarded(path)} | theirs
        if merged == ours:
            return None
        differing = tuple(sorted(quote_path(path) for path in set(ours) | set(merged)
                                 if ours.get(path) != merged.get(path)))
        root: dict[bytes, object] = {}
        for path, entry in merged.items():
            *folders, name = path.split(b"/")
            here = root
            for folder in folders:
                here = here.setdefault(folder, {})  # type: ignore[assignment]
            here[name] = entry

        def write(folder: dict[bytes, object]) -> bytes:
            tree = Tree()
            for name, value in folder.items():
                if isinstance(value, dict):
                    tree.add(name, 0o040000, object_id(write(value)))
                else:
                    mode, sha = cast("tuple[int, bytes]", value)  # a file's entry: its mode and blob id
                    tree.add(name, mode, object_id(sha))
            return add_object(store, tree)

        return write(root).decode("ascii"), differing
