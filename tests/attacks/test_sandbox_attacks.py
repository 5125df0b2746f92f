"""The sandbox, through `docket go`: a hostile agent, a hostile check and a hostile hook try to read secrets (an SSH
key, the signing key, the ledger), write the ledger and outside their roots, read docket's environment, signal it,
connect to a port they were not given, and leave daemons behind. None of it has an effect; honest work lands."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import make_go_world
from tests.processes import alive

HOSTILE = Path(__file__).with_name("hostile.py")
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- sandbox-test-secret"


def _landlock() -> int:
    from docket.adapters.world.processes.landlock import abi_version

    return abi_version()


pytestmark = pytest.mark.skipif(_landlock() < 6, reason="this kernel has no Landlock ABI 6 (file, network and "
                                                        "signal rules): the sandbox cannot be shown to deny here")


def _attacks(text: str) -> dict[str, str]:
    return dict(re.findall(r"^ATTACK (\S+) (allowed|denied)", text, re.M))


def test_a_hostile_agent_check_and_hook_touch_nothing_and_honest_work_lands(tmp_path: Path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    (home / ".docket").mkdir()
    (home / ".docket" / "key").write_text(SECRET)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    py = sys.executable
    tasks = '[[tasks]]\nid = "only"\ntitle = "t"\nprompt = "write a.py"\n'
    agent = (f'[agents.hostile]\ncommand = ["{py}", "{HOSTILE}", "agent", "{port}", "{{prompt_file}}"]\n'
             f'prompt = "file"\nenv_allow = ["SANDBOX_TEST_*"]\nnetwork = [9]\n')
    extra = (f'[checks.spy]\ncommand = ["{py}", "{HOSTILE}", "check", "{port}"]\n'
             f'env_allow = ["SANDBOX_TEST_*"]\n\n'
             f'[hooks]\nrun-finished = {{ command = ["{py}", "{HOSTILE}", "hook", "{port}"], '
             f'env_allow = ["SANDBOX_TEST_*"], network = "none" }}\n')
    world = make_go_world(tmp_path, tasks=tasks, extra_config=extra)
    config = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "hostile"')
    (world.repo / "docket.toml").write_text(config.replace("[checks.compiles]", agent + "\n[checks.compiles]"))
    git(world.repo, "commit", "-q", "-am", "the hostile agent")
    outside = tmp_path / "PWNED"  # outside every root
    world.env.update(HOME=str(home), SANDBOX_TEST_HOME=str(home), SANDBOX_TEST_OUTSIDE=str(outside))
    ledger_before = world.ledger.stat().st_ino

    done = world.go("r1")
    listener.close()

    assert done.returncode == 0, done.stderr + done.stdout
    assert world.file_at("main", "a.py") == "X = 1\n"  # honest work landed
    docket = world.repo / ".git" / "docket"
    logs = {"agent": next((docket / "logs").rglob("1.log")).read_text(),
            "check": next(p for p in (docket / "checks").rglob("spy-*.log")).read_text(),
            "hook": next((docket / "hooks").glob("*.log")).read_text()}
    denied = {"read-ssh-key", "read-signing-key", "write-ledger", "write-outside", "read-parent-environ",
              "signal-parent", "connect-port"}
    for kind, text in logs.items():
        seen = _attacks(text)
        expected = {name: "denied" for name in denied} | {"honest-python": "allowed"}
        # the ledger: no agent, check or hook may open it (a hook runs in a folder of its own, not the repository)
        expected["read-ledger"] = "denied"
        expected["write-ledger"] = "denied"
        if kind == "agent":
            expected["honest-git-add"] = expected["honest-git-commit"] = "allowed"
            if shutil.which("node"):
                expected["honest-node"] = "allowed"
        assert seen == expected, (kind, text)
        assert SECRET not in text
    assert not outside.exists()
    assert world.ledger.stat().st_ino == ledger_before
    assert world.run("verify").returncode == 0
    # every daemon they left, setsid, double-forked, its environment cleared, is gone
    pid_files = list(docket.rglob("*.pid"))
    assert len(pid_files) >= 6, pid_files  # two of each kind; the check ran again on the merged tree
    deadline = time.monotonic() + 5
    while any(alive(int(p.read_text())) for p in pid_files) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pid_files if alive(int(p.read_text()))]
    (hooked,) = [e["payload"]["sandbox"] for e in world.events("HookFinished")]
    assert hooked["enforced"] is True and hooked["network"] == "none"
    assert not [root for root in hooked["write_roots"] if Path(root) == world.repo or world.repo.is_relative_to(root)]
    checked = world.events("CheckLaunchRequested")[0]["payload"]["sandbox"]
    assert checked["enforced"] is True and checked["network"] == "none"
    launched = world.events("WorkerLaunchRequested")[0]["payload"]["sandbox"]
    assert launched["enforced"] is True and launched["network"] == [9]
    assert str(world.repo / ".git" / "docket") not in launched["read_roots"]
    assert not any(root == str(home) or root.startswith(str(home) + "/") for root in launched["read_roots"])
