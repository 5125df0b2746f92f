"""Attack: an agent leaves a real folder ``.GIT/hooks/...`` (``.git`` in another case) in its workspace.

The capture skipped only ``.git`` itself, so ``.GIT`` went into the candidate; every checkout of it for a check then
refused the tree (``execution-unsafe-tree``) before an outcome was recorded, which stopped the whole run, and every
resume again. A name git refuses to check out ('.git' in any case, '.', '..') now refuses that workspace's pin
(``unsafe-tree-path``): that task fails with the reason recorded, the run finishes, and the honest task lands.
"""

from __future__ import annotations

from pathlib import Path

from tests.attacks.attacker_world import attacker_world, feedback, honest_and, results, task

TASKS = honest_and(task("hooks", "plant .GIT/hooks", "Plant a hook where git's would be.",
                        "write planted.py: PLANTED = 1", "CASE-GIT"))


def test_a_case_variant_of_dot_git_fails_only_its_task_and_the_run_finishes(tmp_path: Path):
    world = attacker_world(tmp_path, TASKS)

    done = world.go("r1", "--parallel", "2", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    assert results(done) == {"greet": "delivered", "hooks": "failed"}
    assert world.file_at("main", "greet.py") == 'print("hello")\n'
    (said,) = feedback(world, "hooks")
    assert said.startswith("unsafe-tree-path: '.GIT' names a folder or file git refuses to check out")
    assert not world.events("CandidatePinRequested") or all(
        e["payload"]["task_id"] == "r1.greet" for e in world.events("CandidatePinRequested"))

    for command in (("go", "--resume", "r1", "--json"), ("reconcile", "--apply"), ("verify",)):
        again = world.run(*command)
        assert again.returncode in (0, 6), (command, again.stderr)  # never execution-unsafe-tree (3)


def test_a_candidate_pinned_with_dot_git_before_is_that_checks_failed_execution_not_a_stopped_run(repo: Path):
    """A ledger from before the capture refused it may hold a pinned candidate whose tree names '.GIT/hooks': its
    execution is observed unsafe, and deciding on that records ExecutionFailed (``execution-unsafe-tree``) for that
    check, where making it raised on every pass with no outcome recorded."""
    from types import SimpleNamespace

    from dulwich.objects import Blob, Commit, Tree

    from docket.adapters.world.workspaces.executions import execution_path, observe_execution
    from docket.adapters.world.git.repository import open_repo
    from docket.domain.execution import decide_execution
    from tests.conftest import git

    with open_repo(repo) as r:
        blob = Blob.from_string(b"#!/bin/sh\necho pwned\n")
        hooks, dot_git, top = Tree(), Tree(), Tree()
        hooks.add(b"post-checkout", 0o100755, blob.id)
        dot_git.add(b"hooks", 0o040000, hooks.id)
        top.add(b".GIT", 0o040000, dot_git.id)
        top.add(b"planted.py", 0o100644, blob.id)
        commit = Commit()
        commit.tree, commit.parents = top.id, [git(repo, "rev-parse", "HEAD").encode()]
        commit.author = commit.committer = b"a <a@example.com>"
        commit.author_time = commit.commit_time = 946684800
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = b"planted\n"
        for obj in (blob, hooks, dot_git, top, commit):
            r.object_store.add_object(obj)
    sha = commit.id.decode()
    path = execution_path(repo / ".git", "r1", "0123456789abcdef" * 4, "tests", 1)

    observed = observe_execution(repo / ".git", path, sha)
    assert observed.state == "unsafe" and "unsafe-tree-path" in observed.detail and ".GIT" in observed.detail
    candidate = SimpleNamespace(binding_id="0123456789abcdef" * 4, version=3, run_id="r1")
    intent = SimpleNamespace(intent_id="exec-1", check_id="check-1", commit=sha, path=str(path))
    failed = decide_execution(candidate, intent, observed, "2026-01-01T00:00:00.000Z")
    assert type(failed).__name__ == "ExecutionFailed" and failed.code == "execution-unsafe-tree"
    assert observe_execution(repo / ".git", path, git(repo, "rev-parse", "HEAD")).state == "absent"
