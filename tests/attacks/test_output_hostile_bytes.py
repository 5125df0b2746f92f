"""Attack: an agent and the check running its code end their output with NUL, invalid UTF-8, a lone CR, ANSI
escapes and a bidi override.

One NUL at the end of an agent's output made its WorkerExited unrecordable: `docket go` ended in exit 70, and every
resume and `docket reconcile --apply` read the same log again and failed the same way, for good. Output becomes text
in one place (domain/containment/processes.py, output_text): decoded, redacted, NUL escaped (``\\x00``: no event can hold it);
the other characters are kept as printed, for --json, and every renderer escapes them. No event holds a NUL, the run
finishes and resumes, and the honest task of the same run lands.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.attacks.attacker_world import attacker_world, feedback, honest_and, results, task

# mine.py prints hostile bytes when the check runs it; on a first attempt it also exits 1 (the check fails, and its
# hostile tail becomes the feedback of the retry)
_PRINTS = "import os; os.write(1, bytes([99, 104, 101, 99, 107, 32, 0, 255, 27, 91, 51, 49, 109, 13, 0]))"
TASKS = honest_and(task("noisy", "print hostile bytes", "Be noisy.",
                              f"first attempt: write mine.py: {_PRINTS}; raise SystemExit(1)",
                              f"write mine.py: {_PRINTS}", "HOSTILE-OUTPUT"))

CHECK = f'''
[checks.talks]
command = ["{sys.executable}", "-c", "import os, runpy; os.path.exists('mine.py') and runpy.run_path('mine.py')"]
timeout = "1m"
'''

_RAW = ("\x00",)  # what no event can hold; the rest is kept as printed, and escaped by every renderer


def _raw_strings(value: object) -> list[str]:
    """Every string in an event's payload that holds a character docket must have escaped (NUL)."""
    if isinstance(value, str):
        return [value] if any(c in value for c in _RAW) else []
    if isinstance(value, dict):
        return [s for item in value.values() for s in _raw_strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _raw_strings(item)]
    return []


def test_hostile_output_bytes_are_escaped_the_run_finishes_and_resumes_and_honest_work_lands(tmp_path: Path):
    world = attacker_world(tmp_path, TASKS, extra=CHECK)

    done = world.go("r1", "--parallel", "2")
    assert done.returncode == 0, done.stderr
    assert results(done) == {"greet": "delivered", "noisy": "delivered"}
    assert world.file_at("main", "greet.py") == 'print("hello")\n'

    events = world.json("log")["events"]
    assert [s[:200] for e in events for s in _raw_strings(e["payload"])] == []
    exits = [e["payload"] for e in events if e["type"].startswith("WorkerExited")
             and e["payload"]["worker_id"] == "r1.noisy"]
    assert exits and all("last line\\x00" in x["tail"] and "\x1b[31mred" in x["tail"] and "\u202eevil" in x["tail"]
                         and "\ufffd" in x["tail"] for x in exits)  # NUL escaped; the rest as printed
    (first,) = [f for f in feedback(world, "noisy")]
    assert "check \\x00\ufffd" in first
    shown = world.run("status", "r1").stdout  # a renderer escapes what the event keeps as printed
    assert "\x1b" not in shown and "\u202e" not in shown

    for command in (("go", "--resume", "r1", "--json"), ("reconcile", "--apply"), ("verify",)):
        again = world.run(*command)
        assert again.returncode in (0, 6), (command, again.stderr)  # never 70: nothing is left unrecordable
