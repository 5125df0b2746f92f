"""Use cases of the receipt: build a run's receipt from the ledger, seal it once, find it again.

The receipt (docs/receipts.md) says what a run delivered and cites the ledger
positions of every event it rests on. It is built outside the write
transaction (it reads many streams), with the chain head and the Merkle root
over positions 1..head read after it, so every cited position is at or below
the head; the decision then re-checks that the integration has not changed
since, and records ReceiptSealed once. Sealing a sealed run returns its receipt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain import events as ev
from ....domain.merge_queue import integration as integration_aggregate
from ....domain.kernel.errors import Conflict, NotFound, Refused
from ....domain.reports.receipts import CHECK_EVENT_TYPES, FORMAT, receipt_sha256
from ....domain.kernel.streams import candidate_stream, request_stream, run_stream, task_stream, worker_stream
from ...world import faults
from ...world.clock import Clock
from ..kernel.ledger import Ledger
from ..kernel.ledger_tree import ledger_tree
from .runs import load_run
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ..kernel.ports import LedgerReader

__all__ = ["Sealed", "build_receipt", "find_receipt", "seal_run"]


@dataclass(frozen=True)
class Sealed:
    position: int  # of ReceiptSealed
    event: ev.ReceiptSealed
    sealed_now: bool = False


def seal_run(ledger: Ledger, reader: LedgerReader, clock: Clock, run_id: str, tasks: Sequence[str] = ()) -> Sealed:
    """ReceiptSealed for the run, once its integration has ended; the existing receipt when it is sealed.

    tasks: the run's tasks in plan order; those that are no step of the integration are named undelivered."""
    load_run(ledger, run_id)
    stream = integration_aggregate.stream_of(run_id)
    integration = ledger.get(integration_aggregate.apply, stream)
    if integration is None:
        raise Refused(Code.NOT_INTEGRATED, f"run {run_id} has no integration yet ('docket integrate {run_id}')")
    if integration.receipt_sha256 is not None:
        return find_receipt(ledger, run_id)
    if not integration.ended:
        raise Refused(Code.NOT_INTEGRATED, f"the integration of run {run_id} is {integration.status}; a run is sealed "
                                        "once its integration has ended ('docket integrate')")
    ledger.require_intact()  # never seal what docket go's ledger no longer holds as it wrote it
    receipt = build_receipt(ledger, run_id, tasks)
    head = reader.chain_head()
    assert head is not None  # the run's events are on the chain
    root = ledger_tree(reader, head.position, keep=ledger.keep_merkle_nodes).root().hex()
    faults.crash_point("seal:before-record")

    def decision(now: str) -> list[ev.Event]:
        current = ledger.get(integration_aggregate.apply, stream)
        assert current is not None
        if current.receipt_sha256 is None and current.version != integration.version:
            raise Conflict(Code.CONCURRENT_UPDATE, f"the integration of run {run_id} changed while its receipt was "
                                                "built; seal again")
        return integration_aggregate.seal(current, receipt=receipt, receipt_sha256=receipt_sha256(receipt),
                                          ledger_position=head.position, ledger_digest=head.digest,
                                          merkle_root=root, cited_positions=receipt["cited"], now=now)

    appended = ledger.decide(decision, clock.now())
    if appended:
        position, event = appended[0]
        assert isinstance(event, ev.ReceiptSealed)
        return Sealed(position, event, sealed_now=True)
    return find_receipt(ledger, run_id)


def find_receipt(ledger: Ledger, run_id: str) -> Sealed:
    """The run's ReceiptSealed and its position; Refused not-sealed when there is none."""
    load_run(ledger, run_id)
    for position, event in reversed(ledger.history(integration_aggregate.stream_of(run_id))):
        if isinstance(event, ev.ReceiptSealed):
            return Sealed(position, event)
    raise Refused(Code.NOT_SEALED, f"run {run_id} has no sealed receipt ('docket seal {run_id}')")


def _json(value: dict[str, Any]) -> dict[str, Any]:
    """A recorded part (a pydantic model or plain data) as plain JSON data."""
    return {k: v.model_dump(mode="json") if hasattr(v, "model_dump") else v for k, v in value.items()}


_REQUEST_KINDS = {"QuestionAsked": "ask", "ProgressReported": "progress", "FollowUpProposed": "propose",
                  "WorkFinished": "finish"}


def build_receipt(ledger: Ledger, run_id: str, tasks: Sequence[str] = ()) -> dict[str, Any]:
    """The receipt of the run as the ledger says now: a canonical-JSON dict whose `cited` lists its positions."""
    return _Builder(ledger, run_id, tasks).receipt()


class _Builder:
    def __init__(self, ledger: Ledger, run_id: str, tasks: Sequence[str] = ()):
        self.ledger, self.run_id, self.planned = ledger, run_id, tuple(tasks)
        self.requeues: list[tuple[int, ev.IntegrationRequeued]] = []
        self.rebatched: list[tuple[int, ev.IntegrationBatchRequeued]] = []  # [integration] batch
        self.batches: list[tuple[int, ev.IntegrationBatchVerified]] = []
        self.cited: set[int] = set()
        self._streams: dict[str, list[tuple[int, ev.Event]]] = {}

    def history(self, stream: str) -> list[tuple[int, ev.Event]]:
        if stream not in self._streams:
            self._streams[stream] = self.ledger.history(stream)
        return self._streams[stream]

    def first(self, stream: str, *types: type, cite: bool = True, **fields: Any) -> ev.Event | None:
        """The first event of these types on stream whose fields have the given values (cited)."""
        return self._pick(self.history(stream), types, cite, fields)

    def last(self, stream: str, *types: type, cite: bool = True, **fields: Any) -> ev.Event | None:
        return self._pick(list(reversed(self.history(stream))), types, cite, fields)

    def _pick(self, events: list[tuple[int, ev.Event]], types: tuple[type, ...], cite: bool,
              fields: dict[str, Any]) -> ev.Event | None:
        for position, event in events:
            if isinstance(event, types) and all(getattr(event, k) == v for k, v in fields.items()):
                if cite:
                    self.cited.add(position)
                return event
        return None

    def receipt(self) -> dict[str, Any]:
        run_events = run_stream(self.run_id)
        opened = self.first(run_events, ev.RunOpened)
        pinned = self.last(run_events, ev.RunBasePinned)
        if opened is None:
            raise NotFound(Code.RUN_NOT_FOUND, f"no run {self.run_id}")
        assert isinstance(opened, ev.RunOpened)
        stream = integration_aggregate.stream_of(self.run_id)
        prepared = self.first(stream, ev.IntegrationPrepared, ev.IntegrationPreparedV2)
        if prepared is None:
            raise Refused(Code.NOT_INTEGRATED, f"run {self.run_id} has no prepared integration")
        assert isinstance(prepared, ev.IntegrationPrepared | ev.IntegrationPreparedV2)
        queued = [(position, e) for position, e in self.history(stream) if isinstance(e, ev.IntegrationStepQueued)]
        self.cited.update(position for position, _ in queued)
        self.requeues = [(position, e) for position, e in self.history(stream) if isinstance(e, ev.IntegrationRequeued)]
        self.cited.update(position for position, _ in self.requeues)
        history = self.history(stream)
        self.rebatched = [(position, e) for position, e in history if isinstance(e, ev.IntegrationBatchRequeued)]
        self.cited.update(position for position, _ in self.rebatched)
        self.batches = [(position, e) for position, e in history if isinstance(e, ev.IntegrationBatchVerified)]
        planned = list(prepared.steps)
        again: list[tuple[int, ev.IntegrationStepQueued | ev.IntegrationRequeued | ev.IntegrationBatchRequeued]] = [
            *queued, *self.requeues, *self.rebatched]
        for _, e in sorted(again, key=lambda pair: pair[0]):  # in step order: queued, or again
            if isinstance(e, ev.IntegrationStepQueued):
                planned.append(ev.IntegrationStep(task_id=e.task_id, binding_id=e.binding_id, commit=e.commit,
                                                  worker_id=e.worker_id, generation=e.generation))
            else:
                planned.extend(planned[number - 1] for number in e.requeued)
        made_steps = [self.step(number, step) for number, step in enumerate(planned, start=1)]
        steps = [s for s in made_steps if s is not None]
        if isinstance(prepared, ev.IntegrationPreparedV2):  # a queue that went on: delivered means verified
            for _, e in queued:
                made = next((s for s in steps if s["step"] == e.step), None)
                if made is not None:
                    made["overlaps"] = [o.model_dump() for o in e.overlaps]
            verified = {s["task_id"]: planned[s["step"] - 1] for s in steps if s["status"] == "verified"}
            tasks = [self.task(verified[t]) for t in self.planned if t in verified]
            undelivered = [self.undelivered(t, steps) for t in self.planned if t not in verified]
        else:
            tasks = [self.task(step) for step in prepared.steps]
            delivering = {step.task_id for step in prepared.steps}
            undelivered = [self.undelivered(task_id) for task_id in self.planned if task_id not in delivering]
        base = getattr(pinned, "commit", None)
        configured = self.first(run_events, ev.RunConfigurationRecorded)
        configuration = None if not isinstance(configured, ev.RunConfigurationRecorded) else {
            "config_sha256": configured.config_sha256, "trusted_paths": list(configured.trusted_paths)}
        return {
            "format": FORMAT,
            "configuration": configuration,
            "repository": self.repository(prepared.repository, base),
            "run": {"id": self.run_id, "goal": opened.goal,
                    "goal_sha256": hashlib.sha256(opened.goal.encode("utf-8")).hexdigest(),
                    "base_commit": base, "target_branch": opened.target_branch},
            "target": self.target(prepared, steps, base),
            "tasks": tasks,
            "undelivered": undelivered,
            "integration": {"steps": steps, "overlaps": [o.model_dump() for o in prepared.overlaps],
                            "approved_by": list(prepared.approved_by)},
            "requests": self.requests(),
            "cited": sorted(self.cited),
        }

    def repository(self, path: str, base: str | None) -> dict[str, Any]:
        """The repository's identity (domain/reports/receipt_claims.py): docket's id for it, as the cited genesis event
        records it, and the root commits of the base's history, the same in every clone."""
        from ...world.git.history import root_commits

        genesis = self.ledger.genesis()
        if genesis is not None:
            self.cited.add(1)
        roots = root_commits(Path(path), base) if base is not None else None
        return {"id": getattr(genesis, "repository_id", None), "roots": list(roots) if roots is not None else None}

    def foreign(self, path: str, tip: str, base: str | None, steps: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Commits on the target's first-parent line from tip back to the base that docket did not make (the step
        merge commits of this run or another of this ledger): the target moved during the run by someone else's
        hand."""
        from ....domain.reports.receipt_claims import FOREIGN_LIMIT, foreign_commits
        from ...world.git.history import first_parents

        if base is None:
            return None
        made = {s["merge_commit"] for s in steps if s["merge_commit"] is not None}
        history = first_parents(Path(path), tip, base, FOREIGN_LIMIT + len(made) + 2)
        found = foreign_commits(history, base, made)
        if found.commits:  # nor another docket run's of this ledger (two runs on one target): its events say so
            made |= {e.merge_commit for _, e in self.ledger.events_of(ev.IntegrationStepMerged)}
            history = first_parents(Path(path), tip, base, FOREIGN_LIMIT + len(made) + 2)
            found = foreign_commits(history, base, made)
        return {"moved": bool(found.commits) or not found.base_reached, **found.as_dict()}

    @staticmethod
    def tip(prepared: ev.IntegrationPrepared | ev.IntegrationPreparedV2, final_commit: str,
            outcome: dict[str, Any]) -> str:
        """Where the target's line is read from: the final commit of a completed run; a stopped run's target as it
        is now (moved by someone else, its move was refused), else the commit it was expected at."""
        from ...world.git.repository import observe_branch

        if outcome["status"] == "completed":
            return final_commit
        observed = observe_branch(Path(prepared.repository), prepared.target_branch)
        return observed.commit if observed.status == "found" and observed.commit else final_commit

    def target(self, prepared: ev.IntegrationPrepared | ev.IntegrationPreparedV2, steps: list[dict[str, Any]],
               base: str | None = None) -> dict[str, Any]:
        stream = integration_aggregate.stream_of(self.run_id)
        ended = self.last(stream, ev.IntegrationCompleted, ev.IntegrationTargetMoved, ev.IntegrationRequeued, cite=False)
        if isinstance(ended, ev.IntegrationRequeued):  # went on from a moved target: its last move counts, if any
            ended = self.last(stream, ev.IntegrationCompleted) or self.last(stream, ev.IntegrationTargetMoved)
        elif ended is not None:
            ended = self.last(stream, type(ended))  # cited
        outcome: dict[str, Any]
        if isinstance(ended, ev.IntegrationCompleted):
            final_commit, final_tree = ended.commit, ended.tree
            outcome = {"status": "completed", "code": None, "step": None}
        else:
            final_commit, final_tree = prepared.expected_commit, None
            stopped = next((s for s in steps if s["status"] in ("conflicted", "failed", "rejected")), None)
            code = stopped["code"] if stopped else getattr(ended, "code", "stopped")
            outcome = {"status": "stopped", "code": code, "step": stopped["step"] if stopped else None}
        requeued = [{"round": e.round, "expected_commit": e.expected_commit, "onto": e.onto,
                     "moved_by": list(e.moved_by), "steps": list(e.requeued)} for _, e in self.requeues]
        target = {"ref": prepared.target_ref, "expected_commit": prepared.expected_commit,
                  "base": requeued[-1]["onto"] if requeued else prepared.expected_commit, "requeued": requeued,
                  "final_commit": final_commit, "final_tree": final_tree, "outcome": outcome,
                  "moved_by_others": self.foreign(prepared.repository, self.tip(prepared, final_commit, outcome),
                                                  base, steps)}
        on_remote = self.last(run_stream(self.run_id), ev.RunBasePinRequestedV2)
        if isinstance(on_remote, ev.RunBasePinRequestedV2):  # the target is the shared remote's branch
            target["remote"] = {"name": on_remote.remote, "url": on_remote.remote_url}
        return target

    def task(self, step: ev.IntegrationStep) -> dict[str, Any]:
        planned = self.first(task_stream(step.task_id), ev.TaskPlanned, ev.TaskPlannedV2)
        candidate_events = candidate_stream(step.binding_id)
        pinned = self.last(candidate_events, ev.CandidatePinned)
        confirmed = self.last(candidate_events, ev.HandoffConfirmed)
        assert isinstance(pinned, ev.CandidatePinned) and isinstance(confirmed, ev.HandoffConfirmed)
        approvals = [(position, e) for position, e in self.history(integration_aggregate.stream_of(self.run_id))
                     if isinstance(e, ev.ApprovalRecorded) and any(c.binding_id == step.binding_id
                                                                     for c in e.candidates)]
        self.cited.update(position for position, _ in approvals)
        return {
            "task_id": step.task_id,
            "title": getattr(planned, "title", None),
            "generations": self.generations(step.worker_id),
            "candidate": {"binding_id": step.binding_id, "commit": pinned.commit, "tree": pinned.tree,
                          "ref": pinned.ref},
            "checks": [self.check(step.binding_id, c.check_id) for c in confirmed.checks],
            "handoff": {"state": "confirmed", "checks": sorted(c.check for c in confirmed.checks)},
            "approval": {"by": sorted({approval.by for _, approval in approvals})},
            "protected": self.protected(step.binding_id, pinned, confirmed),
        }

    def protected(self, binding_id: str, pinned: ev.CandidatePinned, confirmed: ev.HandoffConfirmed) -> dict[str, Any]:
        """The protected paths the candidate changed, as its base-tests trees (base_tests.py: pinned on its commit,
        their changed paths the ones set aside) record them, and the confirmed checks' runs on those trees."""
        from ....domain import candidate as candidate_aggregate
        from ....domain.check import concluded
        from .base_tests import BOUNDARY

        own = self.ledger.get(candidate_aggregate.apply, candidate_stream(binding_id))
        assert own is not None
        tested = sorted({e.binding_id for _, e in self.ledger.events_of(ev.CandidatePinRequested,
                                                                         ev.CandidatePinRequestedV2)
                         if e.run_id == self.run_id and e.boundary == BOUNDARY and e.task_id == pinned.task_id
                         and e.parent == pinned.commit})
        paths: set[str] = set()
        runs = []
        for binding in tested:
            candidate = self.ledger.get(candidate_aggregate.apply, candidate_stream(binding))
            if candidate is None or candidate.status != "pinned":
                continue
            for c in confirmed.checks:
                done = concluded(candidate, c.check, own.check_run(c.check_id).config_sha256)
                if done is not None:
                    runs.append(self.check(binding, done.check_id))
            if any(run["binding_id"] == binding for run in runs):
                paths.update(candidate.changed_paths)
        return {"paths": sorted(paths), "base_tests": runs}

    def requests(self) -> list[dict[str, Any]]:
        """Every request the run's agents made, in the order made: what each asked, its answer and who gave it,
        a proposal's decision, and every refusal; each event of their streams cited."""
        first = (ev.QuestionAsked, ev.ProgressReported, ev.FollowUpProposed, ev.WorkFinished, ev.RequestRefused)
        keys = list(dict.fromkeys(e.request_key for _, e in self.ledger.events_of(*first)
                                  if getattr(e, "run_id", None) == self.run_id))
        return [self.request(key) for key in keys]

    def request(self, key: str) -> dict[str, Any]:
        history = self.history(request_stream(key))
        self.cited.update(position for position, _ in history)
        opening = history[0][1]
        made: dict[str, Any] = {"request": key, "task_id": opening.task_id,  # type: ignore[attr-defined]
                                "worker_id": opening.worker_id, "generation": opening.generation,  # type: ignore
                                "request_id": opening.request_id,  # type: ignore[attr-defined]
                                "kind": _REQUEST_KINDS.get(type(opening).name) or opening.kind,  # type: ignore
                                "refused": [], "answers_refused": []}
        for _, e in history:
            if isinstance(e, ev.QuestionAsked):
                made |= {"question": e.question, "reason": e.reason, "choices": list(e.choices), "answer": None,
                         "delivered": False}
            elif isinstance(e, ev.ProgressReported):
                made |= {"summary": e.summary, "input_tokens": e.input_tokens, "output_tokens": e.output_tokens,
                         "cost_micro_usd": e.cost_micro_usd}
            elif isinstance(e, ev.FollowUpProposed):
                made |= {"title": e.title, "decision": e.decision, "decided_by": None,
                         "added_task": self.added_task(e.task_id, e.content_sha256) if e.decision == "accepted"
                         else None}
            elif isinstance(e, ev.FollowUpDecided):
                made |= {"decision": e.decision, "decided_by": e.decided_by, "added_task": e.task_id}
            elif isinstance(e, ev.WorkFinished):
                made |= {"summary": e.summary}
            elif isinstance(e, ev.QuestionAnswered):
                made["answer"] = {"text": e.answer, "choice": e.choice, "by": e.answered_by, "via": e.via}
            elif isinstance(e, ev.QuestionExpired):
                made["expired_at"] = e.deadline_at
            elif isinstance(e, ev.AnswerDelivered):
                made["delivered"] = True
            elif isinstance(e, ev.AnswerRefused):
                made["answers_refused"].append({"by": e.answered_by, "code": e.code})
            elif isinstance(e, ev.RequestRefused):
                made["refused"].append({"code": e.code, "content_sha256": e.content_sha256})
        return made

    def added_task(self, proposer: str, proposal_sha256: str) -> str | None:
        """The task a follow-up the run's policy accepted became (its RunTaskAdded, cited): proposed again by the
        same task, the one added the first time."""
        for position, e in self.history(run_stream(self.run_id)):
            if isinstance(e, ev.RunTaskAdded) and (e.proposed_by, e.proposal_sha256) == (proposer, proposal_sha256):
                self.cited.add(position)
                return e.task.task_id
        return None

    def undelivered(self, task_id: str, steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """A task of the run that no step delivers (no confirmed handoff when the queue was fixed; in a queue that
        went on, no verified step: with the paths its last dropped step conflicted on)."""
        planned = self.first(task_stream(task_id), ev.TaskPlanned, ev.TaskPlannedV2)
        made: dict[str, Any] = {"task_id": task_id, "title": getattr(planned, "title", None)}
        if steps is not None:
            dropped = [s for s in steps if s["task_id"] == task_id and s["status"] in ("conflicted", "rejected")]
            made |= {"step": dropped[-1]["step"] if dropped else None,
                     "paths": list(dropped[-1].get("paths", [])) if dropped else []}
        return made

    def generations(self, worker_id: str) -> list[dict[str, Any]]:
        stream = worker_stream(worker_id)
        numbers = sorted({e.generation for _, e in self.history(stream)
                          if isinstance(e, (ev.WorkerLaunched, ev.WorkerExited))})
        made = []
        for generation in numbers:
            launched = self.last(stream, ev.WorkerLaunched, generation=generation)
            exited = self.last(stream, ev.WorkerExited, generation=generation)
            # what the worker could touch: the sandbox its launch intent recorded (none before docket had one)
            requested = self.last(stream, ev.WorkerLaunchRequested, generation=generation, cite=False)
            sandbox = {}
            if isinstance(requested, ev.WorkerLaunchRequested) and requested.sandbox is not None:
                self.last(stream, ev.WorkerLaunchRequested, generation=generation)  # cited
                sandbox = {"sandbox": requested.sandbox}
            made.append({
                "worker_id": worker_id, "generation": generation,
                "launched": None if not isinstance(launched, ev.WorkerLaunched) else {
                    "host": launched.process.host, "pid": launched.process.pid,
                    "start_time": launched.process.start_time},
                "exited": None if not isinstance(exited, ev.WorkerExited) else {
                    "cause": exited.cause, "exit_code": exited.exit_code, "signal": exited.signal,
                    "duration_ms": exited.duration_ms},
                **_json(sandbox),
            })
        return made

    def check(self, binding_id: str, check_id: str) -> dict[str, Any]:
        stream = candidate_stream(binding_id)
        result = self.last(stream, ev.CheckPassed, ev.CheckFailed, ev.CheckTimedOut, check_id=check_id)
        pinned = self.last(stream, ev.CandidatePinned)
        assert result is not None and isinstance(pinned, ev.CandidatePinned), (binding_id, check_id)
        made = {"check": result.check, "check_id": check_id, "binding_id": binding_id,  # type: ignore[attr-defined]
                "commit": pinned.commit, "config_sha256": result.config_sha256,  # type: ignore[attr-defined]
                "result": CHECK_EVENT_TYPES[type(result).name],
                "output_sha256": result.output_sha256}  # type: ignore[attr-defined]
        tests = self.tests(stream, check_id)
        return made if tests is None else made | {"tests": tests}

    def tests(self, stream: str, check_id: str) -> dict[str, Any] | None:
        """What the check's JUnit report said and how its result was judged (CheckTestsReported, cited), with the
        base's report a relative judgment compared it to (cited too): why a check whose output names failing tests
        passed, for a reader who has only the receipt. None for a check without a report."""
        reported = self.last(stream, ev.CheckTestsReported, check_id=check_id)
        if not isinstance(reported, ev.CheckTestsReported):
            return None
        made: dict[str, Any] = {"judge": reported.judge, "report_sha256": reported.report_sha256,
                                "problem": reported.problem, "failing": sorted(f.id for f in reported.failing),
                                "new_failures": reported.new_failures, "known_failures": reported.known_failures,
                                "base": None}
        if reported.base_binding_id is not None and reported.base_check_id is not None:
            base = self.last(candidate_stream(reported.base_binding_id), ev.CheckTestsReported,
                             check_id=reported.base_check_id)
            made["base"] = {"binding_id": reported.base_binding_id, "check_id": reported.base_check_id,
                            "failing": None if not isinstance(base, ev.CheckTestsReported)
                            else sorted(f.id for f in base.failing)}
        return made

    def step(self, number: int, planned: ev.IntegrationStep) -> dict[str, Any] | None:
        stream = integration_aggregate.stream_of(self.run_id)
        outcome = self.last(stream, ev.IntegrationStepMerged, ev.IntegrationStepConflicted, ev.IntegrationStepFailed,
                            step=number)
        if outcome is None:
            return None  # never reached: an earlier step stopped the queue
        made: dict[str, Any] = {"step": number, "task_id": planned.task_id,
                                "binding_id": planned.binding_id, "merge_commit": None, "tree": None, "merge": None,
                                "verification_binding": None, "verification_commit": None, "checks": [],
                                "status": "merged", "code": None}
        if isinstance(outcome, ev.IntegrationStepConflicted):
            return made | {"status": "conflicted", "code": outcome.reason, "paths": list(outcome.paths)}
        if isinstance(outcome, ev.IntegrationStepFailed):
            return made | {"status": "failed", "code": outcome.code}
        assert isinstance(outcome, ev.IntegrationStepMerged)
        made |= {"merge_commit": outcome.merge_commit, "tree": outcome.tree, "merge": outcome.merge}
        ended = self.last(stream, ev.IntegrationStepVerified, ev.IntegrationStepRejected, step=number)
        batched = next(((position, e) for position, e in reversed(self.batches)
                        if e.first_step <= number <= e.last_step), None)
        if ended is None and batched is not None:  # verified with the steps of its batch by one check run
            self.cited.add(batched[0])
            ended = batched[1]
            made["batch"] = {"first_step": ended.first_step, "last_step": ended.last_step, "tree": ended.tree}
        rebatched = next((e for _, e in self.rebatched if number in e.requeued), None)
        if ended is None and rebatched is not None:  # merged after a batch's rejected step: queued again
            return made | {"status": "requeued", "requeued_after": rebatched.rejected_step}
        if isinstance(ended, ev.IntegrationStepVerified | ev.IntegrationBatchVerified):
            check_ids = [c.check_id for c in ended.checks]
            again = any(number in e.requeued for _, e in self.requeues)
            made |= {"status": "requeued" if again else "verified"}
        elif isinstance(ended, ev.IntegrationStepRejected):
            check_ids = [ended.check_id]
            made |= {"status": "rejected", "code": ended.code}
        else:
            return made
        binding = ended.verification_binding
        made["verification_binding"] = binding
        pinned = self.last(candidate_stream(binding), ev.CandidatePinned)
        if isinstance(pinned, ev.CandidatePinned):
            made["verification_commit"] = pinned.commit
        made["checks"] = [self.check(binding, check_id) for check_id in check_ids
                          if self.last(candidate_stream(binding), ev.CheckPassed, ev.CheckFailed, ev.CheckTimedOut,
                                       cite=False, check_id=check_id) is not None]
        return made
