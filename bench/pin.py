"""pin: docket's pin in the `docket go` process against `git add -A` + `git commit` (whole git processes), two layouts.

Layouts (generated once, committed, cached in bench/.work):

- nested: 20,000 files in 2,000 nested folders (three levels), 100 files modified across the folders and 20
  untracked files added in folders of their own (quick: 2,000 files in 400 folders, 20 modified, 5 added);
- project: a real project's shape, 5,000 files in 1,800 nested folders (bench/workspaces.py's repository), 50
  files modified and 10 added (quick: 1,000 in 360, 50 and 10).

Each round the same edits (new content every round, untimed) are made in a docket workspace made by
``create_worktree`` in this process, as `docket go` makes one (so its change watch runs from its creation), in a
second workspace whose watch is dropped (a restart: the capture walks), and in a ``git clone --shared``, then,
interleaved:

- docket, in-process: the pin as `docket go` runs it (candidates.pin_task without the ledger): ``capture_twice``
  with the objects brought into the user's repository, the binding id, ``pin_candidate`` (the commit, its
  create-only ref, and the objects the ref reaches checked against a prune) and ``complete_candidate``;
- git: ``git add -A`` and ``git commit`` in the clone, two whole processes (its commit undone with ``git reset``
  after the round, untimed).

For information beside it: the same pin without the watch (in-process), and as a whole process (a fresh Python
process doing the pin: imports, no watch, so it walks). Goal (issue 22, goal 4): the in-process pin at most 0.7x
git's time on both layouts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .common import WORK, Row, interleaved, log, median, spread

GOAL = 0.7
ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "bench",
       "GIT_COMMITTER_EMAIL": "bench@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
       "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


@dataclass(frozen=True)
class Layout:
    name: str
    files: int
    dirs: int
    modified: int
    added: int


def layouts(quick: bool) -> list[Layout]:
    if quick:
        return [Layout("nested", 2_000, 400, 20, 5), Layout("project", 1_000, 360, 50, 10)]
    return [Layout("nested", 20_000, 2_000, 100, 20), Layout("project", 5_000, 1_800, 50, 10)]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **ENV}, check=True, capture_output=True,
                          text=True).stdout.strip()


def prepare(layout: Layout, under: Path = WORK) -> tuple[Path, str]:
    """The layout's repository (made once, then reused) and its commit."""
    from .workspaces import prepare as make

    from docket.adapters.world.git.object_graphs import wait_out_gc

    repo = under / f"workspaces-{layout.files}" if layout.name == "project" else \
        under / f"pin-nested-{layout.files}-{layout.dirs}"
    base = make(repo, layout.files, layout.dirs)
    packed = repo / ".git" / "docket-bench-packed"
    if not packed.exists():  # the commit may have started git's gc --auto in the background: wait, then pack
        wait_out_gc(repo / ".git", timeout=600)
        git(repo, "gc", "-q")
        packed.write_text("")
    return repo, base


def edit(root: Path, modified: list[str], added: list[str], round_: int) -> None:
    """The same agent's work in any checkout: files rewritten, and new files, with content new to this round."""
    for i, rel in enumerate(modified):
        (root / rel).write_text(f"# rewritten in round {round_}\nvalue = {i}\n")
    for i, rel in enumerate(added):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# added in round {round_}\nnew = {i}\n")


def docket_pin(common: Path, workspace: Path, base: str, ref: str) -> tuple[str, int]:
    """The pin as `docket go` runs it for a task whose agent did not commit: (the candidate's tree, changed paths)."""
    from docket.adapters.world.git.candidates import complete_candidate, pin_candidate
    from docket.adapters.world.git.capture import capture_twice
    from docket.domain.binding import binding_id, binding_seed, worktree_identity

    got = capture_twice(workspace, expected_head=None, base=base, artifact_dir=None, repository=common)
    assert hasattr(got, "tree"), f"unstable: {got}"
    identity = worktree_identity(os.path.realpath(workspace), got.git_dir)
    binding_id(binding_seed("bench", "task"), got.head, got.tree, got.changed, identity)
    pin_candidate(common, ref, got.head, got.tree, "docket candidate", worktree=workspace, base=base)
    assert complete_candidate(common, ref, got.head, got.tree, "docket candidate", worktree=workspace,
                              base=base) == []
    return got.tree, len(got.changed)


@dataclass
class Measured:
    times: dict[str, list[float]]
    tree: str  # the tree both sides wrote in the last round
    changed: int
    watched: int  # captures of the watched workspace that used its watch


def measure(repo: Path, base: str, layout: Layout, rounds: int, under: Path = WORK) -> Measured:
    from docket.adapters.world.git.change_watch import forget_watches, watch_of
    from docket.adapters.world.workspaces.worktrees import create_worktree

    work = under / f"pin-{layout.name}-places"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    common = repo / ".git"
    places = work / "data" / "workspaces" / "key" / "run"
    watched, walked = places / "watched", places / "walked"
    create_worktree(common, watched, "docket/run/watched", base)
    create_worktree(common, walked, "docket/run/walked", base)
    forget_watches([walked])  # as after a restart: this process did not make it
    clone = work / "clone"
    git(work, "clone", "-q", "--shared", str(repo), str(clone))
    tracked = sorted(git(repo, "ls-files").splitlines())
    step = max(1, len(tracked) // layout.modified)
    modified = [tracked[i] for i in range(0, len(tracked), step)][:layout.modified]
    spread_over = sorted({str(Path(p).parent) for p in tracked})
    added = [f"{spread_over[(i * 7919) % len(spread_over)]}/new{i}.py" for i in range(layout.added)]
    count, trees = {"n": 0}, {}

    def pin(workspace: Path, side: str):  # noqa: ANN202
        def run() -> None:
            count["n"] += 1
            trees[side] = docket_pin(common, workspace, base, f"refs/docket/candidates/bench/{count['n']:064x}")
        return run

    def whole_process() -> None:
        count["n"] += 1
        ref = f"refs/docket/candidates/bench/{count['n']:064x}"
        subprocess.run([sys.executable, "-m", "bench.pin", str(common), str(walked), base, ref], check=True,
                       cwd=Path(__file__).resolve().parent.parent, capture_output=True)

    def git_commit() -> None:
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", "pin")

    sides = {"git": git_commit, "docket": pin(watched, "docket"), "no watch": pin(walked, "no watch"),
             "process": whole_process}
    times: dict[str, list[float]] = {side: [] for side in sides}
    for i in range(rounds):
        for root in (watched, walked, clone):
            edit(root, modified, added, i)
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
        for side in order:
            times[side] += interleaved({side: sides[side]}, 1)[side]
        git_tree = git(clone, "rev-parse", "HEAD^{tree}")
        assert trees["docket"][0] == trees["no watch"][0] == git_tree, (trees, git_tree)
        git(clone, "reset", "-q", base)
    watch = watch_of(watched)
    fast = 0 if watch is None else watch.fast_captures
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/docket/candidates/bench/").split()
    subprocess.run(["git", "update-ref", "--stdin"], cwd=repo, check=True, capture_output=True,
                   input="".join(f"delete {r}\n" for r in refs).encode())
    forget_watches([watched])
    shutil.rmtree(work, ignore_errors=True)
    return Measured(times, trees["docket"][0], trees["docket"][1], fast)


def run(quick: bool) -> list[Row]:
    rounds = 3 if quick else 9
    rows: list[Row] = []
    for layout in layouts(quick):
        repo, base = prepare(layout)
        m = measure(repo, base, layout, rounds)
        t = {side: median(xs) for side, xs in m.times.items()}
        log(f"pin, {layout.name}: git {t['git'] * 1000:.0f} ms, docket {t['docket'] * 1000:.0f} ms in-process "
            f"({m.watched} watched captures), {t['no watch'] * 1000:.0f} ms without the watch, "
            f"{t['process'] * 1000:.0f} ms as a process")
        what = (f"{layout.name}: {layout.files:,} files in {layout.dirs:,} nested folders, {layout.modified} modified "
                f"across them, {layout.added} added; median of {rounds}")
        ratio = t["docket"] / t["git"]
        rows += [
            Row("pin", f"git add -A + git commit in a --shared clone (whole processes); {what} "
                       f"({spread(m.times['git'])})", t["git"], "s"),
            Row("pin", f"docket pin in the docket go process (its workspace watched since made): capture twice, "
                       f"objects home, binding, create-only ref ({spread(m.times['docket'])})", t["docket"], "s",
                ratio=ratio, goal=f"<= {GOAL}x git's time", passed=ratio <= GOAL),
            Row("pin", f"(information) the same, in-process, watch dropped (as after a restart: it walks) "
                       f"({spread(m.times['no watch'])})", t["no watch"], "s", ratio=t["no watch"] / t["git"]),
            Row("pin", f"(information) the same as a whole Python process (imports; no watch: it walks) "
                       f"({spread(m.times['process'])})", t["process"], "s", ratio=t["process"] / t["git"]),
        ]
    return rows


if __name__ == "__main__":  # one pin in a process of its own: python -m bench.pin COMMON WORKSPACE BASE REF
    docket_pin(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4])
