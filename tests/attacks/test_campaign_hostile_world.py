"""The random-kill campaign of a hostile world: `docket go` of a few tasks while, beside it, a loop runs
`git gc --prune=now` and `git worktree prune` on the repository, the disk fills and frees, and `docket go` is
SIGKILLed at random moments drawn from a fixed seed, then run again until it is done. Every seed must converge:
the target's tree is the one an uninterrupted run delivers, `git fsck --strict` is clean, `docket verify` is
clean, and no launch ever exits 70.

A full disk is made with RLIMIT_FSIZE on docket's process (`ulimit -f`, SIGXFSZ ignored), which makes a write past
the limit fail with EFBIG as a full disk fails it with ENOSPC: no root, no loop device, no size-limited
filesystem needed. About a third of the launches start with the limit a little above the ledger's size (the disk
fills while the run goes on); the next launch has none (it was freed)."""

from __future__ import annotations

import json
import random
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.go_world import GoWorld, make_go_world

TASKS = '''\
[[tasks]]
id = "one"
title = "one"
prompt = "write one.py: ONE = 1"

[[tasks]]
id = "two"
title = "two"
prompt = "write two.py: TWO = 2"

[[tasks]]
id = "three"
title = "three"
depends_on = ["one"]
prompt = "append one.py: THREE = 3"
'''

ARGV = ("go", "--goal", "a hostile world", "--tasks", "tasks.toml", "--id", "c1", "--target", "main", "--parallel",
        "3", "--json")
LAUNCHES = 10  # at most, per seed, killed or not, before the last unharmed ones


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tree an uninterrupted run delivers in a quiet world."""
    world = make_go_world(tmp_path_factory.mktemp("reference"), tasks=TASKS)
    done = world.run(*ARGV)
    assert done.returncode == 0, done.stdout + done.stderr
    return world.tree_of("main")


class Housekeeping:
    """git gc --prune=now and git worktree prune in a loop beside docket, as a user's cron or IDE might."""

    def __init__(self, repo: Path, seed: int, *, running: bool = True):
        self.repo, self.chance, self.running = repo, random.Random(seed * 7919), running
        self.stop = threading.Event()
        self.rounds = 0
        self.thread = threading.Thread(target=self._loop, name="housekeeping", daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            for argv in (["git", "gc", "--prune=now", "--quiet"], ["git", "worktree", "prune"]):
                subprocess.run(argv, cwd=self.repo, capture_output=True, timeout=120)  # it may fail beside writers
            self.rounds += 1
            self.stop.wait(self.chance.uniform(0.05, 0.4))

    def __enter__(self) -> Housekeeping:
        if self.running:
            self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        if self.running:
            self.thread.join(timeout=180)


def _launch(world: GoWorld, file_limit_kib: int | None) -> subprocess.Popen[str]:
    argv = world.argv(*ARGV)
    if file_limit_kib is not None:  # the disk fills: writes past the limit fail (EFBIG) instead of killing docket
        argv = ["bash", "-c", f"trap '' XFSZ; ulimit -f {file_limit_kib}; exec {shlex.join(argv)}"]
    return subprocess.Popen(argv, cwd=world.repo, env=world.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _ledger_kib(world: GoWorld) -> int:
    return world.ledger.stat().st_size // 1024 if world.ledger.exists() else 0


def campaign(tmp_path: Path, reference: str, seed: int, *, housekeeping: bool) -> None:
    chance = random.Random(seed)
    world = make_go_world(tmp_path, tasks=TASKS)
    launches: list[tuple[str, int | None, str]] = []  # (how, exit code or None when killed, stderr's last line)
    done = None
    with Housekeeping(world.repo, seed, running=housekeeping) as kept:
        for _ in range(LAUNCHES):
            full = chance.random() < 0.35
            limit = _ledger_kib(world) + chance.randint(8, 256) if full else None
            process = _launch(world, limit)
            time.sleep(chance.uniform(0.2, 3.0))
            killed = process.poll() is None
            if killed:
                process.send_signal(signal.SIGKILL)
            out, err = process.communicate(timeout=120)
            how = f"full disk ({limit} KiB)" if full else "killed" if killed else "ran"
            launches.append((how, None if killed else process.returncode, (err.strip().splitlines() or [""])[-1]))
            assert killed or process.returncode != 70, (launches, err)
            if not killed and not full and process.returncode == 0:
                done = json.loads(out)
                break
        for _ in range(4):  # the world quiets down (housekeeping still runs): resume until done
            if done is not None:
                break
            try:
                finished = world.run(*ARGV, timeout=120)
            except subprocess.TimeoutExpired:  # a resume that never ends is a wedged run too
                pytest.fail("a resume hung:\n" + "\n".join(map(str, launches)))
            launches.append(("resumed", finished.returncode, (finished.stderr.strip().splitlines() or [""])[-1]))
            assert finished.returncode != 70, (launches, finished.stderr)
            if finished.returncode == 0:
                done = json.loads(finished.stdout)
    failed = [e["payload"]["message"] for e in world.events("TaskFinished") if e["payload"]["result"] != "passed"]
    assert done is not None and done["outcome"] == "delivered", "\n".join(map(str, [*launches, *failed]))
    assert kept.rounds > 0 or not housekeeping
    assert world.tree_of("main") == reference, launches
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=world.repo, capture_output=True, text=True)
    assert fsck.returncode == 0, (fsck.stdout + fsck.stderr, launches)
    verified = world.run("verify")
    assert verified.returncode == 0, (verified.stdout + verified.stderr, launches)
    assert len(world.events("ReceiptSealed")) == 1
    assert git(world.repo, "rev-parse", "main") == done["target_commit"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_a_hostile_world_never_wedges_a_run(tmp_path: Path, reference: str, seed: int):
    campaign(tmp_path, reference, seed, housekeeping=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_kills_and_a_full_disk_alone_never_wedge_a_run(tmp_path: Path, reference: str, seed: int):
    campaign(tmp_path, reference, seed, housekeeping=False)
