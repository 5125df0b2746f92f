"""check_branch_name against git itself: for generated names both accept or both refuse."""

from __future__ import annotations

import os
import subprocess

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docket.domain.kernel.errors import BadInput
from docket.domain.kernel.names import check_branch_name, has_unsafe_characters


def _git_accepts_branch(name: str, cwd: str) -> bool:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": cwd}  # outside any repository: no @{-1} or @ expansion
    return subprocess.run(["git", "check-ref-format", "--branch", name], cwd=cwd, env=env,
                          capture_output=True).returncode == 0


BRANCH_ALPHABET = st.sampled_from("ab/.-@{}~^:?*[\\ lock\x01\x7f\u00e9\u202e\x85") | st.characters(
    blacklist_categories=("Cs",), blacklist_characters="\x00")


@given(st.text(BRANCH_ALPHABET, max_size=12) | st.sampled_from(["HEAD", "@", "a.lock", "x/y.lock", "a/.b", "-"]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_branch_rules_agree_with_git(tmp_path, name):
    try:
        ours = check_branch_name(name) == name
    except BadInput:
        ours = False
    # Deliberately stricter than git: unsafe characters, and '@', which git reads as HEAD inside a repository.
    assert ours == (_git_accepts_branch(name, str(tmp_path)) and not has_unsafe_characters(name) and name != "@")
