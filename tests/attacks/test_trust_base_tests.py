"""An agent weakens the tests that judge it: it breaks app.py and rewrites the base's test to pass, or adds a
conftest.py that skips every test. Its own execution of the check passes, but docket also runs the check on its code
with the base's copy of the protected paths (tests/**, conftest.py, ...): that execution fails, the agent is told the
base's tests fail on its code, and the task does not land. In the same run an honest task that adds a test file and
fixes nothing of the base's lands with one extra execution (the base-tests tree), a task that touches no protected
path gets none, main's own suite stays green, and the summary, status and receipt name who changed protected paths.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import GoWorld, make_go_world

AGENT = r'''
import os
task = os.environ["DOCKET_TASK"].rsplit(".", 1)[-1]
broken = "def add(a, b):\n    return a - b\n"
if task == "rewrite":  # breaks the code, and rewrites the base's test so that it passes
    open("app.py", "w").write(broken)
    open("tests/test_app.py", "w").write("def test_add():\n    assert True\n")
elif task == "deselect":  # breaks the code, and a conftest.py skips every test
    open("app.py", "w").write(broken)
    open("conftest.py", "w").write(
        "import pytest\n\ndef pytest_collection_modifyitems(config, items):\n"
        "    for item in items:\n        item.add_marker(pytest.mark.skip(reason='no'))\n")
elif task == "honest":  # new code with a new test of its own
    open("extra.py", "w").write("def twice(x):\n    return 2 * x\n")
    open("tests/test_extra.py", "w").write("from extra import twice\n\ndef test_twice():\n    assert twice(2) == 4\n")
else:  # touches no protected path
    open("notes.py", "w").write("NOTES = 'plain'\n")
'''

TASKS = "".join(f'[[tasks]]\nid = "{t}"\ntitle = "{t}"\nprompt = "work"\n\n'
                for t in ("rewrite", "deselect", "honest", "plain"))


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[GoWorld, subprocess.CompletedProcess[str]]:
    tmp_path = tmp_path_factory.mktemp("basetests")
    agent = tmp_path / "cheater.py"
    agent.write_text(AGENT)
    world = make_go_world(tmp_path, tasks=TASKS)
    (world.repo / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (world.repo / "tests").mkdir()
    (world.repo / "tests" / "test_app.py").write_text("from app import add\n\ndef test_add():\n"
                                                      "    assert add(2, 3) == 5\n")
    config = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "cheater"', 1)
    (world.repo / "docket.toml").write_text(config + f'''
[agents.cheater]
command = ["{sys.executable}", "{agent}"]
prompt = "stdin"

[checks.tests]
command = ["{sys.executable}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "pythonpath=."]
timeout = "2m"
''')
    git(world.repo, "add", "app.py", "tests/test_app.py", "docket.toml")
    git(world.repo, "commit", "-q", "-m", "app and its test")
    done = world.go("weak", "--parallel", "2", "--cycles", "1")
    return world, done


def _tasks(world: GoWorld) -> dict[str, dict]:
    return {t["task_id"].rsplit(".", 1)[-1]: t for t in world.json("status", "weak")["tasks"]}


def test_weakened_tests_do_not_land_and_main_stays_green(world):
    w, done = world
    assert done.returncode == 6, done.stdout + done.stderr  # some task failed
    tree = git(w.repo, "ls-tree", "-r", "--name-only", "main").split()
    assert "extra.py" in tree and "tests/test_extra.py" in tree and "notes.py" in tree
    assert "conftest.py" not in tree
    assert w.file_at("main", "app.py") == "def add(a, b):\n    return a + b\n"
    assert "assert add(2, 3) == 5" in w.file_at("main", "tests/test_app.py")
    feedback = {e["payload"]["task_id"].rsplit(".", 1)[-1]: e["payload"] for e in w.events("TaskFeedbackRecorded")}
    for cheat in ("rewrite", "deselect"):
        assert feedback[cheat]["code"] == "base-tests-failed", feedback[cheat]
        assert "the base's tests fail on your code" in feedback[cheat]["feedback"]
        assert "test_add" in feedback[cheat]["feedback"] or "assert" in feedback[cheat]["feedback"]
    assert "honest" not in feedback and "plain" not in feedback
    # main's own suite, run on what landed, is green
    checkout = w.repo.parent / "main-checkout"
    git(w.repo, "worktree", "add", "-q", "--detach", str(checkout), "main")
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "pythonpath=."],
                         cwd=checkout, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_one_extra_execution_only_for_a_candidate_touching_protected_paths(world):
    w, _ = world
    pinned = w.events("CandidatePinRequested")
    base_tests = [e["payload"] for e in pinned if e["payload"]["boundary"] == "base-tests"]
    by_task = {}
    for p in base_tests:
        by_task.setdefault(p["task_id"].rsplit(".", 1)[-1], []).append(p)
    assert sorted(by_task) == ["deselect", "honest", "rewrite"]  # plain touched no protected path
    assert all(len(v) == 1 for v in by_task.values())
    bindings = {p["binding_id"] for p in base_tests}
    runs = [e["payload"] for e in w.events("CheckRequested") if e["payload"]["binding_id"] in bindings]
    # one execution per base-tests tree and required check (compiles, tests), never twice
    assert sorted((r["binding_id"], r["check"]) for r in runs) == sorted(
        {(b, c) for b in bindings for c in ("compiles", "tests")})
    passed = {e["payload"]["binding_id"] for e in w.events("CheckPassed") if e["payload"]["check"] == "tests"}
    honest = by_task["honest"][0]
    assert honest["binding_id"] in passed
    assert not {by_task["rewrite"][0]["binding_id"], by_task["deselect"][0]["binding_id"]} & passed


def test_changed_protected_paths_are_named(world):
    w, done = world
    tasks = _tasks(w)
    assert tasks["honest"]["protected_changes"] == ["tests/test_extra.py"]
    assert tasks["rewrite"]["protected_changes"] == ["tests/test_app.py"]
    assert tasks["deselect"]["protected_changes"] == ["conftest.py"]
    assert tasks["plain"]["protected_changes"] == []
    assert "tests/test_extra.py" in done.stdout  # the summary names it
    shown = w.run("status", "weak").stdout
    assert "changes protected paths: conftest.py" in shown and "with the base's tests: failed" in shown, shown
    sealed = w.json("seal", "weak")
    receipt = sealed.get("receipt", sealed)
    delivered = {t["task_id"].rsplit(".", 1)[-1]: t for t in receipt["tasks"]}
    assert delivered["honest"]["protected"]["paths"] == ["tests/test_extra.py"]
    checks = delivered["honest"]["protected"]["base_tests"]
    assert sorted(c["check"] for c in checks) == ["compiles", "tests"] and {c["result"] for c in checks} == {"passed"}
    assert delivered["plain"]["protected"] == {"paths": [], "base_tests": []}
    keys = w.repo.parent / "keys"
    assert w.run("key", "generate", "--out", str(keys)).returncode == 0
    bundle = w.repo.parent / "weak.intoto.jsonl"
    exported = w.run("export", "weak", "--key", f"{keys}.key", "--out", str(bundle))
    assert exported.returncode == 0, exported.stderr
    checked = w.run("verify-receipt", str(bundle), "--key", f"{keys}.pub")
    assert checked.returncode == 0, checked.stderr
    # a receipt that hides a protected change, or claims a base-tests run it did not have, contradicts its events
    from docket.domain.kernel.errors import VerificationFailed
    from docket.domain.reports.receipts import receipt_sha256, verify_statement

    statement = json.loads(base64.b64decode(json.loads(bundle.read_text().splitlines()[0])["payload"]))
    verify_statement(copy.deepcopy(statement))
    for change in (lambda t: t["protected"].update(paths=[]),
                   lambda t: t["protected"].update(paths=["tests/test_extra.py", "tests/test_app.py"]),
                   lambda t: t["protected"]["base_tests"][0].update(result="failed")):
        tampered = copy.deepcopy(statement)
        r = tampered["predicate"]["receipt"]
        change(next(t for t in r["tasks"] if t["task_id"].endswith(".honest")))
        tampered["predicate"]["receipt_sha256"] = receipt_sha256(r)
        with pytest.raises(VerificationFailed) as caught:
            verify_statement(tampered)
        assert caught.value.code == "receipt-contradicts-event"
