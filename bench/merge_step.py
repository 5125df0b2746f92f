"""merge_step: one step of docket's merge queue against ``git merge --no-ff`` of the same branch (issue 22, goal 2).

Per layout (a tiny repository; 5,000 files in 1,800 nested folders, bench/workspaces.py's generated repository), a
base commit on ``main`` and one branch per round, each a one-file change off the base (made before the clock
starts). Sides, interleaved (the order reversed every other round), medians:

- git: ``git merge -q --no-ff --no-edit task/N`` in the checked-out main, a whole process (the merge, the index and
  the files of the checkout, the ref move); ``git reset --hard`` to the base after, untimed.
- docket, in this process (the ``docket go`` process's work, imports and the first execution made before timing: a
  run's steady state): the merge computed in the object store (merge.py ``merge_candidate``), its re-check's
  execution set up and torn down as the effector drives it (observed absent, made from the repository's pool,
  observed ready, inspected after the check, observed for its removal, given back, observed absent: the check's
  own run excluded), and the ref move (``advance_ref`` of the integration ref, create-only).

Goal: docket's step at most 3x git's.
"""

from __future__ import annotations

import os
from pathlib import Path

from .common import Row, log, median, remove, spread, temp_dir, timed
from .go import NESTED, git, load, make_repository

GOAL = 3.0
CONFIG = '[checks.ok]\ncommand = ["true"]\n'


class Layout:
    """A repository on main at its base, with a branch task/N (one file changed) per round."""

    def __init__(self, folder: Path, layout: str, rounds: int, nested: tuple[int, int] = NESTED) -> None:
        self.repo = make_repository(folder / "repo", CONFIG, with_ledger=False, layout=layout, nested=nested)
        self.common, self.root = self.repo / ".git", folder / "data"
        self.base = git(self.repo, "rev-parse", "HEAD")
        self.tips: list[str] = []
        for i in range(rounds + 1):
            git(self.repo, "checkout", "-q", "-b", f"task/{i}", self.base)
            (self.repo / f"task{i}.txt").write_text(f"changed by task {i}\n")
            git(self.repo, "add", f"task{i}.txt")
            git(self.repo, "commit", "-q", "-m", f"task {i}")
            self.tips.append(git(self.repo, "rev-parse", "HEAD"))
        git(self.repo, "checkout", "-q", "main")
        self.git_round = self.docket_round = 0
        self.trees: dict[str, list[str]] = {"git": []}
        self.commits: list[str] = []

    def git_side(self) -> None:
        i = self.git_round = self.git_round + 1
        git(self.repo, "merge", "-q", "--no-ff", "--no-edit", f"task/{i}")

    def git_after(self) -> None:
        self.trees["git"].append(git(self.repo, "rev-parse", "HEAD^{tree}"))
        git(self.repo, "reset", "-q", "--hard", self.base)

    def docket_side(self, i: int | None = None) -> None:
        from docket.adapters.world.workspaces.executions import (create_execution, execution_path, inspect_execution,
                                                      observe_execution, remove_execution)
        from docket.adapters.world.git.integration_refs import advance_ref
        from docket.adapters.world.git.merge import merge_candidate

        if i is None:
            i = self.docket_round = self.docket_round + 1
        merged = merge_candidate(self.common, self.base, self.tips[i], f"docket: integrate task {i}")
        assert merged.state == "merged", merged
        commit = merged.commit
        path = execution_path(self.common, "bench", f"{i:064x}", "ok", 1, self.root)
        assert observe_execution(self.common, path, commit).state == "absent"
        create_execution(self.common, path, commit)
        assert observe_execution(self.common, path, commit).state == "ready"
        assert inspect_execution(self.common, path, commit).state == "matching"
        assert observe_execution(self.common, path, "0" * 40).state == "diverged"  # the removal's observation
        remove_execution(self.common, path, group_alive=False)
        assert observe_execution(self.common, path, commit).state == "absent"
        advance_ref(self.common, f"refs/docket/integrations/bench-{i}", None, commit)
        if i:
            self.commits.append(commit)  # its tree read after the clock stops, as the git side's is

    def docket_trees(self) -> list[str]:
        return [git(self.repo, "rev-parse", f"{commit}^{{tree}}") for commit in self.commits]


def measure(folder: Path, layout: str, rounds: int, nested: tuple[int, int] = NESTED) -> dict[str, list[float]]:
    """Seconds per step of each side, rounds times, taking turns (the order reversed every other round); both
    sides must merge the same trees."""
    world = Layout(temp_dir(folder), layout, rounds, nested)
    world.docket_side(0)  # imports, the pool's first execution: not a step of the steady state
    times: dict[str, list[float]] = {"git": [], "docket": []}
    sides = {"git": world.git_side, "docket": world.docket_side}
    for i in range(rounds):
        for side in (("git", "docket") if i % 2 == 0 else ("docket", "git")):
            times[side].append(timed(sides[side]))
        world.git_after()
    if world.trees["git"] != world.docket_trees():
        raise RuntimeError(f"the sides merged different trees: {world.trees['git']} {world.docket_trees()}")
    return times


def run(quick: bool) -> list[Row]:
    rounds = 3 if quick else 9
    _, at_start = load()
    log(f"machine: {at_start}")
    folder = temp_dir()
    rows = []
    try:
        for layout in ("tiny", "nested"):
            shape = "a tiny repository" if layout == "tiny" else f"{NESTED[0]:,} files in {NESTED[1]:,} nested folders"
            times = measure(folder, layout, rounds)
            git_s, docket_s = median(times["git"]), median(times["docket"])
            log(f"merge step, {shape}: docket {docket_s * 1000:.1f} ms ({spread(times['docket'])}) vs git merge "
                f"--no-ff {git_s * 1000:.1f} ms ({spread(times['git'])}), {docket_s / git_s:.2f}x")
            rows += [
                Row("merge_step", f"{shape}: 'git merge --no-ff' of a one-file branch, whole process, median of "
                                  f"{rounds}", git_s, "s"),
                Row("merge_step", f"{shape}: docket's merge step (merge, re-check execution set up and torn down, "
                                  f"ref move), in-process, pool warm, median of {rounds}", docket_s, "s",
                    ratio=docket_s / git_s, goal=f"<= {GOAL:.0f}x git", passed=docket_s / git_s <= GOAL),
            ]
    finally:
        remove(folder)
    _, at_end = load()
    rows.append(Row("merge_step", f"(information) the machine: at the start {at_start}; at the end {at_end}",
                    os.getloadavg()[0], "load"))
    return rows
