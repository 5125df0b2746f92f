"""sandbox: the time a Landlock sandbox adds to one launch, set up in docket and enforced before exec.

In a git repository with a linked worktree (as a task's), each round starts the
same gated agent (``sh -c 'date +%s%N > "$0"'``) with ``PsutilProcesses.spawn_gated``
twice, interleaved: once unsandboxed, once with the policy ``docket go`` gives
an agent there (``sandbox_for``: the worktree, its git folders, the worker's
folder, a private temporary folder, the system folders, the installs of this
PATH and of the command). Each side is timed from just before the policy is
made (nothing for the unsandboxed side) to the agent's first instruction (the
CLOCK_REALTIME stamp it writes), the gate opened at once. The figure is the
difference of the medians. Goal: under 20 ms added per launch.

For information, the parts: making the policy (finding the roots: resolving the
PATH's folders and the command, reading a venv's pyvenv.cfg), and building the
ruleset (opening each root O_PATH and adding its rule).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from .common import Row, log, median, remove, temp_dir

GOAL_MS = 20.0
AGENT = ("sh", "-c", 'date +%s%N > "$0"; exit 0')


def _world(folder: Path) -> tuple[Path, Path, Path]:
    """(common git folder, worktree, worker folder)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@example.com"}
    repo = folder / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "a"], cwd=repo, check=True, env=env)
    worktree = repo / ".git" / "docket" / "worktrees" / "r1" / "t1"
    subprocess.run(["git", "worktree", "add", "-q", "-b", "t1", str(worktree)], cwd=repo, check=True, env=env)
    worker = repo / ".git" / "docket" / "workers" / "w" / "1"
    worker.mkdir(parents=True)
    return repo / ".git", worktree, worker


def _launch(processes, common: Path, worktree: Path, worker: Path, stamp: Path, log_path: Path, *, sandboxed: bool) -> float:
    """Seconds from before the policy to the agent's first instruction."""
    from docket.adapters.world.processes.lifecycle import LaunchSpec
    from docket.adapters.world.processes.sandbox_roots import sandbox_for
    from docket.adapters.world.workspaces.port import agent_roots
    from docket.domain.containment.sandbox import Confinement

    env = {"PATH": os.environ["PATH"]}
    argv = (*AGENT, str(stamp))
    start = time.time_ns()
    policy = None
    if sandboxed:
        write, read = agent_roots(common, worktree)
        policy = sandbox_for(Confinement(), write=[*write, worker], read=read, temporary=worker / "tmp", argv=argv,
                             env=env, cwd=worktree)
    gated = processes.spawn_gated(LaunchSpec(argv=argv, cwd=worktree, env=env, log_path=log_path, sandbox=policy))
    gated.open()
    gated.popen.wait()
    first = int(stamp.read_text().strip())
    stamp.unlink()
    log_path.unlink()
    return (first - start) / 1e9


def run(quick: bool) -> list[Row]:
    from docket.adapters.world.processes.landlock import Ruleset, abi_version
    from docket.adapters.world.processes.lifecycle import PsutilProcesses
    from docket.adapters.world.processes.sandbox_roots import sandbox_for
    from docket.adapters.world.workspaces.port import agent_roots
    from docket.domain.containment.sandbox import Confinement

    if abi_version() < 1:
        log("sandbox: this kernel has no Landlock; nothing to measure")
        return [Row("sandbox", "no Landlock on this kernel: not measured", None, "s")]
    folder = temp_dir()
    try:
        common, worktree, worker = _world(folder)
        processes = PsutilProcesses()
        rounds = 21 if quick else 61
        times: dict[str, list[float]] = {"off": [], "on": []}
        for i in range(rounds):
            for side in (("off", "on") if i % 2 == 0 else ("on", "off")):
                times[side].append(_launch(processes, common, worktree, worker, worker / "stamp", folder / f"{i}-{side}.log",
                                           sandboxed=side == "on"))
        off, on = median(times["off"]), median(times["on"])
        added = on - off
        policies, rulesets = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            write, read = agent_roots(common, worktree)
            policy = sandbox_for(Confinement(), write=[*write, worker], read=read, temporary=worker / "tmp",
                                 argv=(*AGENT, "x"), env={"PATH": os.environ["PATH"]}, cwd=worktree)
            t1 = time.perf_counter()
            Ruleset(policy).close()
            t2 = time.perf_counter()
            policies.append(t1 - t0)
            rulesets.append(t2 - t1)
        roots = len(policy.write) + len(policy.read)
        return [
            Row("sandbox", f"a gated launch with the agent's Landlock sandbox vs without ({off * 1000:.1f} ms), to the "
                           f"agent's first instruction, median of {rounds} interleaved (ABI {abi_version()}, "
                           f"{roots} roots)", added, "s", on / off, f"< {GOAL_MS:.0f} ms added",
                added * 1000 < GOAL_MS),
            Row("sandbox", "(information) making the policy (finding its roots)", median(policies), "s"),
            Row("sandbox", "(information) building its ruleset (each root opened O_PATH, its rule added)",
                median(rulesets), "s"),
        ]
    finally:
        remove(folder)
