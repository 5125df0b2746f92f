"""Attack: files larger than git objects are comfortably held in memory (sparse, so they cost no disk).

An agent that leaves a 1 GiB file in its workspace has that generation refused at pin time (``file-too-large``,
naming the path and its size: ``[candidates] max_file_size``), before any object of it is written; the run goes on
and the other tasks deliver, and a resume never exits 70. A large file the user committed on the target before
the run is no candidate's to refuse: every workspace and execution checks it out (streamed, never held in memory
whole) and the run delivers around it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.attacks.attacker_world import honest_and, task
from tests.conftest import git
from tests.e2e.go_world import AGENT, GoWorld, make_go_world

GIB = 1 << 30
LARGE_BLOB = "4fce05a4e4ed8cefef2d99f32c519b2fd7841b74"  # a 1 GiB file of zeros, as git hashes it

TASKS = honest_and(task("big", "leave a large file behind", "Big.", "write mine.py: MINE = 1", "BIG"))

# The scripted agent, then (when the prompt says BIG) a sparse 1 GiB file, committed when told COMMIT.
BIG_AGENT = '''\
import os, subprocess, sys
prompt = open(sys.argv[1]).read()
done = subprocess.run([sys.executable, sys.argv[2], "--prompt-file", sys.argv[1]])
if "BIG" in prompt:
    with open("big.bin", "wb") as f:
        f.truncate(1 << 30)
    if "COMMIT" in prompt:
        subprocess.run(["git", "add", "big.bin"], check=True)
        subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-qm", "big"],
                       check=True)
    if "DELETE" in prompt:  # gone from the tree, still in the history the candidate would bring
        subprocess.run(["git", "rm", "-q", "big.bin"], check=True)
        subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-qm", "gone"],
                       check=True)
sys.exit(done.returncode)
'''


def _world(tmp_path: Path, tasks: str = TASKS, extra: str = "") -> GoWorld:
    agent = tmp_path / "big_agent.py"
    agent.write_text(BIG_AGENT)
    section = f'''
[agents.big]
command = ["{sys.executable}", "{agent}", "{{prompt_file}}", "{AGENT}"]
prompt = "file"
{extra}'''
    world = make_go_world(tmp_path, tasks=tasks, extra_config=section)
    (world.repo / "docket.toml").write_text((world.repo / "docket.toml").read_text()
                                            .replace('agent = "scripted"', 'agent = "big"'))
    git(world.repo, "commit", "-qam", "the agent that leaves large files")
    return world


def _largest_object(repo: Path) -> int:
    listing = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectsize)"], cwd=repo,
                             capture_output=True, text=True, check=True).stdout.split()
    return max(int(size) for size in listing)


def _feedback_texts(world: GoWorld) -> str:
    return json.dumps(world.events("TaskFeedbackRecorded"))


def _refused_and_the_rest_delivers(world: GoWorld, named: str = "big.bin") -> None:
    done = world.go("r1", "--parallel", "2", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    rows = {row["task"]: row for row in json.loads(done.stdout)["tasks"]}
    assert rows["greet"]["result"] == "delivered"
    assert (rows["big"]["result"], rows["big"]["code"]) == ("failed", "pin-failed")
    text = _feedback_texts(world)
    assert "file-too-large" in text and named in text and str(GIB) in text
    assert world.file_at("main", "greet.py") == 'print("hello")\n'
    assert "big.bin" not in git(world.repo, "ls-tree", "-r", "--name-only", "main")
    assert _largest_object(world.repo) < 100 << 20  # no object of the large file was written home
    resumed = world.resume("r1")
    assert resumed.returncode != 70, resumed.stderr
    assert world.run("verify").returncode == 0
    git(world.repo, "fsck", "--strict")


def test_an_agent_that_leaves_a_sparse_gigabyte_file_is_refused_and_the_run_delivers_the_rest(tmp_path: Path):
    _refused_and_the_rest_delivers(_world(tmp_path))


def test_an_agent_that_commits_a_sparse_gigabyte_file_is_refused_too(tmp_path: Path):
    _refused_and_the_rest_delivers(_world(tmp_path, tasks=TASKS.replace("BIG\n", "BIG COMMIT\n")))


def test_an_agent_that_commits_a_sparse_gigabyte_file_and_deletes_it_is_refused_too(tmp_path: Path):
    _refused_and_the_rest_delivers(_world(tmp_path, tasks=TASKS.replace("BIG\n", "BIG COMMIT DELETE\n")),
                                   named=LARGE_BLOB)


def test_a_large_file_the_user_committed_on_the_target_is_checked_out_and_the_run_delivers(tmp_path: Path):
    world = _world(tmp_path, tasks=TASKS.replace("BIG\n", ""))
    with open(world.repo / "data.bin", "wb") as f:
        f.truncate(GIB)
    git(world.repo, "-c", "core.bigFileThreshold=2g", "add", "data.bin")  # a loose object, as dulwich reads them
    assert (world.repo / ".git" / "objects" / LARGE_BLOB[:2] / LARGE_BLOB[2:]).is_file()
    git(world.repo, "commit", "-qm", "a large data file")
    done = world.go("r1", "--parallel", "2")
    assert done.returncode == 0, done.stderr
    rows = {row["task"]: row["result"] for row in json.loads(done.stdout)["tasks"]}
    assert rows == {"greet": "delivered", "big": "delivered"}
    assert world.file_at("main", "mine.py") == "MINE = 1\n"
    assert git(world.repo, "cat-file", "-s", "main:data.bin") == str(GIB)
    assert (world.repo / "data.bin").stat().st_size == GIB
    assert world.run("verify").returncode == 0
    git(world.repo, "fsck", "--strict")


def test_the_limit_is_the_one_docket_toml_sets(tmp_path: Path):
    padded = TASKS.replace("BIG\n", "write pad.txt: " + "x" * 1500 + "\n")
    world = _world(tmp_path, tasks=padded)
    with open(world.repo / "docket.toml", "a") as f:
        f.write('\n[candidates]\nmax_file_size = "1KiB"\n')
    git(world.repo, "commit", "-qam", "a small limit")
    done = world.go("r1", "--parallel", "2", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    rows = {row["task"]: row for row in json.loads(done.stdout)["tasks"]}
    assert rows["greet"]["result"] == "delivered" and rows["big"]["code"] == "pin-failed"
    text = _feedback_texts(world)
    assert "file-too-large" in text and "pad.txt is 1501 bytes" in text and "max_file_size (1 KiB)" in text
