"""workspaces: making a task's workspace, and pinning from it, against the git CLI on a real project's shape.

A generated repository of 5,000 files (about 1 KB each) in 1,800 nested folders (three levels: 12, 120, 1,668
folders), committed once, cached in bench/.work/workspaces-<files>. Each round, interleaved:

- creation: docket's ``create_worktree`` in this process (a repository of its own in the data folder, borrowing the
  user's objects through alternates: files written from the object store, the index and the capture's stat cache
  from the stat data of each write, one rename into place) against ``git worktree add --detach`` of the same
  commit (a whole git process, as a user would run it). Both are removed after each round, untimed.
- pin: bench/pin.py's measure on this layout (50 files rewritten, 10 added; docket in-process, its workspace
  watched since made, against `git add -A` + `git commit` in a clone, whole processes).

Goals: creation no more than 1.5x git's time; pin at most 0.7x git's time (issue 22, goal 4).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .common import WORK, Row, interleaved, log, median, spread

from docket.adapters.world.git.candidates import pin_candidate
from docket.adapters.world.git.capture import capture_twice
from docket.adapters.world.workspaces.worktrees import create_worktree

CREATE_GOAL, PIN_GOAL = 1.5, 0.7
ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "bench",
       "GIT_COMMITTER_EMAIL": "bench@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
       "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def folders(count: int) -> list[str]:
    """count nested folders, three levels deep (12 at the top, 10 under each, the rest spread below those)."""
    top = [f"pkg{a:02d}" for a in range(12)]
    middle = [f"{t}/mod{b}" for t in top for b in range(10)]
    leaves = [f"{middle[i % len(middle)]}/part{i // len(middle)}" for i in range(max(0, count - 132))]
    return top + middle + leaves


def prepare(folder: Path, files: int, dirs: int) -> str:
    """The repository at folder (made once, then reused); its commit."""
    if not (folder / ".git" / "docket-bench-ready").exists():
        log(f"generating a {files:,}-file repository in {dirs:,} folders in {folder}")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        git(folder, "init", "-q", "-b", "main")
        places = folders(dirs)
        for place in places:
            (folder / place).mkdir(parents=True, exist_ok=True)
        line = "x = compute(a, b, c)  # a line of a source file of a real project, about this long\n"
        for i in range(files):
            (folder / places[i % len(places)] / f"module{i:05d}.py").write_text(f"# file {i}\n" + line * 12)
        git(folder, "add", "-A")
        # no auto gc: one detached after this commit would hold gc's lock while go.py packs the copy's source
        git(folder, "-c", "gc.auto=0", "commit", "-q", "-m", "generated")
        (folder / ".git" / "docket-bench-ready").write_text("")
    return git(folder, "rev-parse", "HEAD")


def edit(root: Path, files: list[Path], round_: int) -> None:
    """The same agent's work in any checkout: files rewritten, and new files, with content new to this round."""
    for i, rel in enumerate(files):
        (root / rel).write_text(f"# rewritten in round {round_}\nvalue = {i}\n")
    for i in range(10):
        (root / f"added{i}.py").write_text(f"# added in round {round_}\nnew = {i}\n")


def measure_creation(repo: Path, base: str, rounds: int, work: Path = WORK) -> dict[str, list[float]]:
    places = work / "workspaces-places"
    shutil.rmtree(places, ignore_errors=True)
    places.mkdir(parents=True)
    common = repo / ".git"
    made = {"docket": 0, "git": 0}

    def docket() -> None:
        made["docket"] += 1
        path = places / "data" / "workspaces" / "key" / "run" / f"task{made['docket']}"
        create_worktree(common, path, f"docket/run/task{made['docket']}", base)
        assert (path / ".git" / "index").is_file()

    def git_add() -> None:
        made["git"] += 1
        git(repo, "worktree", "add", "-q", "--detach", str(places / f"git{made['git']}"), base)

    times = interleaved({"git": git_add, "docket": docket}, rounds)
    git(repo, "worktree", "prune")
    shutil.rmtree(places, ignore_errors=True)
    git(repo, "worktree", "prune")
    return times


def measure_pin(repo: Path, base: str, rounds: int, under: Path = WORK) -> tuple[dict[str, list[float]], int]:
    """The pin on this layout, as bench/pin.py measures it (its "project" layout): 50 files modified, 10 added."""
    from .pin import Layout, measure

    m = measure(repo, base, Layout("project", 0, 0, 50, 10), rounds, under)
    return {"git": m.times["git"], "docket": m.times["docket"]}, m.changed


def run(quick: bool) -> list[Row]:
    files, dirs, rounds = (1_000, 360, 3) if quick else (5_000, 1_800, 7)
    repo = WORK / f"workspaces-{files}"
    base = prepare(repo, files, dirs)
    created = measure_creation(repo, base, rounds)
    git_s, docket_s = median(created["git"]), median(created["docket"])
    log(f"workspace creation: git worktree add {git_s * 1000:.0f} ms, docket {docket_s * 1000:.0f} ms")
    pinned, changed = measure_pin(repo, base, rounds)
    git_pin, docket_pin = median(pinned["git"]), median(pinned["docket"])
    log(f"pin: git add -A + commit {git_pin * 1000:.0f} ms, docket {docket_pin * 1000:.0f} ms")
    what = f"{files:,} files in {dirs:,} folders, median of {rounds}"
    return [
        Row("workspaces", f"git worktree add --detach (a git process); {what} ({spread(created['git'])})", git_s, "s"),
        Row("workspaces", f"docket workspace of its own, in-process ({spread(created['docket'])})", docket_s, "s",
            ratio=docket_s / git_s, goal=f"<= {CREATE_GOAL}x git", passed=docket_s / git_s <= CREATE_GOAL),
        Row("workspaces", f"git add -A + git commit in a --shared clone, {changed} files changed; {what} "
                          f"({spread(pinned['git'])})", git_pin, "s"),
        Row("workspaces", f"docket pin in-process (bench/pin.py's measure): capture twice, objects home, ref "
                          f"({spread(pinned['docket'])})", docket_pin, "s",
            ratio=docket_pin / git_pin, goal=f"<= {PIN_GOAL}x git's time", passed=docket_pin / git_pin <= PIN_GOAL),
    ]
