"""requests: what an agent's request to docket costs, through its worker generation's channel.

The channel `docket go` serves each agent it launches (a Unix socket in the worker's folder, its peer checked by
the kernel's credentials, each request decided in a write transaction of the ledger), here served in this process
on a real ledger file. Sides, taking turns: a progress report sent over the socket by a process that stays up (as
`docket mcp` does for each tool call), and the same report sent by `docket request progress` (a process per request,
as an agent without MCP runs it). Each report has its own id, so each is recorded. Also: the same report sent again
(answered from the ledger, nothing written). Goal: a recorded request over the channel in <= 50 ms.
"""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import count
from pathlib import Path

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.use_cases.requests import GenerationRequests
from docket.adapters.service_layer.use_cases.tasks import plan_task
from docket.adapters.service_layer.use_cases.worker_generations import register_worker
from docket.adapters.world.clock import FixedClock
from docket.adapters.world.processes.request_channel import RequestChannel, descends_from, send
from docket.domain import requests as rq
from docket.domain import run as run_aggregate

from .common import Row, interleaved, log, median, remove, temp_dir

GOAL_MS = 50
T0 = "2026-01-01T00:00:00.000Z"
REPOSITORY = "/bench/repo/.git"


def _ledger(path: Path) -> Ledger:
    ledger = Ledger(path)
    clock = FixedClock(T0)
    ledger.initialise(T0, "repo-" + "1" * 32, REPOSITORY)
    ledger.decide(lambda now: run_aggregate.open_run("r1", "i1", "g", "main", None, REPOSITORY, now), T0)
    opened = ledger.get(run_aggregate.apply, run_aggregate.stream_of("r1"))
    ledger.decide(lambda now: run_aggregate.record_base_pin(opened, "i1", now, commit="1" * 40), T0)
    plan_task(ledger, clock, "r1", "t1", "task t1")
    register_worker(ledger, clock, "r1", "w1", "implementer", "t1")
    return ledger


def _start_time(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat[stat.rindex(b")") + 2:].split()[19].decode()


def run(quick: bool) -> list[Row]:
    rounds = 10 if quick else 30
    folder = temp_dir()
    ledger = _ledger(folder / "ledger.sqlite")
    me, started = os.getpid(), _start_time(os.getpid())
    requests = GenerationRequests(ledger, FixedClock(T0), rq.Binding("r1", "t1", "w1", 1), rq.InboxPolicy())
    (folder / "w1").mkdir()
    channel = RequestChannel(folder / "w1" / "docket.sock", requests, lambda peer: descends_from(peer, me, started))
    ids = count(1)
    env = {**os.environ, "DOCKET_REQUESTS": str(channel.path)}

    def socket_report() -> None:
        reply = send(channel.path, {"kind": "progress", "request_id": f"s{next(ids)}", "summary": "half way"})
        assert reply["status"] == "recorded", reply

    def cli_report() -> None:
        subprocess.run([sys.executable, "-m", "docket", "request", "progress", "half way", "--id", f"c{next(ids)}"],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def repeated() -> None:
        reply = send(channel.path, {"kind": "progress", "request_id": "s1", "summary": "half way"})
        assert reply["status"] == "recorded", reply

    try:
        socket_report()  # warm-up: the channel's own ledger connection is opened on its first request
        times = interleaved({"socket": socket_report, "cli": cli_report, "again": repeated}, rounds)
    finally:
        channel.close()
        ledger.close()
        remove(folder)
    sock, cli, again = (median(times[k]) * 1000 for k in ("socket", "cli", "again"))
    log(f"requests: over the socket {sock:.1f} ms, docket request {cli:.1f} ms, the same again {again:.1f} ms")
    return [
        Row("requests", f"a progress report recorded, over the channel's socket, median of {rounds}", sock, "ms",
            goal=f"<= {GOAL_MS} ms", passed=sock <= GOAL_MS),
        Row("requests", f"the same through 'docket request progress' (a process each), median of {rounds}", cli,
            "ms", ratio=cli / sock),
        Row("requests", f"a report sent again (its reply from the ledger, nothing written), median of {rounds}",
            again, "ms", ratio=again / sock),
    ]
