"""Every way a prompt reaches an agent works for a task planned with a title only: the title is its prompt."""

from __future__ import annotations

from docket.adapters.world.files.paths import task_worktree_path
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, make_repo

AGENTS = {
    "file": '["sh", "-c", "cat \\"$1\\" > got.txt", "agent", "{prompt_file}"]',
    "stdin": '["sh", "-c", "cat > got.txt"]',
    "argument": '["sh", "-c", "printf %s \\"$1\\" > got.txt", "agent", "{prompt}"]',
}


@pytest.mark.parametrize("mode", sorted(AGENTS))
def test_a_title_only_task_gives_its_title_as_the_prompt(tmp_path: Path, mode: str):
    repo = make_repo(tmp_path / "repo")
    (repo / "docket.toml").write_text(f'[agents.a]\ncommand = {AGENTS[mode]}\nprompt = "{mode}"\n')
    git(repo, "add", "docket.toml")
    git(repo, "commit", "-q", "-m", "docket")

    def docket(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "docket", *args], cwd=repo, capture_output=True, text=True)

    assert docket("init").returncode == 0
    assert docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1").returncode == 0
    assert docket("task", "plan", "r1", "--title", "greet the world", "--id", "t1").returncode == 0
    launched = docket("worker", "launch", "r1", "--task", "t1", "--agent", "a")
    assert launched.returncode == 0, launched.stderr
    worktree = task_worktree_path(repo / ".git", "r1", "t1")
    assert (worktree / "got.txt").read_text().strip() == "greet the world"


def test_a_prompt_file_is_readable_by_its_owner_only_whatever_the_umask(tmp_path: Path):
    import os
    import stat

    repo = make_repo(tmp_path / "repo")
    (repo / "docket.toml").write_text(f'[agents.a]\ncommand = {AGENTS["file"]}\nprompt = "file"\n')
    git(repo, "add", "docket.toml")
    git(repo, "commit", "-q", "-m", "docket")

    def docket(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "docket", *args], cwd=repo, capture_output=True, text=True)

    old = os.umask(0)  # the children inherit it: only the mode docket asks for narrows the file
    try:
        assert docket("init").returncode == 0
        assert docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1").returncode == 0
        planned = docket("task", "plan", "r1", "--title", "t", "--prompt", "the plan, not for others", "--id", "t1")
        assert planned.returncode == 0, planned.stderr
        launched = docket("worker", "launch", "r1", "--task", "t1", "--agent", "a")
        assert launched.returncode == 0, launched.stderr
    finally:
        os.umask(old)
    prompts = repo / ".git" / "docket" / "prompts"
    files = sorted(prompts.iterdir())
    assert files and any(f.read_text() == "the plan, not for others" for f in files)
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in files} == {f.name: 0o600 for f in files}
    assert stat.S_IMODE(prompts.stat().st_mode) & 0o077 == 0
