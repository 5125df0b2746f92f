"""A daemon an agent detached outlives neither its generation nor a crash of the docket that supervised it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.conftest import git
from tests.e2e.go_world import make_go_world
from tests.processes import alive

LEAVER = Path(__file__).with_name("leaver.py")
TASKS = '[[tasks]]\nid = "only"\ntitle = "t"\nprompt = "write a.py"\n'


def _world(tmp_path: Path, pause: str):
    world = make_go_world(tmp_path, tasks=TASKS)
    agent = f'[agents.leaver]\ncommand = ["{sys.executable}", "{LEAVER}", "{pause}", "{{prompt}}"]\n'
    config = (world.repo / "docket.toml").read_text().replace('agent = "scripted"', 'agent = "leaver"')
    (world.repo / "docket.toml").write_text(config.replace("[checks.compiles]", agent + "\n[checks.compiles]"))
    git(world.repo, "commit", "-q", "-am", "the leaver")
    return world


def _daemons(world) -> list[int]:
    return [int(p.read_text()) for p in (world.repo / ".git" / "docket" / "workers").rglob("leaver.pid")]


def test_a_detached_daemon_is_gone_before_its_generation_is_judged(tmp_path: Path):
    world = _world(tmp_path, "0")
    done = world.go("r1")
    assert done.returncode == 0, done.stderr
    assert world.file_at("main", "a.py") == "X = 1\n"
    (daemon,) = _daemons(world)
    assert not alive(daemon)


def test_a_daemon_left_when_docket_was_killed_is_found_and_stopped_when_the_run_resumes(tmp_path: Path):
    world = _world(tmp_path, "1")
    crashed = world.go("r1", fault="launch:after-gate")  # docket is killed; the agent runs on, then its daemon
    assert crashed.returncode != 0
    deadline = time.monotonic() + 20
    while not _daemons(world) and time.monotonic() < deadline:
        time.sleep(0.05)
    (daemon,) = _daemons(world)
    time.sleep(1.5)  # the agent has exited: its daemon, environment cleared, was adopted by init
    assert alive(daemon)

    resumed = world.resume("r1")

    assert resumed.returncode == 0, resumed.stderr
    assert not alive(daemon)
    assert world.file_at("main", "a.py") == "X = 1\n"


def test_a_daemon_a_check_detached_never_writes_its_execution_or_the_pool(tmp_path: Path):
    """A check leaves a setsid daemon that would write a tracked file of its execution half a second later: docket
    stops it before it inspects (so the give back may trust the inspection's scan), and nothing in the pool of
    executions is ever written by it."""
    from docket.adapters.world.files.paths import executions_root

    world = make_go_world(tmp_path)
    daemon = "setsid sh -c 'sleep 0.5; echo tampered >> README.md' </dev/null >/dev/null 2>&1 & true"
    config = (world.repo / "docket.toml").read_text()
    start = config.index("[checks.compiles]")
    end = config.index('timeout = "1m"', start)
    config = config[:start] + f'[checks.compiles]\ncommand = ["{daemon}"]\nshell = true\n' + config[end:]
    (world.repo / "docket.toml").write_text(config)
    git(world.repo, "commit", "-q", "-am", "a check that leaves a daemon")

    done = world.go("r1")
    assert done.returncode == 0, done.stdout[-3000:]
    time.sleep(1.5)  # a daemon that survived has written by now
    root = executions_root(world.repo / ".git")
    tampered = [p for p in root.rglob("README.md") if "tampered" in p.read_text()]
    assert tampered == []
    assert "tampered" not in git(world.repo, "show", "main:README.md")
