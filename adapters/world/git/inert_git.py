"""The git command line run so that nothing the repository, an agent or the environment chose runs with it.

docket runs git itself in one place (checkout.py: a checked-out target observed and moved). A repository's config
can name programs git runs on its own: filter drivers (clean, smudge, process) selected by ``.gitattributes``, an
fsmonitor, hooks (``core.hooksPath``), an external diff or textconv, a pager, an ssh command, a credential helper,
an askpass; and an agent that can write the repository's ``.git/config`` (or ``.git/info/attributes``) chooses
them. Switching each off by name (``-c filter.<name>.smudge=``) cannot be complete: names come from attributes in
any folder and from included config files, and can be added between the listing and the command.

So git runs here with a git dir of docket's own: a throwaway folder holding a config docket wrote (a few data
settings copied from the repository's: file modes, symlinks, case, the object format, sparse checkout, the
excludes file), an
unborn HEAD and an empty hooks folder, with ``GIT_WORK_TREE`` the checkout, ``GIT_INDEX_FILE`` its index and
``GIT_OBJECT_DIRECTORY`` the repository's objects. The repository's config is never read, so no filter, fsmonitor,
hook, diff driver or credential helper it names exists for git; the system and global configs and the system
attributes are not read either (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL``, ``GIT_ATTR_NOSYSTEM``,
``core.attributesFile``), and the switches on the command line (also handed to any git a git command starts) close
the rest. ``.gitattributes``' own ``text``/``eol`` rules still apply, as git applies them for the user. The
environment is an allow-list (the path, the home folder, the locale, the time zone), scrubbed of secret-looking
values: never docket's own. A sparse checkout's settings and patterns are copied too, so a move writes only
inside its cone. What this gives up: a split index (``core.splitIndex``) is read, and written back whole (git
splits it again on its next write).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ....domain.containment.processes import scrub_environment

__all__ = ["InertGit", "inert_environment", "inert_git", "inert_switches"]

# the only variables of docket's environment a git command gets (and then only when they do not look secret)
KEPT_VARIABLES = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "USER", "LOGNAME")
# data settings of the repository's config that make git see its files as the user's git does; none runs anything
COPIED_SETTINGS = (("core", "filemode"), ("core", "symlinks"), ("core", "ignorecase"), ("core", "precomposeunicode"),
                   ("core", "trustctime"), ("core", "checkstat"), ("core", "repositoryformatversion"),
                   ("extensions", "objectformat"), ("core", "sparsecheckout"), ("core", "sparsecheckoutcone"))


def inert_switches(hooks: str) -> list[str]:
    """The ``-c`` switches every docket git command carries (hooks: an empty folder of docket's own)."""
    return ["-c", f"core.hooksPath={hooks}", "-c", "core.fsmonitor=false", "-c", f"core.attributesFile={os.devnull}",
            "-c", "core.pager=cat", "-c", "core.askPass=", "-c", "core.sshCommand=false", "-c", "credential.helper=",
            "-c", "protocol.allow=never", "-c", "submodule.recurse=false", "-c", "core.quotepath=false"]


def inert_environment(environ: Mapping[str, str], *, git_dir: str, work_tree: str, index: str,
                      objects: str) -> dict[str, str]:
    """The whole environment of a docket git command: the kept variables of environ (scrubbed), and git pointed at
    docket's own git dir with the checkout's files, index and objects, reading no system or global config."""
    kept = {k: v for k, v in environ.items() if k in KEPT_VARIABLES or k.startswith("LC_")}
    env, _ = scrub_environment(kept)
    env.update(GIT_DIR=git_dir, GIT_WORK_TREE=work_tree, GIT_INDEX_FILE=index, GIT_OBJECT_DIRECTORY=objects,
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_ATTR_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
               GIT_PAGER="cat", PAGER="cat", GIT_NO_LAZY_FETCH="1", GIT_NO_REPLACE_OBJECTS="1")
    return env


@dataclass(frozen=True)
class InertGit:
    """How to run git in one checkout: ``run(*args)``; argv(args) and env for callers that run it themselves."""

    env: dict[str, str]
    switches: tuple[str, ...]
    cwd: Path

    def argv(self, *args: str) -> list[str]:
        return ["git", *self.switches, *args]

    def run(self, *args: str, timeout: float | None = None,
            extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        """git args in the checkout, its output captured (OSError, TimeoutExpired as subprocess.run raises them)."""
        return subprocess.run(self.argv(*args), cwd=self.cwd, env={**self.env, **(extra_env or {})},
                              stdin=subprocess.DEVNULL, capture_output=True, check=False, timeout=timeout)


@contextmanager
def inert_git(worktree: Path) -> Iterator[InertGit]:
    """An InertGit for the checkout at worktree (a main checkout or a linked worktree), its git dir of docket's own
    removed on leaving. OSError when worktree's git dir cannot be found or the folder not made."""
    git_dir, common = _git_dirs(worktree)
    private = Path(tempfile.mkdtemp(prefix="docket-git-"))
    try:
        for folder in ("refs", "hooks", "info"):
            (private / folder).mkdir()
        (private / "HEAD").write_text("ref: refs/heads/docket-inert\n")
        (private / "config").write_text(_config(common, git_dir))
        # the repository's exclude rules, and the checkout's sparse-checkout patterns (its own git dir's)
        for source, name in ((common, "exclude"), (git_dir, "sparse-checkout")):
            try:
                shutil.copyfile(source / "info" / name, private / "info" / name, follow_symlinks=False)
            except OSError:
                pass  # none, or not a file
        env = inert_environment(os.environ, git_dir=str(private), work_tree=str(worktree),
                                index=str(git_dir / "index"), objects=str(common / "objects"))
        yield InertGit(env, tuple(inert_switches(str(private / "hooks"))), worktree)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _git_dirs(worktree: Path) -> tuple[Path, Path]:
    """(the checkout's own git dir, the repository's common dir)."""
    dotgit = worktree / ".git"
    if dotgit.is_dir():
        git_dir = dotgit
    else:
        try:
            text = dotgit.read_text(encoding="utf-8", errors="surrogateescape").strip()
        except FileNotFoundError:
            raise OSError(f"not a git repository: {worktree} has no .git") from None
        if not text.startswith("gitdir:"):
            raise OSError(f"not a git repository: {dotgit} names no git dir")
        git_dir = worktree / text[len("gitdir:"):].strip()
    try:
        common = git_dir / (git_dir / "commondir").read_text(encoding="utf-8", errors="surrogateescape").strip()
    except FileNotFoundError:
        common = git_dir
    return Path(os.path.normpath(git_dir)), Path(os.path.normpath(common))


def _config(common: Path, git_dir: Path) -> str:
    """docket's config for the git dir: the copied settings of the repository's config and of the checkout's own
    (``config.worktree``; read as data: includes are not followed), the user's excludes file, and no more."""
    from dulwich.config import ConfigFile, StackedConfig

    found = []
    for path in (git_dir / "config.worktree", common / "config"):  # the checkout's own first, as git reads them
        try:
            found.append(ConfigFile.from_path(str(path)))
        except (OSError, ValueError):
            pass
    sections: dict[str, list[str]] = {"core": ["\tbare = false"]}
    for section, name in COPIED_SETTINGS:
        try:
            value = StackedConfig(found).get((section.encode(),), name.encode()).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue
        if value.replace("-", "").replace("_", "").isalnum():  # a plain word or number, nothing to escape
            sections.setdefault(section, []).append(f"\t{name} = {value}")
    from dulwich.ignore import default_user_ignore_filter_path

    excludes = default_user_ignore_filter_path(StackedConfig(StackedConfig.default_backends()))
    if excludes and "\n" not in excludes and '"' not in excludes and "\\" not in excludes:
        sections["core"].append(f'\texcludesFile = "{os.path.expanduser(excludes)}"')
    return "".join(f"[{section}]\n" + "".join(f"{line}\n" for line in lines) for section, lines in sections.items())
