"""A write command imports and builds only what it uses (the startup benchmark's 'docket task plan')."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

# Run inside a fresh interpreter, as `docket task plan` is; prints what the process ended up holding.
PROBE = """\
import contextlib, io, json, os, sys
from docket.cli.app import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(['task', 'plan', 'r1', '--title', 'a task', '--json'])
event_modules = sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('docket.domain.events.'))
from docket.domain import events
print(json.dumps({
    'code': code,
    'appended': [e['type'] for e in json.loads(out.getvalue())['events']],
    'modules': sorted(m for m in sys.modules if m.startswith('docket.cli.') or m.split('.')[0] in HEAVY),
    'effect_machinery': sorted(m for m in sys.modules if m in EFFECT_MACHINERY),
    'validators_built': sorted(name for name, cls in events.EVENT_TYPES.items() if cls.__pydantic_complete__),
    'process_identity_built': events.ProcessIdentity.__pydantic_complete__,
    'event_modules': event_modules,
    'absent_loaded': sorted(m for m in ABSENT if m in sys.modules),
    'plugins_env': sorted(k for k in os.environ if k.startswith('PYDANTIC')),
}))
"""
HEAVY = {"dulwich", "sqlite_utils", "psutil", "anyio", "shtab"}
# pydantic's plugin loader finds plugins through importlib.metadata, which imports email, zipfile and csv:
# docket loads no pydantic plugins (docket/pydantic_plugins.py), so a write command imports none of them. Nor
# strptime's module (calendar, the locale's regular expressions): docket's own timestamps are read without it. Nor
# shutil (with zlib, bz2, lzma), which argparse imports to learn the terminal's width (cli/console/parsing.py).
# Nor the redaction's patterns (domain/containment/processes.py; the run aggregate needs only domain/containment/process_identity.py), nor signal
# (for the crash points, which a write command not under a crash test never fires).
ABSENT = {"importlib.metadata", "email", "zipfile", "csv", "_strptime", "calendar", "shutil", "bz2", "lzma",
          "docket.domain.containment.processes", "signal"}
EFFECT_MACHINERY = {"docket.domain.effects", "docket.adapters.service_layer.kernel.effector", "docket.adapters.service_layer.kernel.intents"}


def test_task_plan_imports_its_own_command_and_builds_only_the_event_types_it_meets(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    probe = (f"HEAVY = {sorted(HEAVY)!r}\nEFFECT_MACHINERY = {sorted(EFFECT_MACHINERY)!r}\nABSENT = {sorted(ABSENT)!r}\n"
             + PROBE)
    done = json.loads(subprocess.run([sys.executable, "-c", probe], cwd=docket.cwd, env=docket.env,
                                     capture_output=True, text=True, check=True).stdout)
    assert done["code"] == 0
    # No other noun's module: parsing one command builds (and imports) that command's parser only.
    assert done["modules"] == ["docket.cli.app", "docket.cli.console", "docket.cli.console.context",
                               "docket.cli.console.output", "docket.cli.console.parsing",
                               "docket.cli.console.recorded", "docket.cli.steps", "docket.cli.steps.task"]
    assert done["absent_loaded"] == []
    assert done["plugins_env"] == []  # nothing set in the environment agents and checks inherit
    assert done["effect_machinery"] == []  # planning a task records no intent: nothing of the effector's
    # Validators are built on first use: for the genesis, the run's own events and the event appended, no others.
    with sqlite3.connect(docket.ledger) as db:
        genesis = db.execute("SELECT topic FROM stored_events WHERE rowid = 1").fetchall()
        run_stream = db.execute("SELECT topic FROM stored_events WHERE originator_id = 'run:r1'").fetchall()
    met = {topic for (topic,) in genesis + run_stream} | set(done["appended"])
    assert set(done["validators_built"]) <= met
    assert done["process_identity_built"] is False
    # Only the event modules of the types it met (read before the probe asks for the whole catalogue).
    assert done["event_modules"] == ["base", "ledger", "run", "task"]


# A distribution that declares a pydantic plugin: pydantic would import it at the first validator built and hand it
# every validation's input. Importing it leaves a mark; handing it an input leaves another.
SPY = '''\
import os

MARK = os.path.join(os.path.dirname(__file__), "marks")

def _mark(what):
    with open(MARK, "a") as f:
        f.write(what + "\\n")

_mark("imported")

class _Spy:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        _mark("asked:" + str(schema_type_path.name))
        return None, None, None

plugin = _Spy()
'''


def _plant_plugin(folder):
    folder.mkdir()
    (folder / "spy_plugin.py").write_text(SPY)
    info = folder / "spy_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: spy-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nspy = spy_plugin:plugin\n")
    return folder / "marks"


def test_a_write_command_loads_no_pydantic_plugin_an_installed_distribution_declares(docket, tmp_path):
    marks = _plant_plugin(tmp_path / "plugins")
    env = {**docket.env, "PYTHONPATH": str(tmp_path / "plugins")}
    # The plugin is really installed: a Python validating one model loads it and hands it the model.
    subprocess.run([sys.executable, "-c", "from pydantic import BaseModel\nclass M(BaseModel):\n    x: int\nM(x=1)"],
                   env=env, check=True)
    assert marks.read_text().split() == ["imported", "asked:M"]
    marks.unlink()
    docket.env = env
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    planned = docket("task", "plan", "r1", "--title", "a task", "--json")
    assert json.loads(planned.stdout)["events"][0]["type"].startswith("TaskPlanned.")
    assert not marks.exists()  # neither imported nor handed an event
