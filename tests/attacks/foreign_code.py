"""What a hostile agent plants in a repository so that git would run its code: a filter driver (clean, smudge and
long-running process), an fsmonitor, every hook (through core.hooksPath and in .git/hooks), an external diff, a
textconv, a merge driver, a pager, an ssh command and a credential helper, named by a committed .gitattributes and by
.git/info/attributes. Each program leaves a marker file (named after itself) in a folder of its own and then does what
git expects of it, so that nothing else fails and only the markers tell that it ran."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import git

__all__ = ["HOOKS", "markers", "plant"]

HOOKS = ("applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
         "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push",
         "pre-receive", "update", "proc-receive", "post-receive", "post-update", "reference-transaction",
         "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate", "fsmonitor-watchman",
         "p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change")
ATTRIBUTES = "* filter=evil diff=evil merge=evil\n"


def _program(folder: Path, name: str, body: str, markers: Path) -> str:
    path = folder / name
    path.write_text(f"#!/bin/sh\ntouch '{markers / name}'\n{body}\n")
    path.chmod(0o755)
    return str(path)


def plant(repository: Path, markers: Path, *, commit: bool = True) -> None:
    """Plant the programs in repository's own .git (config, hooks, info/attributes) and, with commit, a committed
    .gitattributes; markers: the folder each program marks when it runs (made here)."""
    markers.mkdir(parents=True, exist_ok=True)
    programs = repository.parent / f"{repository.name}-planted"
    hooks = programs / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    for hook in HOOKS:
        _program(hooks, hook, "exit 0", markers)
    common = Path(git(repository, "rev-parse", "--git-common-dir"))
    common = common if common.is_absolute() else repository / common
    (common / "hooks").mkdir(exist_ok=True)
    for hook in HOOKS:
        _program(common / "hooks", hook, "exit 0", markers)
    run = {name: _program(programs, name, body, markers) for name, body in {
        "clean": "cat", "smudge": "cat", "process": "exit 1", "fsmonitor": "exit 1", "external-diff": "exit 0",
        "textconv": 'cat "$1"', "diff-command": "exit 0", "merge-driver": "exit 1", "pager": "cat",
        "ssh": "exit 1", "credential": "exit 1", "askpass": "exit 1", "editor": "exit 0"}.items()}
    settings = [("filter.evil.clean", run["clean"]), ("filter.evil.smudge", run["smudge"]),
                ("filter.evil.required", "true"), ("core.fsmonitor", run["fsmonitor"]),
                ("core.hooksPath", str(hooks)), ("diff.external", run["external-diff"]),
                ("diff.evil.textconv", run["textconv"]), ("diff.evil.command", run["diff-command"]),
                ("merge.evil.driver", run["merge-driver"]), ("core.pager", run["pager"]),
                ("core.sshCommand", run["ssh"]), ("credential.helper", run["credential"]),
                ("core.askPass", run["askpass"]), ("core.editor", run["editor"])]
    for name, value in settings:
        git(repository, "config", name, value)
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "attributes").write_text(ATTRIBUTES)
    if commit:
        (repository / ".gitattributes").write_text(ATTRIBUTES)
        env_hooks = ("-c", f"core.hooksPath={os.devnull}", "-c", "filter.evil.clean=cat", "-c",
                     "filter.evil.smudge=cat", "-c", "core.fsmonitor=false")
        git(repository, *env_hooks, "add", ".gitattributes")
        git(repository, *env_hooks, "commit", "-q", "-m", "attributes")
    # the long-running process filter last: git prefers it to clean and smudge, and planting it earlier would have
    # had the commit above wait on a protocol it does not speak
    git(repository, "config", "filter.evil.process", run["process"])


def markers(folder: Path) -> list[str]:
    """The programs that ran (their markers), sorted."""
    return sorted(os.listdir(folder)) if folder.exists() else []
