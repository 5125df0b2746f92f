"""startup: a write command as a whole process, against a bare Python that imports what every write needs.

In a fresh git repository holding a ledger and one run, ``docket task plan``
(parse, open the ledger, decide and append one event, bring the views up to
it, print) is timed as a whole process, interleaved round by round with
``python -c 'from pydantic import BaseModel; import eventsourcing.sqlite'``
(the floor: any write needs those two) and ``python -c pass``. Also shown:
``docket status`` on that small ledger (views current) and ``docket --version``.

Every process may cache bytecode (in bench/.work/pycache, written by the warm-up
round) as an installed docket does: with PYTHONDONTWRITEBYTECODE set, as in some
shells, docket's own modules (an editable install has no .pyc) would be compiled
from source on every start while the floor's site-packages would not, which is
about 30 ms of compiling charged to docket alone.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from .common import BIN, WORK, Row, log, median, remove, temp_dir, timed_process

GOAL = 1.5
FLOOR = [sys.executable, "-c", "from pydantic import BaseModel; import eventsourcing.sqlite"]
# For information: the floor plus one model validated, which imports what any pydantic validator needs (and
# the floor's lazy `BaseModel` does not): the share of a write command's start that is pydantic's, not docket's.
MODEL_FLOOR = [sys.executable, "-c", "from pydantic import BaseModel; import eventsourcing.sqlite\n"
               "class Model(BaseModel):\n    x: int\nModel(x=1)"]



def run(quick: bool) -> list[Row]:
    return measure(10 if quick else 30)


def measure(rounds: int) -> list[Row]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKET_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(WORK / "pycache"), GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")
    folder = temp_dir()
    try:
        subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "start"], cwd=folder, env=env, check=True)
        docket = str(BIN / "docket")
        subprocess.run([docket, "init"], cwd=folder, env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([docket, "run", "open", "--target", "main", "--goal", "bench", "--id", "r1"], cwd=folder,
                       env=env, check=True, stdout=subprocess.DEVNULL)
        commands = {
            "plan": [docket, "task", "plan", "r1", "--title", "a task"],
            "floor": FLOOR,
            "model_floor": MODEL_FLOOR,
            "pass": [sys.executable, "-c", "pass"],
            "status": [docket, "status"],
            "version": [docket, "--version"],
        }
        for argv in commands.values():  # warm-up: files in the page cache, .pyc written
            timed_process(argv, folder, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):  # interleaved: a burst of load slows every figure of a round alike
            for name, argv in commands.items():
                wall, used = timed_process(argv, folder, env)
                times[name].append(wall)
                cpu[name].append(used)
        with sqlite3.connect(folder / ".git" / "docket" / "ledger.sqlite") as db:
            planned = db.execute("SELECT count(*) FROM stored_events WHERE topic LIKE 'TaskPlanned.%'").fetchone()[0]
        if planned != rounds + 1:  # each timed plan (and the warm-up's) appended its event
            raise RuntimeError(f"startup: {planned} tasks planned, expected {rounds + 1}")
    finally:
        remove(folder)
    t = {name: median(xs) for name, xs in times.items()}
    c = {name: median(xs) for name, xs in cpu.items()}
    ratio = t["plan"] / t["floor"]
    log(f"startup: task plan {t['plan']:.3f} s; floor {t['floor']:.3f} s ({ratio:.2f}x); "
        f"python -c pass {t['pass']:.3f} s; status {t['status']:.3f} s; "
        f"CPU: task plan {c['plan']:.3f} s, floor {c['floor']:.3f} s ({c['plan'] / c['floor']:.2f}x)")
    return [
        Row("startup", f"'python -c pass', median of {rounds}", t["pass"], "s"),
        Row("startup", f"floor: python importing pydantic.BaseModel + eventsourcing.sqlite, median of {rounds}",
            t["floor"], "s"),
        Row("startup", f"'docket task plan' (one event appended), median of {rounds}", t["plan"], "s",
            ratio=ratio, goal=f"< {GOAL}x floor", passed=ratio < GOAL),
        Row("startup", f"(information) the same, CPU time (user + system) of 'docket task plan' against the floor's, "
            f"median of {rounds}", c["plan"], "s", ratio=c["plan"] / c["floor"]),
        Row("startup", f"(information) the floor plus one pydantic model validated, median of {rounds}",
            t["model_floor"], "s", ratio=t["model_floor"] / t["floor"]),
        Row("startup", f"'docket status', small ledger, views current, median of {rounds}", t["status"], "s",
            ratio=t["status"] / t["pass"]),
        Row("startup", f"'docket --version', median of {rounds}", t["version"], "s", ratio=t["version"] / t["pass"]),
    ]
