"""docket status while a run goes on: the views are behind the ledger, and status catches them up. That needs
neither the ledger's application module nor eventsourcing (the lock timeout's default no longer comes with them:
it did, and cost a status during a run about half its CPU), nor the event models and pydantic: the views' handlers
name event types by their stored names and the intents view knows each type's role from the catalogue's table. Nor
random and secrets, which the clock's id source took (about 5 ms of every status), nor PostgreSQL's driver."""

from __future__ import annotations

import subprocess
import sys

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.use_cases.runs import pause_run
from docket.adapters.world.clock import FixedClock

PROBE = ("import sys, io, contextlib\n"
         "from docket.cli.app import main\n"
         "with contextlib.redirect_stdout(io.StringIO()):\n"
         "    code = main(['status', 'r1', '--json'])\n"
         "heavy = {'eventsourcing', 'dulwich', 'sqlite_utils', 'psutil', 'anyio', 'pydantic', 'psycopg', 'random',\n"
         "         'secrets'}\n"
         "print(code, sorted({m.split('.')[0] for m in sys.modules} & heavy),\n"
         "      'docket.adapters.service_layer.kernel.ledger' in sys.modules)\n")


def test_status_catching_up_the_views_does_not_load_the_ledger_application(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("status", "r1")  # the views at the head
    ledger = Ledger(docket.ledger)
    pause_run(ledger, FixedClock("2099-01-01T00:00:00.000Z"), "r1", "a moment")  # the views are behind now
    ledger.close()
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=docket.cwd, env=docket.env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "0 [] False"
    assert docket("status", "r1", "--json").json()["run"]["status"] == "paused"  # it did catch up
