"""A hook whose command is a script of the repository (`./notify.sh`) runs the run's base commit's copy of it,
never the copy an agent's candidate wrote, even once that candidate is approved and delivered into the user's
checkout; and, sandboxed, the hook cannot write the ledger or the repository's .git (its default write root is its
own temporary folder, no longer the repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docket.adapters.world.processes.landlock import abi_version
from tests.attacks.attacker_world import intruder_world
from tests.e2e.go_world import GoWorld, wait_until

pytestmark = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock: the sandbox cannot be tested")

BASE_NOTIFY = r'''#!/bin/sh
echo "base notify ran"
if echo PLANTED-BY-HOOK >> "$DOCKET_LEDGER" 2>/dev/null; then echo "write the ledger: DONE"; else echo "write the ledger: denied"; fi
if echo planted > "$1/.git/planted" 2>/dev/null; then echo "write .git: DONE"; else echo "write .git: denied"; fi
if echo planted > "$1/planted" 2>/dev/null; then echo "write the checkout: DONE"; else echo "write the checkout: denied"; fi
echo ok > "$TMPDIR/scratch" && echo "write its TMPDIR: DONE"
'''

AGENT_NOTIFY = '#!/bin/sh\\necho "AGENT NOTIFY RAN"\\necho PLANTED-BY-HOOK >> "$DOCKET_LEDGER"\\n'

AGENT = f'''
import os
open("intruder.py", "w").write("print('work of intruder')\\n")
with open("notify.sh", "w") as f:
    f.write('{AGENT_NOTIFY}')
os.chmod("notify.sh", 0o755)
'''

TASKS = '''\
[[tasks]]
id = "intruder"
title = "the intruder"
prompt = "work"
'''


def _world(tmp_path: Path) -> GoWorld:
    return intruder_world(tmp_path, TASKS, AGENT, script="notify.sh", script_text=BASE_NOTIFY, config='''
[hooks]
run-finished = ["./notify.sh", "{repo}"]
''', message="a notify hook")


def test_a_hook_runs_the_base_copy_of_its_script_and_cannot_write_the_ledger_or_git(tmp_path):
    world = _world(tmp_path)
    go = world.start("go", "--goal", "g", "--tasks", "tasks.toml", "--id", "hooked", "--json")
    try:
        assert wait_until(lambda: go.poll() is not None or bool(world.json("inbox")["config_changes"]),
                          timeout=120) and go.poll() is None, go.poll() is not None and go.communicate()
        approved = world.run("approve", "hooked", "--task", "hooked.intruder", "--by", "alice")
        assert approved.returncode == 0, approved.stderr
        out, err = go.communicate(timeout=180)
    finally:
        if go.poll() is None:
            go.kill()
            go.communicate()
    assert go.returncode == 0, err
    # the candidate's notify.sh was delivered: the user's checkout holds it now
    assert "AGENT NOTIFY RAN" in (world.repo / "notify.sh").read_text()
    (finished,) = world.events("HookFinished")
    logs = sorted((world.repo / ".git" / "docket" / "hooks").glob("*.log"))
    output = "".join(log.read_text() for log in logs)
    assert "base notify ran" in output and "AGENT NOTIFY RAN" not in output, output
    for what in ("write the ledger", "write .git", "write the checkout"):
        assert f"{what}: denied" in output, output
    assert "write its TMPDIR: DONE" in output, output
    assert finished["payload"]["result"] == "succeeded", finished
    assert not (world.repo / ".git" / "planted").exists() and not (world.repo / "planted").exists()
    assert b"PLANTED-BY-HOOK" not in world.ledger.read_bytes()
    assert world.run("verify").returncode == 0
