"""startup_change: `docket status` and `docket task plan` of this tree against an earlier commit's, whole processes.

Both versions run from the same Python and the same installed libraries, each from a view of its own sources
(``bench/.work/versions/<name>/docket``, links into a checkout of that commit, as the installed package lays them
out), so the one difference is docket's code. Rounds interleave the versions (a burst of load slows both alike);
each figure is the median of wall time and of CPU time (user + system of the process and its children). Bytecode is
cached for both, as an installed docket does.

    python -m bench startup_change                  # against BEFORE (the commit before issue 36's change)
    DOCKET_BENCH_BEFORE=<commit> python -m bench startup_change
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .common import WORK, Row, log, median, remove, temp_dir, timed_process

ROOT = Path(__file__).resolve().parents[1]
BEFORE = os.environ.get("DOCKET_BENCH_BEFORE", "f5d8aba")  # the last commit before the packages and codes changed
FOLDERS = {"domain": "domain", "projections": "projections", "adapters": "adapters", "cli": "cli"}
MAIN = "import sys\nfrom docket.cli.app import main\nsys.argv[0] = 'docket'\nsys.exit(main())\n"


def _view(name: str, source: Path) -> Path:
    """A folder holding ``docket/`` laid out as installed, its parts links into source."""
    view = WORK / "versions" / name
    remove(view)
    package = view / "docket"
    package.mkdir(parents=True)
    for part in (source / "cli" / "_root").iterdir():
        if part.suffix == ".py":
            (package / part.name).symlink_to(part)
    for folder in FOLDERS.values():
        (package / folder).symlink_to(source / folder)
    return view


def _checkout(commit: str) -> Path:
    """The sources of commit, extracted once (git archive: no work tree of the repository is touched)."""
    target = WORK / "versions" / f"src-{commit}"
    if not (target / "domain").is_dir():
        remove(target)
        target.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target



def run(quick: bool) -> list[Row]:
    return measure(8 if quick else 20)


def measure(rounds: int) -> list[Row]:
    views = {"before": _view("before", _checkout(BEFORE)), "now": _view("now", ROOT)}
    base = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_") and k != "PYTHONDONTWRITEBYTECODE"}
    base.update(GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com", GIT_COMMITTER_NAME="bench",
                GIT_COMMITTER_EMAIL="bench@example.com")
    envs = {name: {**base, "PYTHONPATH": str(view), "PYTHONPYCACHEPREFIX": str(WORK / "pycache" / name)}
            for name, view in views.items()}
    folders = {}
    try:
        for name, env in envs.items():  # a repository with a ledger and one run for each version
            folder = folders[name] = temp_dir()
            subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
            subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "start"], cwd=folder, env=env, check=True)
            for argv in (["init"], ["run", "open", "--target", "main", "--goal", "bench", "--id", "r1"]):
                subprocess.run([sys.executable, "-c", MAIN, *argv], cwd=folder, env=env, check=True,
                               stdout=subprocess.DEVNULL)
        commands = {"status": ["status"], "plan": ["task", "plan", "r1", "--title", "a task"]}
        for name, env in envs.items():  # warm-up: .pyc written, files in the page cache
            for argv in commands.values():
                timed_process([sys.executable, "-c", MAIN, *argv], folders[name], env)
        wall: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for command, argv in commands.items():
                for name, env in envs.items():
                    w, c = timed_process([sys.executable, "-c", MAIN, *argv], folders[name], env)
                    wall.setdefault((command, name), []).append(w)
                    cpu.setdefault((command, name), []).append(c)
    finally:
        for folder in folders.values():
            remove(folder)
    load = os.getloadavg()[0]
    rows = []
    for command in commands:
        before, now = median(wall[(command, "before")]), median(wall[(command, "now")])
        cpu_before, cpu_now = median(cpu[(command, "before")]), median(cpu[(command, "now")])
        log(f"startup_change: docket {command}: wall {now * 1000:.0f} ms now, {before * 1000:.0f} ms at {BEFORE}; "
            f"CPU {cpu_now * 1000:.0f} ms now, {cpu_before * 1000:.0f} ms at {BEFORE} (load {load:.1f})")
        rows += [
            Row("startup_change", f"'docket {' '.join(commands[command])}' at {BEFORE}, whole process, wall, median of "
                f"{rounds}", before, "s"),
            Row("startup_change", f"the same, this tree (interleaved), wall", now, "s", ratio=now / before),
            Row("startup_change", f"the same, CPU (user + system) at {BEFORE}", cpu_before, "s"),
            Row("startup_change", f"the same, CPU (user + system), this tree; goal: no slower (load {load:.1f})",
                cpu_now, "s", ratio=cpu_now / cpu_before, goal="<= 1.05x", passed=cpu_now <= cpu_before * 1.05),
        ]
    return rows
