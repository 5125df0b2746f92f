"""Where the ledger lives (<git common dir>/docket/ledger.sqlite by default) and where agents and checks work
(workspaces and executions, in docket's data folder, outside the user's repository).

Found without importing git libraries, so that ``docket status`` starts fast.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ....domain.kernel.errors import BadInput, NotFound
from ....domain.kernel.names import task_branch
from ....domain.kernel.codes import Code
import hashlib
from urllib.parse import urlsplit

__all__ = [
    "LedgerPaths",
    "configured_database_url",
    "database_paths",
    "find_git_common_dir",
    "data_dir",
    "executions_root",
    "main_worktree",
    "repository_key",
    "root_of_workspace",
    "repository_root",
    "resolve_paths",
    "syntax_message",
    "task_branch",
    "task_worktree_path",
    "workspaces_root",
]


@dataclass(frozen=True)
class LedgerPaths:
    """Where the ledger is, and this machine's views of it. With ``url`` the ledger is that PostgreSQL database and
    ``ledger`` only names the docket folder it is read from on this machine (its parent; no file is made there)."""

    ledger: Path
    views: Path
    url: str | None = None

    @property
    def where(self) -> str:
        """The ledger's place for messages: its file, or its database's URL without a password."""
        if self.url is None:
            return str(self.ledger)
        from ..ledger.database_url import redacted

        return redacted(self.url)


def find_git_common_dir(start: Path) -> Path | None:
    """The common git dir of the repository containing start (worktrees share it)."""
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return dot_git.resolve()
        if dot_git.is_file():
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            git_dir = (folder / text[len("gitdir:"):].strip()).resolve()
            commondir = git_dir / "commondir"
            if commondir.is_file():
                return (git_dir / commondir.read_text(encoding="utf-8").strip()).resolve()
            return git_dir
        if (folder / "HEAD").is_file() and (folder / "objects").is_dir() and (folder / "refs").is_dir():
            return folder.resolve()  # a bare repository
    return None


def repository_root(start: Path) -> Path | None:
    """The top of the repository's main worktree (a bare repository: its git dir); None outside a repository.

    Every worktree of a repository shares it, so a name relative to it means the same place from any of them.
    """
    common = find_git_common_dir(start)
    if common is None:
        return None
    return common.parent if common.name == ".git" else common


def resolve_paths(ledger_option: str | None, cwd: Path | None = None,
                  warn: Callable[[str, str], None] | None = None) -> LedgerPaths:
    """--ledger, then DOCKET_DATABASE_URL or DOCKET_LEDGER (not both), then docket.toml's ``[ledger] url``, then the
    repository's default file. warn(code, message) is told of a docket.toml that cannot be parsed but names no
    ledger: the default one is read all the same."""
    where = (cwd or Path.cwd()).absolute()
    url = None if ledger_option else os.environ.get("DOCKET_DATABASE_URL", "").strip() or None
    chosen = ledger_option or os.environ.get("DOCKET_LEDGER")
    if url and chosen:
        raise BadInput(Code.BAD_ENVIRONMENT, "DOCKET_DATABASE_URL and DOCKET_LEDGER are both set; a ledger is one or the "
                                          "other (--ledger FILE chooses a file whatever is set)")
    if url is None and not chosen:
        url = _configured_url(where, warn)
    if url is not None:
        return database_paths(url, find_git_common_dir(where))
    if chosen:
        ledger = Path(chosen).expanduser().absolute()
    else:
        common = find_git_common_dir(where)
        if common is None:
            raise NotFound(
                Code.NOT_A_REPOSITORY,
                "no git repository here; run inside one, or pass --ledger PATH (or set DOCKET_LEDGER)",
            )
        ledger = common / "docket" / "ledger.sqlite"
    if ledger.is_dir():
        raise BadInput(Code.LEDGER_IS_A_DIRECTORY, f"{ledger} is a directory; --ledger names the ledger file itself")
    views_name = "views.sqlite" if ledger.name == "ledger.sqlite" else ledger.stem + ".views.sqlite"
    return LedgerPaths(ledger=ledger, views=ledger.with_name(views_name))


def database_paths(url: str, common: Path | None) -> LedgerPaths:
    """A PostgreSQL ledger's paths on this machine: views of their own per database, in the repository's docket
    folder (outside a repository, an auditor's: the data folder's), never those of the repository's file ledger."""

    from ..ledger.database_url import postgres_env, redacted

    try:
        postgres_env(url, lock_timeout=0)
    except ValueError as e:
        raise BadInput(Code.BAD_DATABASE_URL, f"{str(e)[:300]} (postgresql://user@host:port/database)") from None
    key = hashlib.sha256(redacted(url).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    folder = common / "docket" if common is not None else data_dir() / "databases"
    return LedgerPaths(ledger=folder / f"ledger.{key}.postgres", views=folder / f"views.{key}.sqlite", url=url)


def configured_database_url(cwd: Path) -> str | None:
    """The PostgreSQL ledger's URL this process is given: DOCKET_DATABASE_URL, else docket.toml's [ledger] url."""
    return os.environ.get("DOCKET_DATABASE_URL", "").strip() or _configured_url(cwd)


def _configured_url(cwd: Path, warn: Callable[[str, str], None] | None = None) -> str | None:
    """docket.toml's ``[ledger] url`` at the repository's top, read only when the file mentions a ledger. A password
    in it is refused: the file is committed with the repository (PGPASSWORD or ~/.pgpass hold one)."""
    root = repository_root(cwd)
    config = root / "docket.toml" if root is not None else None
    try:
        text = config.read_text(encoding="utf-8") if config is not None else ""
    except (OSError, UnicodeDecodeError):
        return None  # the commands that need docket.toml report what is wrong with it
    if "ledger" not in text:
        return None
    import tomllib

    try:
        url = tomllib.loads(text).get("ledger", {}).get("url")
    except tomllib.TOMLDecodeError as e:
        _unparsed(text, str(e), warn)
        return None
    except AttributeError:
        raise BadInput(Code.BAD_CONFIG, "docket.toml: [ledger] must be a table (url = \"postgresql://...\")") from None
    if url is None:
        return None
    if not isinstance(url, str) or not url.strip():
        raise BadInput(Code.BAD_CONFIG, "docket.toml: [ledger] url must be a postgresql:// URL")

    if urlsplit(url).password:
        raise BadInput(Code.BAD_CONFIG, "docket.toml: [ledger] url holds a password, and docket.toml is committed with "
                                     "the repository; give it in PGPASSWORD or ~/.pgpass instead")
    return url.strip()


_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def syntax_message(message: str) -> str:
    """A TOML syntax error (tomllib's words) as `docket.toml line N: what (column C)`."""
    at = _AT.search(message)
    if at is None:
        return f"docket.toml: {message}"
    return f"docket.toml line {at.group(1)}: {message[:at.start()]} (column {at.group(2)})"


_LEDGER_NAMED = re.compile(r"\s*(\[\s*ledger\s*[].]|\[\[\s*ledger\s*[].]|ledger\s*[.=])")


def _unparsed(text: str, error: str, warn: Callable[[str, str], None] | None) -> None:
    """A docket.toml that is not TOML: refused when a line that is no comment names a ledger (which one is meant is
    unknown, and the default file is not it), else warned of, the repository's ledger file being the one meant."""
    what = syntax_message(error)
    named = next((n for n, line in enumerate(text.splitlines(), 1) if _LEDGER_NAMED.match(line)), None)
    if named is not None:
        raise BadInput(Code.BAD_CONFIG, f"{what}; the file names a [ledger] (line {named}), so which ledger to open is "
                                     "unknown: fix it, or choose one with --ledger FILE or DOCKET_DATABASE_URL")
    if warn is not None:
        warn("bad-config", f"{what}; reading the repository's ledger file, as docket.toml names no other "
                           "('docket config show' checks the file)")


def data_dir() -> Path:
    """docket's data folder: ``$XDG_DATA_HOME/docket``, else ``~/.local/share/docket`` (a relative XDG_DATA_HOME is
    ignored, as the XDG spec says)."""
    chosen = os.environ.get("XDG_DATA_HOME", "")
    base = Path(chosen) if chosen and os.path.isabs(chosen) else Path.home() / ".local" / "share"
    return base / "docket"


def repository_key(common_dir: Path) -> str:
    """A name for the repository, stable across runs: its docket identity (``repo-...``, made at `docket init`),
    else ``path-`` and a digest of its git common dir's real path."""

    from ..ledger.identity import read_identity

    identity = read_identity(common_dir)
    if identity:
        return identity
    return "path-" + hashlib.sha256(os.fsencode(os.path.realpath(common_dir))).hexdigest()[:32]


def workspaces_root(common_dir: Path, root: Path | None = None) -> Path:
    """Where the repository's task workspaces live: ``<root>/workspaces/<repository key>`` (root: [workspace] root,
    else the data folder)."""
    return (root or data_dir()) / "workspaces" / repository_key(common_dir)


def executions_root(common_dir: Path, root: Path | None = None) -> Path:
    """Where the repository's check executions live: ``<root>/executions/<repository key>``."""
    return (root or data_dir()) / "executions" / repository_key(common_dir)


def root_of_workspace(workspace: str | Path | None) -> Path | None:
    """The root a task's workspace was made under (``<root>/workspaces/<key>/<run>/<task>``): a check of its
    candidate runs under the same root. None for anything else (a worktree of a ledger from before workspaces)."""
    if not workspace:
        return None
    path = Path(workspace)
    return path.parents[3] if len(path.parts) > 4 and path.parts[-4] == "workspaces" else None


def task_worktree_path(common_dir: Path, run_id: str, task_id: str, root: Path | None = None) -> Path:
    """Where a task's workspace lives: ``<root>/workspaces/<repository key>/<run>/<task>`` (ids checked as branch
    parts); root is [workspace] root, else the data folder."""
    task_branch(run_id, task_id)  # the same ids name the branch: refuse here what git would refuse there
    return workspaces_root(common_dir, root) / run_id / task_id


def integration_output_path(common_dir: Path, run_id: str, boundary: str) -> Path:
    """Where the checks of an integration step's merged tree copy their artifacts back: no user's checkout, one
    folder per step, so two runs' (or two steps') reports never meet."""
    return common_dir / "docket" / "integrations" / run_id / boundary


def main_worktree(repository: Path) -> Path | None:
    """The main checkout of the repository whose git common dir this is; None for a bare repository."""
    if repository.name == ".git" and (repository / "HEAD").is_file():
        return repository.parent
    return None


def checked_out_branch(repository: Path) -> str | None:
    """The branch the main checkout has checked out (its HEAD names it); None when detached or bare."""
    if main_worktree(repository) is None:
        return None
    try:
        head = (repository / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None
