"""Reconcile: the ledger's workers and run supervisions against this machine's processes.

``docket reconcile`` (and ``docket go`` before it resumes) reports each
difference as a Finding; with apply, it converges: a worker whose process is
positively gone is recorded as exited, one whose supervisor is gone is stopped, a
process docket started that no running worker accounts for is stopped, and a
supervision whose docket process is gone is ended at its last sign of life.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ....domain import lease as lease_aggregate
from ....domain import run as run_aggregate
from ....domain import worker as worker_aggregate
from ....domain.kernel.values import to_ms
from ...world.clock import Clock
from .leases import worktree_resource
from ..kernel.ledger import Ledger
from .runs import load_run
from .worker_generations import load_worker
from .workers import exit_worker, finish_stop, request_stop

if TYPE_CHECKING:
    from ....domain.containment.processes import ProcessIdentity
    from ....domain.events import Event
    from ..kernel.ports import EffectorPort, ProcessPort

__all__ = ["Finding", "LAUNCH_FOLDERS", "reconcile_supervisions", "reconcile_workers"]

LAUNCH_FOLDERS = ("worktrees", "executions", "workers", "checks", "hooks", "setup")  # under docket's folder: where launches run


@dataclass(frozen=True)
class Finding:
    """One thing reconcile found between the ledger's workers and this machine's processes.

    gone: the ledger says running, the process is positively gone (recorded as exited, cause unknown).
    unsupervised: the process runs, but the docket process that supervised it is gone (stopped).
    unknown-process: a process docket started for this ledger that no running worker accounts for (stopped).
    supervisor-gone: a run's supervision whose docket process is gone (ended at its last sign of life).
    orphan: a process adopted by init, working in a folder where docket launches (killed).
    """

    kind: str
    worker_id: str | None
    generation: int | None
    pid: int
    detail: str
    applied: str | None = None  # what --apply did


def reconcile_workers(ledger: Ledger, clock: Clock, effector: EffectorPort, running: Sequence[str], ledger_path: Path, *,
                      apply: bool) -> list[Finding]:
    """Compare the workers the ledger thinks are running (ids given) with the processes; with apply, converge."""
    from ..kernel.launcher import HOST_MARK, LAUNCH_MARK

    processes = effector.ports.processes
    findings: list[Finding] = []
    known_groups: set[tuple[str, int]] = set()
    for worker_id in running:
        worker = load_worker(ledger, worker_id)
        if worker.status != "running" or worker.process is None:
            continue
        p = worker.process
        liveness = processes.liveness(p)
        group = processes.group_liveness(p)
        if liveness == "dead" and group != "alive":
            finding = Finding("gone", worker_id, worker.generation, p.pid, "its process is gone")
            if apply:
                cause = worker_aggregate.exit_cause(worker)  # stopped, if a stop was asked for; else unknown
                exit_worker(ledger, clock, worker_id, worker.generation, cause=cause, exit_code=None,
                            signal=None, log_path=Path(worker.log_path) if worker.log_path else None,
                            started_at=worker.launched_at)
                finding = applied(finding, f"recorded as exited (cause {cause})")
            findings.append(finding)
            continue
        known_groups.add((p.boot_id, p.pgid))
        supervisor = worker.supervisor
        if liveness == "dead" or (supervisor is not None and processes.liveness(supervisor) == "dead"):
            why = ("its process ended but left processes in its group" if liveness == "dead"
                   else f"its supervisor (pid {supervisor.pid}) is gone" if supervisor else "it has no supervisor")
            finding = Finding("unsupervised", worker_id, worker.generation, p.pid, why)
            if apply:
                intent_id = request_stop(ledger, clock, worker_id, "supervisor-gone")
                result = finish_stop(ledger, clock, effector, worker_id, intent_id) if intent_id else "unknown"
                finding = applied(finding, f"stop {result}")
            findings.append(finding)
    # the processes first, the ledger after: a process found was started before the ledger is read, so a launch
    # recorded meanwhile (its intent, then its worker's process) is read as the ledger now has it
    marked = [(identity, env) for identity, env in processes.find_marked("DOCKET_LEDGER", str(ledger_path))
              if env.get(LAUNCH_MARK) is not None and (identity.boot_id, identity.pgid) not in known_groups]
    pending_launches = {pending.intent.intent_id for pending in ledger.pending_intents(after=0)
                        if pending.intent.type_name().startswith("WorkerLaunchRequested")} if marked else set()
    here = processes.this_host()[0]
    for identity, env in marked:
        launch = env[LAUNCH_MARK]
        if env.get(HOST_MARK, here) != here:
            continue  # started by another host's supervisor (two host ids on one machine): that host's to stop
        if launch in pending_launches or _accounted_for(ledger, env, identity):
            continue  # a launch under way, or another run's running worker: its own supervisor's, not ours
        finding = Finding("unknown-process", env.get("DOCKET_WORKER"), _int(env.get("DOCKET_GENERATION")),
                          identity.pid, f"launch {launch}, process group {identity.pgid}")
        if apply:
            after = processes.terminate_group(identity, grace=2.0)
            finding = applied(finding, "stopped" if after == "dead" else f"stop unknown ({after})")
        findings.append(finding)
    for identity in processes.find_orphans_in(_launch_places(ledger_path)):
        finding = Finding("orphan", None, None, identity.pid, "a process left in a workspace, execution or worker "
                          "folder by a launch whose docket is gone (no DOCKET_* mark needed)")
        if apply:
            after = processes.kill(identity)
            finding = applied(finding, "killed" if after == "dead" else f"kill unknown ({after})")
        findings.append(finding)
    return findings


def _accounted_for(ledger: Ledger, env: dict[str, str], identity: ProcessIdentity) -> bool:
    """Whether the ledger has the worker the process names running (or launching) in that very process group, as
    its WorkerLaunched recorded it: a worker of a run this reconcile was not asked about. A mark naming a worker of
    another group, or one with no process recorded, accounts for nothing."""
    worker_id = env.get("DOCKET_WORKER")
    if not worker_id:
        return False
    try:
        worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
    except ValueError:  # a mark is the process's word: a name docket never gives accounts for nothing
        return False
    if worker is None or worker.status not in ("launching", "running") or str(worker.generation) != env.get(
            "DOCKET_GENERATION"):
        return False
    # a launch not yet recorded is a pending launch intent (above): without a recorded process nothing accounts
    return worker.process is not None and (worker.process.boot_id, worker.process.pgid) == (identity.boot_id,
                                                                                           identity.pgid)


def _launch_places(ledger_path: Path) -> list[Path]:
    """Where launches run: docket's own folders beside the ledger, and the repository's workspaces and executions
    in the data folder (a [workspace] root elsewhere is not looked at: its launches' orphans are found by their
    DOCKET_* marks only)."""
    from ...world.files.paths import executions_root, workspaces_root

    docket_dir = ledger_path.parent
    places = [docket_dir / folder for folder in LAUNCH_FOLDERS]
    if docket_dir.name == "docket":  # the default place, <git common dir>/docket: the repository is known
        places += [workspaces_root(docket_dir.parent), executions_root(docket_dir.parent)]
    return places


def applied(finding: Finding, what: str) -> Finding:
    from dataclasses import replace

    return replace(finding, applied=what)


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and len(text) < 16 else None


def reconcile_supervisions(ledger: Ledger, clock: Clock, processes: ProcessPort, runs: Sequence[str],
                           workers_of: Callable[[str], Iterable[str]], *, apply: bool) -> list[Finding]:
    """Supervisions of open runs whose docket process is positively gone: with apply, ended at its last sign of
    life (its last lease grant or renewal), so the time since is not billed. ``workers_of(run_id)`` lists the
    run's worker ids."""
    findings: list[Finding] = []
    for run_id in runs:
        run = load_run(ledger, run_id)
        for supervision in run.supervisions:
            if processes.liveness(supervision.supervisor) != "dead":
                continue
            seen = [supervision.since]
            for worker_id in workers_of(run_id):
                worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
                if worker is None or worker.supervisor != supervision.supervisor or worker.task_id is None:
                    continue
                lease = ledger.get(lease_aggregate.apply,
                                   lease_aggregate.stream_of(worktree_resource(run_id, worker.task_id)))
                if lease is not None and lease.renewed_at is not None:
                    seen.append(lease.renewed_at)
            last_seen = max(seen, key=to_ms)
            finding = Finding("supervisor-gone", None, None, supervision.supervisor.pid,
                              f"run {run_id}: supervision {supervision.supervision_id} last seen at {last_seen}")
            if apply:
                def end(now: str, supervision_id: str = supervision.supervision_id, run_id: str = run_id,
                        last_seen: str = last_seen) -> list[Event]:
                    return run_aggregate.unsupervised(load_run(ledger, run_id), supervision_id, now,
                                                      last_seen=last_seen)

                ledger.decide(end, clock.now())
                finding = applied(finding, "ended there: the time since is not billed")
            findings.append(finding)
    return findings
