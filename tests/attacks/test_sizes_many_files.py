"""Attack: an agent leaves more new files in its workspace than a candidate records (MAX_CHANGED_PATHS).

Its pin was refused ``too-many-changes`` only after the capture had written a blob of every file (and the trees
holding them) into the user's repository: 120,000 files left ~483 MB of loose objects in its .git. The capture
counts what changes before it reads or writes anything: that task fails with the reason recorded, no object of its
files is written, and the honest task of the same run lands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docket.adapters.world.git.capture import capture_twice
from docket.domain.kernel.errors import Refused
from docket.domain.events import candidate as limits
from docket.domain.events.candidate import MAX_CHANGED_PATHS
from tests.attacks.attacker_world import honest_and, task
from tests.conftest import git
from tests.e2e.go_world import AGENT, GoWorld, make_go_world

TASKS = honest_and(task("many", "leave too many files behind", "Many.", "write mine.py: MINE = 1", "MANY"))

FILES = MAX_CHANGED_PATHS + 1
PER_FOLDER = 1000

# The scripted agent, then (when the prompt says MANY) FILES new files of distinct content.
MANY_AGENT = f'''\
import os, subprocess, sys
prompt = open(sys.argv[1]).read()
done = subprocess.run([sys.executable, sys.argv[2], "--prompt-file", sys.argv[1]])
if "MANY" in prompt:
    for i in range({FILES}):
        folder = "many/%d" % (i // {PER_FOLDER})
        if i % {PER_FOLDER} == 0:
            os.makedirs(folder, exist_ok=True)
        with open("%s/f%d.txt" % (folder, i), "w") as f:
            f.write("hostile file %d\\n" % i)
sys.exit(done.returncode)
'''


def _world(tmp_path: Path) -> GoWorld:
    agent = tmp_path / "many_agent.py"
    agent.write_text(MANY_AGENT)
    section = f'''
[agents.many]
command = ["{sys.executable}", "{agent}", "{{prompt_file}}", "{AGENT}"]
prompt = "file"
'''
    world = make_go_world(tmp_path, tasks=TASKS, extra_config=section)
    (world.repo / "docket.toml").write_text((world.repo / "docket.toml").read_text()
                                            .replace('agent = "scripted"', 'agent = "many"'))
    git(world.repo, "commit", "-qam", "the agent that leaves many files")
    return world


def _object_count(repo: Path) -> int:
    listing = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], cwd=repo,
                             capture_output=True, text=True, check=True).stdout
    return len(listing.split())


def _has_blob(repo: Path, content: str) -> bool:
    sha = subprocess.run(["git", "hash-object", "--stdin"], cwd=repo, input=content, capture_output=True, text=True,
                         check=True).stdout.strip()
    return subprocess.run(["git", "cat-file", "-e", sha], cwd=repo).returncode == 0


def test_an_agent_that_leaves_too_many_files_writes_no_object_and_the_run_delivers_the_rest(tmp_path: Path):
    world = _world(tmp_path)
    before = _object_count(world.repo)
    done = world.go("r1", "--parallel", "2", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    rows = {row["task"]: row for row in json.loads(done.stdout)["tasks"]}
    assert rows["greet"]["result"] == "delivered"
    assert (rows["many"]["result"], rows["many"]["code"]) == ("failed", "pin-failed")
    text = json.dumps(world.events("TaskFeedbackRecorded"))
    assert "too-many-changes" in text and f"{MAX_CHANGED_PATHS} paths" in text
    assert world.file_at("main", "greet.py") == 'print("hello")\n'
    for i in (0, FILES // 2, FILES - 1):  # no blob of the hostile files, anywhere in the user's repository
        assert not _has_blob(world.repo, f"hostile file {i}\n"), i
    assert not _has_blob(world.repo, "MINE = 1\n")  # nor of the refused task's other files
    assert _object_count(world.repo) - before < 1000  # the honest task's pin and merge, the run's own records
    assert world.run("verify").returncode == 0
    git(world.repo, "fsck", "--strict")


# The capture itself, its limit lowered (it reads the limit when it counts): what it may write, and when.

def _repo(tmp_path: Path, files: int) -> tuple[Path, str]:
    path = tmp_path / "work"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for i in range(files):
        (path / f"t{i}.txt").write_text(f"tracked {i}\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path, git(path, "rev-parse", "HEAD")


def test_files_rewritten_past_the_limit_are_refused_before_any_blob_is_written(tmp_path: Path, monkeypatch):
    work, base = _repo(tmp_path, 5)
    monkeypatch.setattr(limits, "MAX_CHANGED_PATHS", 3)
    before = _object_count(work)
    for i in range(5):  # files of HEAD's: whether they change is known only once read
        (work / f"t{i}.txt").write_text(f"rewritten {i}\n")
    with pytest.raises(Refused) as e:
        capture_twice(work, expected_head=None, base=base, artifact_dir=None)
    assert e.value.code == "too-many-changes" and "changes 5 paths" in e.value.message
    assert _object_count(work) == before and not _has_blob(work, "rewritten 0\n")


def test_files_touched_past_the_limit_but_unchanged_are_captured(tmp_path: Path, monkeypatch):
    work, base = _repo(tmp_path, 5)
    monkeypatch.setattr(limits, "MAX_CHANGED_PATHS", 3)
    for i in range(5):
        os.utime(work / f"t{i}.txt", ns=(1, 1))  # stat'ed as changed, the same content
    (work / "t0.txt").write_text("rewritten 0\n")
    (work / "new.txt").write_text("new\n")
    captured = capture_twice(work, expected_head=None, base=base, artifact_dir=None)
    assert captured.changed == ("new.txt", "t0.txt")
    assert _has_blob(work, "rewritten 0\n") and _has_blob(work, "new\n")
    assert git(work, "cat-file", "-p", f"{captured.tree}:new.txt") == "new"


def test_commits_past_the_limit_are_refused_before_any_object_is_written(tmp_path: Path, monkeypatch):
    work, base = _repo(tmp_path, 1)
    monkeypatch.setattr(limits, "MAX_CHANGED_PATHS", 3)
    for i in range(4):
        (work / f"c{i}.txt").write_text(f"committed {i}\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "four files")
    (work / "t0.txt").write_text("rewritten 0\n")
    before = _object_count(work)
    with pytest.raises(Refused) as e:
        capture_twice(work, expected_head=None, base=base, artifact_dir=None)
    assert e.value.code == "too-many-changes" and "changes 5 paths" in e.value.message
    assert _object_count(work) == before and not _has_blob(work, "rewritten 0\n")
