"""The board: a run as its live view shows it, one line per task in plan order, derived from the views alone.

Each task's state is the furthest thing the views say about it:

- delivered: its step of the merge queue was verified and the target was moved (IntegrationCompleted) to that step's
  merge or a later verified step's (each verified step merges into the one before it);
- merged (target not moved): verified on the integration ref, but the target does not hold it (yet);
- verifying, merging: its step is merged and its tree re-checked, or its merge is being recorded;
- conflicted (with its paths), unmergeable, rejected (a required check failed on the merged tree), merge failed:
  its step ended short of the target; a later generation of its worker (a repair) supersedes that step;
- passed, failed: TaskFinished;
- stopped: the run closed (aborted, budget-limited, failed) before the task finished;
- checking: its candidate is being pinned, or a check runs on it;
- launching, running: its worker's current generation;
- queued: the current generation was judged and failed (feedback recorded), or nothing has started and nothing
  it depends on is unfinished (in a run `docket go` planned; in any other, nothing starts it: not started);
- awaiting-input: its current generation asked a question no one has answered yet (running, or ended asking);
- exited: the generation ended, and nothing has judged it yet;
- waiting: something it depends on (the run's plan) has not passed yet.

A task's note says why its state is what it is, and the board's attention what the user must act on: a target
the ledger says was not moved (checked out, moved by someone else), candidates awaiting approval, a task whose step
ended short of the target. `docket status` words the integration the same way (the functions below).

The board's outcome is what the run came to for a person (domain/reports/outcome.py: delivered, partly delivered (n of m),
nothing delivered, stopped, waiting for you, running), from the tasks the target holds (``delivered_tasks``) and
what waits for a person (``run_outcome_of``); `docket status`, the web pages and `docket go` word it the same way.

Strings are the ledger's exact text (and a running worker's last line of output as its log holds it, read through
``tail``: a projection reads no file), bounded: a renderer escapes them for a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ..domain.reports.outcome import CLOSED_STATUSES, Outcome, run_outcome
from ..domain.kernel.values import to_ms
from . import approvals, candidates, checks, inbox, integration_steps, integrations, leases, runs, tasks, usage, workers
from .query import ViewsConnection

__all__ = ["CLOSED", "Board", "TaskLine", "attention_and_wait", "awaiting_approval", "current_steps",
           "delivered_steps", "delivered_tasks", "driver_alive", "integration_summary", "overlap_lines",
           "overlap_warnings", "run_attention", "run_board", "run_outcome_of", "step_note", "step_state", "step_words"]

CLOSED = CLOSED_STATUSES  # the run statuses that end it (domain/reports/outcome.py)
PATHS_SHOWN = 3  # conflicting paths named; the rest counted
OVERLAPS_SHOWN = 10  # same-path warnings shown; the rest counted
NAME_CHARS = 120  # of each path or task named
MESSAGE_CHARS = 600  # of a message the ledger recorded
UNDER_WAY = frozenset({"waiting", "merging", "merged", "verified"})  # every other step status ended short of the target
STEP_STATES = {"merging": "merging", "merged": "verifying", "failed": "merge failed"}


@dataclass(frozen=True)
class TaskLine:
    task_id: str
    title: str
    state: str
    generation: int | None  # the worker's current generation (None: never registered)
    elapsed_ms: int | None  # how long that generation's process ran, or has run until now
    last_line: str | None  # its last non-blank line of output
    cycles: int | None  # generations judged: failed ones, and the one that finished the task
    candidate: str | None  # the task's latest candidate, short
    checks: str | None  # its checks' latest attempts, e.g. "1/2 passed, 1 running"
    depends_on: tuple[str, ...]
    step: str | None  # its step in the merge queue, if it has one
    note: str | None = None  # why the state is what it is (a step's conflicting paths, why the target was not moved)
    unsandboxed: bool = False  # its worker's current generation ran without a sandbox (sandbox = "off")


@dataclass(frozen=True)
class Board:
    run_id: str
    goal: str
    status: str
    closed: bool
    target_branch: str
    budget_ms: int | None
    used_ms: int
    remaining_ms: int | None
    integration: str  # the integration's status, with its verified steps when it has begun
    target_commit: str | None  # where integration moved the target
    receipt_sealed: bool
    receipt_sha256: str | None
    tasks: tuple[TaskLine, ...]
    attention: tuple[str, ...] = ()  # what the user must act on, as the ledger (and the approval setting) says
    # what its agents reported they spent (None: nothing reported of it), and the run's limits on it (None: none)
    cost_micro_usd: int | None = None
    tokens: int | None = None
    max_cost_micro_usd: int | None = None
    max_tokens: int | None = None
    outcome: Outcome | None = None  # what the run came to (None: the run's line alone, without_tasks)

    def document(self) -> dict[str, Any]:
        return asdict(self) | {"tasks": [asdict(t) | {"depends_on": list(t.depends_on)} for t in self.tasks],
                               "outcome": self.outcome.document() if self.outcome is not None else None}


def run_board(conn: ViewsConnection, run_id: str, now: str, *,
              tail: Callable[[str], str | None] | None = None,
              approval_required: Callable[[], bool] = lambda: False, with_tasks: bool = True) -> Board | None:
    """The run's board as of now from the views' tables (None: no such run). ``tail(log_path)`` reads a running
    worker's last line of output from its log (default: none is read; the line the views recorded is shown);
    ``approval_required()`` says whether docket.toml requires approval (asked only when a candidate could await
    it). Without ``with_tasks``, the run's line alone (no task lines, no attention): what costs the same for a run of
    ten tasks and of a thousand, for a caller that only follows the run's status."""
    run = runs.get_run(conn, run_id)
    if run is None:
        return None
    run = runs.with_budget(run, now)
    closed = run["status"] in CLOSED
    spent = usage.spend_of_run(conn, run_id)
    spend = dict(cost_micro_usd=spent["cost_micro_usd"], tokens=spent["tokens"],
                 max_cost_micro_usd=run["max_cost_micro_usd"], max_tokens=run["max_tokens"])
    if not with_tasks:
        integration = integrations.integration_of(conn, run_id)
        return Board(run_id=run_id, goal=run["goal"], status=run["status"], closed=closed,
                     target_branch=run["target_branch"], budget_ms=run["budget_ms"], used_ms=run["used_ms"],
                     remaining_ms=run["remaining_ms"], integration=integration_summary(integration),
                     target_commit=integration["final_commit"],
                     receipt_sealed=integration["receipt_sha256"] is not None,
                     receipt_sha256=integration["receipt_sha256"], tasks=(), **spend)
    depends = {t["task_id"]: tuple(t.get("depends_on") or ()) for t in json.loads(run["plan"] or "{}").get("tasks", [])}
    task_rows = tasks.tasks_of(conn, run_id)
    results = {t["task_id"]: t["result"] for t in task_rows}
    worker_of = {w["task_id"]: w for w in workers.workers_of(conn, run_id) if w["task_id"]}  # the last one wins
    latest = {c["task_id"]: c for c in candidates.candidates_of(conn, run_id)
              if not (c["boundary"] or "").startswith("integration-")  # the queue's own pins are not a task's work
              and c["boundary"] != "base-tests"}  # nor the base-tests trees of its candidates
    checks_by = _latest_checks(checks.checks_of_run(conn, run_id))
    integration = integrations.integration_of(conn, run_id)
    steps = integration_steps.steps_of(conn, run_id)
    step_of = {s["task_id"]: s for s in steps}  # a task's latest step
    current = current_steps(steps, worker_of.values())
    delivered = delivered_steps(steps, integration)
    overlaps = overlap_warnings(integration)
    asking = inbox.waiting_workers(conn, run_id)
    attention, needs_you = attention_and_wait(conn, run, integration, approval_required)
    lines = []
    for t in task_rows:
        task_id = t["task_id"]
        worker, candidate, step = worker_of.get(task_id), latest.get(task_id), current.get(task_id)
        binding = t["passed_candidate"] or (candidate["binding_id"] if candidate else None)
        candidate_checks = checks_by.get(binding, []) if binding else []
        state = _state(t, worker, candidate, candidate_checks, step, delivered, step_of.get(task_id), closed,
                       [d for d in depends.get(task_id, ()) if results.get(d) != "passed"], run["plan"] is not None)
        if state in ("running", "exited") and worker and (worker["worker_id"], worker["generation"]) in asking:
            state = "awaiting-input"  # a question of its current generation waits for a person
        lines.append(TaskLine(
            task_id=task_id, title=t["title"], state=state, generation=worker["generation"] if worker else None,
            elapsed_ms=_elapsed(worker, now), last_line=_last_line(worker, tail),
            cycles=t["cycles"] if t["cycles"] is not None else t["failed_cycles"], candidate=binding[:12] if binding
            else None, checks=_checks_summary(candidate_checks), depends_on=depends.get(task_id, ()),
            step=step["status"] if step else None,
            note=step_note(step, integration, overlaps, delivered) if step else None,
            unsandboxed=bool(worker and worker.get("sandbox") == "off")))
    return Board(run_id=run_id, goal=run["goal"], status=run["status"], closed=closed,
                 target_branch=run["target_branch"], budget_ms=run["budget_ms"], used_ms=run["used_ms"],
                 remaining_ms=run["remaining_ms"],
                 integration=integration_summary(integration, len(delivered_tasks(steps, integration))),
                 target_commit=integration["final_commit"], receipt_sealed=integration["receipt_sha256"] is not None,
                 receipt_sha256=integration["receipt_sha256"], tasks=tuple(lines), attention=tuple(attention),
                 outcome=run_outcome_of(conn, run, integration, now, approval_required, steps=steps,
                                        task_ids=[t["task_id"] for t in task_rows], needs_you=needs_you), **spend)


def _state(task: dict[str, Any], worker: dict[str, Any] | None, candidate: dict[str, Any] | None,
           candidate_checks: list[dict[str, Any]], step: dict[str, Any] | None, delivered: frozenset[int],
           last_step: dict[str, Any] | None, run_closed: bool, unfinished: list[str], planned: bool) -> str:
    shown = step_state(step, delivered) if step is not None else None
    if shown is not None:
        return shown
    # superseded: the result it finished with is that step's
    repaired = last_step is not None and step is None and task["passed_candidate"] == last_step["binding_id"]
    if task["result"] and not repaired:
        return task["result"]
    if run_closed:
        return "stopped"
    generation = worker["generation"] if worker else None
    pinning = candidate is not None and candidate["generation"] == generation and candidate["status"] == "pinning"
    if pinning or any(c["status"] in ("requested", "running") for c in candidate_checks):
        return "checking"
    if worker is None:
        return "waiting" if unfinished else "queued" if planned else "not started"
    if worker["status"] in ("registered", "launching"):
        return "launching"
    if worker["status"] == "running":
        return "running"
    if task["judged_generation"] == worker["generation"]:
        return "queued"  # this generation was judged and failed: the next one waits for its turn
    return "exited"


# What the ledger proves about the merge queue, in words (the board and `docket status` share them) ----------------
def delivered_steps(steps: list[dict[str, Any]], integration: dict[str, Any]) -> frozenset[int]:
    """The steps the target holds: verified ones up to the one whose merge the target was last moved to
    (IntegrationCompleted). The ledger proves nothing more: a target that was never moved holds no step."""
    moved_to = integration.get("final_commit")
    reached = [s["step"] for s in steps if s["status"] == "verified" and moved_to and s["merge_commit"] == moved_to]
    if not reached:
        return frozenset()
    return frozenset(s["step"] for s in steps if s["status"] == "verified" and s["step"] <= max(reached))


def delivered_tasks(steps: list[dict[str, Any]], integration: dict[str, Any]) -> frozenset[str]:
    """The tasks whose work the target holds: those of its delivered steps (delivered_steps)."""
    delivered = delivered_steps(steps, integration)
    return frozenset(s["task_id"] for s in steps if s["step"] in delivered)


def run_outcome_of(conn: ViewsConnection, run: dict[str, Any], integration: dict[str, Any], now: str,
                   approval_required: Callable[[], bool], *, steps: list[dict[str, Any]] | None = None,
                   task_ids: Iterable[str] | None = None, needs_you: bool | None = None) -> Outcome:
    """What the run came to (domain/reports/outcome.py): its status, how many of its tasks (planned or added) the target
    holds, whether something waits for a person (``needs_you``, else read here: docket go ended waiting, an open
    question or proposal, a candidate awaiting approval, a target in the way: a change to what the run trusts held
    for approval is read from the ledger, by `docket status`), whether anything drives it (a run docket go planned
    that no docket process drives any more, driver_alive, was interrupted: stopped)."""
    run_id = run["run_id"]
    steps = integration_steps.steps_of(conn, run_id) if steps is None else steps
    ids = set(t["task_id"] for t in tasks.tasks_of(conn, run_id)) if task_ids is None else set(task_ids)
    ids |= {t["task_id"] for t in json.loads(run["plan"] or "{}").get("tasks", [])}
    if needs_you is None:
        needs_you = attention_and_wait(conn, run, integration, approval_required)[1]
    return run_outcome(run["status"], len(delivered_tasks(steps, integration) & ids), len(ids),
                       needs_you=needs_you, driven=not run["plan"] or driver_alive(conn, run_id, now))


def driver_alive(conn: ViewsConnection, run_id: str, now: str) -> bool:
    """Whether a docket process drives the run: it holds the run's driver lease (adapters/service_layer/use_cases/leases.py's
    driver_resource), unexpired at now. A driver renews it every third of its time or stops driving, so a docket go
    killed outright is seen gone once its lease runs out."""
    return any(le["resource"] == f"driver/{run_id}" and le["status"] == "held" and to_ms(le["expires_at"]) > to_ms(now)
               for le in leases.leases_of(conn, run_id))


def step_state(step: dict[str, Any], delivered: frozenset[int]) -> str | None:
    """A step's state as its task shows it (None: waiting, the task's own state stands)."""
    status = step["status"]
    if status == "waiting":
        return None
    if status == "verified":
        return "delivered" if step["step"] in delivered else "merged (target not moved)"
    if status == "conflicted":
        return step["code"] or status  # conflicted, or unmergeable
    return STEP_STATES.get(status, status)  # one this docket does not know is shown as the ledger says it


def step_note(step: dict[str, Any], integration: dict[str, Any], overlaps: list[dict[str, Any]],
              delivered: frozenset[int]) -> str | None:
    """Why a step stands where it does: its conflicting paths (and the tasks IntegrationPrepared warned change the
    same paths), the paths a waiting step was foreseen to conflict on as it was queued, a rejection's check, why a
    verified step's work is not in the target."""
    status, code = step["status"], step["code"]
    if status == "conflicted" and code == "conflicted":
        note = f"in {_listed(json.loads(step['paths'] or '[]'))}"
        others = [_name(o["first_task"] if o["second_task"] == step["task_id"] else o["second_task"])
                  for o in overlaps if step["task_id"] in (o["first_task"], o["second_task"])]
        return note + (f"; {', '.join(dict.fromkeys(others))} changed the same paths" if others else "")
    if status == "conflicted":
        return _bounded(step["message"] or code or "")
    if status == "rejected":
        return f"check {_name(step['check'] or '?')} failed on the merged tree ({code})"
    if status == "merged" and step.get("bisect"):
        return step["bisect"]
    if status == "merged" and step.get("speculation"):
        return step["speculation"]
    if status in ("waiting", "merging") and step.get("predicted_conflicts"):
        foreseen = _listed(json.loads(step["predicted_conflicts"]))
        return f"a conflict foreseen in {foreseen} (merged onto the tip as queued)"
    if status == "verified" and step.get("batch") and step["step"] in delivered:
        return f"verified with steps {step['batch']} by one check run"
    if status == "verified" and step["step"] not in delivered:
        if integration["stopped_step"] is not None:
            return f"the queue stopped at step {integration['stopped_step']} ({integration['stop_code']})"
        if integration["target"] in (None, "moved") and integration["target_code"]:
            return integration["target_code"]
        return None
    return code if status not in UNDER_WAY else None


def integration_summary(integration: dict[str, Any], delivered: int | None = None) -> str:
    """The integration in a few words: where the queue is, its verified steps, whether the target moved. Once it
    ended (completed, stopped), with ``delivered`` (the tasks the target holds, delivered_tasks) it says what it
    delivered rather than its steps: a step dropped and its task repaired in a later step is no failure."""
    status = integration["status"]
    if not integration["prepared"]:
        return status
    counted = f"{integration['steps_verified']}/{integration['steps']} step(s) verified"
    branch = integration["target_branch"]
    ended = counted if delivered is None else f"{delivered} task(s) delivered"
    if status == "completed":
        return f"completed, {ended}"
    if status == "stopped":
        code = integration["stop_code"] if integration["stopped_step"] is not None else integration["target_code"]
        why = f"at step {integration['stopped_step']}" if integration["stopped_step"] is not None else ""
        why += f" ({code})" if code else ""
        return f"stopped{' ' + why.strip() if why else ''}, {ended}"
    if integration["target"] == "requested":
        return f"moving {branch}, {counted}"
    if status == "updating-target":  # every step verified; the target's move is not asked for (again) yet
        why = f" ({integration['target_code']})" if integration["target_code"] else ""
        return f"{counted}, {branch} not moved{why}"
    return f"{status}, {counted}"


def current_steps(steps: list[dict[str, Any]], task_workers: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each task's latest step, unless a later generation of its worker superseded it: a step that ended short of
    the target is about an older generation's work once the task's worker has a newer one (a repair)."""
    generation = {w["task_id"]: w["generation"] for w in task_workers if w["task_id"]}
    latest = {s["task_id"]: s for s in steps}
    return {task_id: s for task_id, s in latest.items()
            if s["status"] in UNDER_WAY or generation.get(task_id, 0) <= s["generation"]}


def run_attention(conn: ViewsConnection, run: dict[str, Any], integration: dict[str, Any],
                  approval_required: Callable[[], bool]) -> list[str]:
    """What the user must act on: candidates awaiting approval, a target the ledger says was not moved (checked out
    with local changes, moved by someone else), each task whose step ended short of the target."""
    return attention_and_wait(conn, run, integration, approval_required)[0]


def attention_and_wait(conn: ViewsConnection, run: dict[str, Any], integration: dict[str, Any],
                       approval_required: Callable[[], bool]) -> tuple[list[str], bool]:
    """run_attention's items, and whether the open run waits for a person: docket go ended waiting (RunWaiting), an
    agent's question or proposal is open, a candidate awaits approval, the target's checkout is in the way or the
    target was moved by someone else. A task short of the target is only in a run driven by hand: in a run docket go
    planned, docket go repairs it."""
    run_id = run["run_id"]
    again = f"'docket go --resume {run_id}'" if run["plan"] else f"'docket integrate {run_id}'"
    todo = []
    awaiting = awaiting_approval(conn, run, integration, approval_required)
    if awaiting:
        todo.append(f"awaiting approval of task(s) {', '.join(_name(c['task_id']) for c in awaiting)}: "
                    f"'docket approve {run_id} --by NAME'")
    moved_by_someone = integration["target"] == "moved"
    in_the_way = integration["target"] is None and integration["target_code"] and run["status"] not in CLOSED
    if moved_by_someone or in_the_way:
        message = (integration["target_message"] or integration["target_code"]).replace("'docket integrate'", again)
        todo.append(f"{integration['target_branch']} was not moved: {_bounded(message)}")
    steps = integration_steps.steps_of(conn, run_id)
    delivered, overlaps = delivered_steps(steps, integration), overlap_warnings(integration)
    for step in current_steps(steps, workers.workers_of(conn, run_id)).values():
        if step["status"] not in UNDER_WAY:
            todo.append(f"task {_name(step['task_id'])} not delivered: "
                        f"{step_words(step, integration, overlaps, delivered)}")
    waits = run["status"] not in CLOSED and bool(
        awaiting or moved_by_someone or in_the_way or run.get("waiting_code") or inbox.open_questions(conn, run_id)
        or (todo and not run["plan"]))  # a run driven by hand: no docket go repairs a task short of the target
    return todo, waits


def step_words(step: dict[str, Any], integration: dict[str, Any], overlaps: list[dict[str, Any]],
               delivered: frozenset[int]) -> str:
    """A step's state and note as one phrase: "conflicted in a.txt; t1 changed the same paths", "rejected, check ok
    failed on the merged tree (exit)", "waiting"."""
    state = step_state(step, delivered) or step["status"]
    note = step_note(step, integration, overlaps, delivered)
    if not note:
        return state
    return f"{state} {note}" if note.startswith("in ") else f"{state}, {note}"


def awaiting_approval(conn: ViewsConnection, run: dict[str, Any], integration: dict[str, Any],
                      approval_required: Callable[[], bool]) -> list[dict[str, Any]]:
    """The confirmed candidates that await approval: when the queue can still be prepared (the run open, its
    integration unprepared) and docket.toml requires approval (asked only then)."""
    if integration["status"] != "unprepared" or run["closed_at"] is not None:
        return []
    unapproved = approvals.awaiting_approval(conn, run["run_id"])
    return unapproved if unapproved and approval_required() else []


def overlap_warnings(integration: dict[str, Any]) -> list[dict[str, Any]]:
    """The same-path warnings IntegrationPrepared recorded: first_task, second_task, paths."""
    return json.loads(integration.get("overlaps") or "[]")


def overlap_lines(overlaps: list[dict[str, Any]]) -> list[str]:
    """The same-path warnings in words, the first few of them (the rest counted)."""
    lines = [f"{_name(o['first_task'])} and {_name(o['second_task'])} both change {_listed(o['paths'])}"
             for o in overlaps[:OVERLAPS_SHOWN]]
    more = len(overlaps) - OVERLAPS_SHOWN
    return lines + ([f"and {more} more pair(s) of tasks ('docket log --type IntegrationPrepared --json')"]
                    if more > 0 else [])


def _listed(paths: list[str]) -> str:
    shown = ", ".join(_name(p) for p in paths[:PATHS_SHOWN]) or "no path named"
    return shown + (f" and {len(paths) - PATHS_SHOWN} more" if len(paths) > PATHS_SHOWN else "")


def _name(text: str) -> str:
    return text if len(text) <= NAME_CHARS else text[:NAME_CHARS - 1] + "\u2026"


def _bounded(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 1] + "\u2026"


def _latest_checks(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each candidate's checks, the latest attempt of each (rows come in position order: the last one wins)."""
    by_binding: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_binding.setdefault(row["binding_id"], {})[row["check"]] = row
    return {binding: list(named.values()) for binding, named in by_binding.items()}


def _checks_summary(rows: list[dict[str, Any]]) -> str | None:
    if not rows:
        return None
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1  # requested: asked for, not launched yet
    parts = [f"{counts.pop('passed', 0)}/{len(rows)} passed"]
    return ", ".join(parts + [f"{n} {status}" for status, n in sorted(counts.items())])


def _elapsed(worker: dict[str, Any] | None, now: str) -> int | None:
    if worker is None or not worker["launched_at"]:
        return None
    return max(0, to_ms(worker["ended_at"] or now) - to_ms(worker["launched_at"]))


def _last_line(worker: dict[str, Any] | None, tail: Callable[[str], str | None] | None) -> str | None:
    if worker is None:
        return None
    if worker["status"] == "running" and worker["log_path"] and tail is not None:
        return tail(worker["log_path"]) or worker["tail_line"]
    return worker["tail_line"]
