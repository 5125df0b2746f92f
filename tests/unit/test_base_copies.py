"""The base's copies of the files a setup command or a hook names (adapters/world/workspaces/base_copies.py): written from the
base commit, read-only; a setup command's words naming them pointed there; a file named inside a shell string must
be the base's in the workspace, or the command is refused (script-not-from-base)."""

from __future__ import annotations

import os
import stat

import pytest

from docket.adapters.world.workspaces.base_copies import materialise, setup_command
from docket.domain.kernel.errors import Refused
from tests.conftest import git, make_repo


@pytest.fixture
def base(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "scripts").mkdir()
    (repo / "scripts" / "setup.sh").write_text("echo base\n")
    (repo / "scripts" / "setup.sh").chmod(0o755)
    git(repo, "add", "scripts/setup.sh")
    git(repo, "commit", "-q", "-m", "setup")
    return repo, git(repo, "rev-parse", "HEAD").strip()


def test_the_base_copy_is_written_read_only_and_the_argv_points_at_it(base, tmp_path):
    repo, commit = base
    workspace = tmp_path / "workspace"
    (workspace / "scripts").mkdir(parents=True)
    (workspace / "scripts" / "setup.sh").write_text("echo candidate\n")  # a candidate's rewrite
    argv, folder = setup_command(["sh", "scripts/setup.sh", "--flag"], repository=repo, base=commit,
                                 workspace=workspace, folder=tmp_path / "copies")
    copy = tmp_path / "copies" / "scripts" / "setup.sh"
    assert argv == ["sh", str(copy), "--flag"] and folder == tmp_path / "copies"
    assert copy.read_text() == "echo base\n" and stat.S_IMODE(os.stat(copy).st_mode) == 0o555


def test_a_file_named_in_a_shell_string_must_be_the_bases_in_the_workspace(base, tmp_path):
    repo, commit = base
    workspace = tmp_path / "workspace"
    (workspace / "scripts").mkdir(parents=True)
    (workspace / "scripts" / "setup.sh").write_text("echo base\n")
    argv = ["sh", "-c", "./scripts/setup.sh && echo done"]
    assert setup_command(argv, repository=repo, base=commit, workspace=workspace,
                         folder=tmp_path / "a") == (argv, None)
    (workspace / "scripts" / "setup.sh").write_text("echo candidate\n")
    with pytest.raises(Refused) as refused:
        setup_command(argv, repository=repo, base=commit, workspace=workspace, folder=tmp_path / "b")
    assert refused.value.code == "script-not-from-base" and "scripts/setup.sh" in refused.value.message


def test_a_link_or_a_file_the_base_lacks_is_not_copied(base, tmp_path):
    repo, commit = base
    assert materialise(repo, commit, ["scripts/setup.sh", "missing.sh"], tmp_path / "c") == {
        "scripts/setup.sh": tmp_path / "c" / "scripts" / "setup.sh"}
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "extra.sh").write_text("echo planted\n")  # only the candidate has it
    with pytest.raises(Refused):
        setup_command(["sh", "-c", "./extra.sh"], repository=repo, base=commit, workspace=workspace,
                      folder=tmp_path / "d")
