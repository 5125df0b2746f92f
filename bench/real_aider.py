"""docket go around the real aider: what docket adds to a task beyond aider's own run.

The real aider (0.86.2, installed into the agent cache by tests/agents/real_clis.py on first use) runs as
docs/agents.md configures it (its `agent: aider` block merged with `agent-offline: aider`) against the scripted
model server of examples/, which answers at once with one whole file; one server serves every run. Each measurement
runs in a fresh repository (tests/agents/aider_world.py: a README, check.py, the model's metadata, docket.toml;
``docket init`` for docket's side), made before the clock starts. Sides, taking turns (the order reversed every
other round):

- aider: aider alone, in the repository, with the argv and environment docket would give it (the block's
  placeholders filled in by hand, a fresh folder for its HOME), from its start to its exit;
- docket go: ``docket go --task PROMPT --target main`` as a whole process, from its start to its exit: open, plan,
  a worktree, the same aider, pin, the check (``python3 check.py``) on the candidate, hand-off, integrate (the check
  again on the merge), move main, seal, complete.

Both must write greet.py as the model said (checked). Figures: the medians, the ratio and docket's overhead per
task (docket go - aider). Goal: under 1 s per task, the same as bench/go.py's goal for a one-line agent. aider's
own start (Python, litellm, its repository map) takes seconds here, so the ratio says how little of a real task's
time docket is.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from docket.domain.config import expand

from .common import BIN, Row, log, median, remove, spread, temp_dir

GOAL_S = 1.0
PROMPT = "Write greet.py with a function greet(name) that returns 'Hello, ' + name."


def run(quick: bool) -> list[Row]:
    from examples.model_server import ModelServer
    from tests.agents.aider_world import GREET, aider_agent, aider_environment, script, write_repository
    from tests.agents.real_clis import AIDER, CannotInstall, install

    try:
        aider = install(AIDER, progress=log)
    except CannotInstall as e:
        log(f"real_aider: skipped: {AIDER.pinned} cannot be installed: {e}")
        return [Row("real_aider", f"(skipped: {AIDER.pinned} cannot be installed: {e})", None, "s")]
    rounds = 1 if quick else 3
    folder = temp_dir()
    times: dict[str, list[float]] = {"aider": [], "docket go": []}
    try:
        with ModelServer(script()) as server:
            env = aider_environment()
            agent = aider_agent(server.url, aider)

            def direct() -> float:
                where = temp_dir(folder)
                repo = write_repository(where / "repo", server.url, aider)
                home = where / "home"
                home.mkdir(mode=0o700)
                prompt_file = where / "prompt.txt"
                prompt_file.write_text(PROMPT)
                values = dict(worktree=str(repo), worker_dir=str(home))
                argv = [expand(arg, **values, prompt=PROMPT, prompt_file=str(prompt_file)) for arg in agent["command"]]
                aider_env = {**env, **{k: expand(v, **values) for k, v in agent["env"].items()}}
                seconds = timed(argv, repo, aider_env)
                assert (repo / "greet.py").read_text() == GREET, "aider did not write greet.py"
                return seconds

            def through_docket() -> float:
                repo = write_repository(temp_dir(folder) / "repo", server.url, aider)
                subprocess.run([str(BIN / "docket"), "init"], cwd=repo, env=env, check=True, capture_output=True)
                seconds = timed([str(BIN / "docket"), "go", "--goal", "bench", "--task", PROMPT, "--target", "main",
                                 "--id", "bench"], repo, env)
                shown = subprocess.run(["git", "show", "main:greet.py"], cwd=repo, capture_output=True, text=True)
                assert shown.stdout == GREET, "docket go did not deliver greet.py"
                return seconds

            sides = {"aider": direct, "docket go": through_docket}
            for i in range(rounds):
                for name in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                    times[name].append(sides[name]())
    finally:
        remove(folder)
    aider_s, go_s = median(times["aider"]), median(times["docket go"])
    overhead = go_s - aider_s
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    log(f"real_aider: aider alone {aider_s:.2f} s ({spread(times['aider'])}), docket go {go_s:.2f} s "
        f"({spread(times['docket go'])}): {overhead:.2f} s per task; load average {load}")
    return [
        Row("real_aider", f"aider {AIDER.version} alone, one whole-file edit (scripted model server), "
                          f"median of {rounds}", aider_s, "s"),
        Row("real_aider", "'docket go' of that one task, whole process (pin, check twice, integrate, seal)",
            go_s, "s", ratio=go_s / aider_s),
        Row("real_aider", "docket's overhead per task (docket go - aider alone)", overhead, "s",
            goal=f"< {GOAL_S:.0f} s", passed=overhead < GOAL_S),
    ]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall time of one whole process, which must succeed."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} exited {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
    return seconds
