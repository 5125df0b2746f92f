"""A receipt's statements, each checked against the cited event that must say the same; readers of its fields."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from ..kernel.canonical import CanonicalJSONError, canonical_json
from ..kernel.errors import VerificationFailed
from .receipt_claims import subject_of
from ..kernel.codes import Code

__all__ = [
    "CHECK_EVENT_TYPES",
    "FORMATS",
    "receipt_sha256",
]


FORMATS = (1, 2, 3)  # 1 and 2 still verify
CHECK_EVENT_TYPES = {"CheckPassed": "passed", "CheckFailed": "failed", "CheckTimedOut": "timed-out"}
_HEX64 = frozenset("0123456789abcdef")


def receipt_sha256(receipt: dict[str, Any]) -> str:
    """The receipt's digest: sha256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(receipt)).hexdigest()


@dataclass(frozen=True)
class _Cited:
    position: int
    type: str  # without its version: CheckPassed
    payload: dict[str, Any]


class _Contradictions:
    """The receipt's statements, each against the cited event that must say the same."""

    def __init__(self, receipt: dict[str, Any], cited: list[_Cited]):
        self.receipt, self.cited = receipt, cited
        self.run_id = receipt["run"]["id"]

    def check(self, statement: dict[str, Any]) -> str:
        receipt = self.receipt
        if receipt.get("format") not in FORMATS:
            raise VerificationFailed(Code.BAD_STATEMENT, f"receipt format {_shown(receipt.get('format'))} is not one "
                                                      f"this docket reads ({', '.join(map(str, FORMATS))})")
        for event in self.cited:
            if "run_id" in event.payload and event.payload["run_id"] != self.run_id:
                self._fail(f"the event at position {event.position} is of run {event.payload['run_id']!r}, not of "
                           f"{self.run_id!r}")
        run, target = receipt["run"], receipt["target"]
        if run["goal_sha256"] != hashlib.sha256(run["goal"].encode("utf-8")).hexdigest():
            self._fail("run.goal_sha256 is not the sha256 of run.goal")
        self._find("RunOpened", "run", goal=run["goal"], target_branch=run["target_branch"])
        self._find("RunBasePinned", "run.base_commit", commit=run["base_commit"])
        if receipt.get("configuration") is not None:  # what the run trusted (domain/containment/trust.py), when it recorded it
            configuration = receipt["configuration"]
            self._find("RunConfigurationRecorded", "configuration", config_sha256=configuration["config_sha256"],
                       trusted_paths=configuration["trusted_paths"])
        self._find("IntegrationPrepared", "target", target_ref=target["ref"],
                   expected_commit=target["expected_commit"], target_branch=run["target_branch"],
                   approved_by=receipt["integration"]["approved_by"], overlaps=receipt["integration"]["overlaps"])
        (subject,) = statement["subject"]
        name, digest = subject_of(receipt, receipt_sha256(receipt))
        if subject.get("name") != name or subject["digest"] != digest:
            self._fail(f"the statement's subject ({_shown(subject.get('name'))}, {_shown(subject['digest'])}) is "
                       f"not the receipt's ({name}, {digest})")
        if receipt["format"] >= 2:
            self._repository(receipt["repository"])
        outcome = target["outcome"]
        if outcome["status"] == "completed":
            self._find("IntegrationCompleted", "target.final_commit", target_ref=target["ref"],
                       commit=target["final_commit"], tree=target["final_tree"])
        elif outcome["status"] == "stopped":
            if target["final_commit"] != target["expected_commit"]:
                self._fail("a stopped integration left the target at its expected commit, but target.final_commit "
                           "names another")
            if outcome.get("step") is None:
                self._find("IntegrationTargetMoved", "target.outcome", code=outcome["code"])
        else:
            self._fail(f"target.outcome.status is {_shown(outcome['status'])}")
        self._requeued(target)
        if "remote" in target:  # the run's target is a shared remote's branch: the run recorded which
            self._find("RunBasePinRequested", "target.remote", remote=target["remote"]["name"],
                       remote_url=target["remote"]["url"], target_branch=run["target_branch"])
        for task in receipt["tasks"]:
            self._task(task)
        delivered = {task["task_id"] for task in receipt["tasks"]}
        for task in receipt.get("undelivered", []):
            if task["task_id"] in delivered:
                self._fail(f"task {task['task_id']} is named both delivered and undelivered")
            self._planned(task, f"undelivered task {task['task_id']}")
            if task.get("step") is not None and not any(
                    step["step"] == task["step"] and step["task_id"] == task["task_id"]
                    and step.get("paths", []) == task["paths"] for step in receipt["integration"]["steps"]):
                self._fail(f"undelivered task {task['task_id']} names a dropped step the receipt does not have")
        for step in receipt["integration"]["steps"]:
            self._step(step)
        if receipt["format"] >= 3:
            for request in receipt["requests"]:
                self._request(request)
        final_commit = target["final_commit"]
        if not isinstance(final_commit, str):
            self._fail(f"target.final_commit is {_shown(final_commit)}, not a commit")
        return final_commit

    def _request(self, request: dict[str, Any]) -> None:
        """What an agent asked (and was answered, or refused) is what the cited events of its request say."""
        where = f"request {request['request']}"
        common = dict(request_key=request["request"], task_id=request["task_id"], worker_id=request["worker_id"],
                      generation=request["generation"], request_id=request["request_id"])
        kind = request["kind"]
        if kind == "ask" and "question" in request:
            self._find("QuestionAsked", where, **common, question=request["question"], reason=request["reason"],
                       choices=request["choices"])
            answer = request["answer"]
            if answer is not None:
                self._find("QuestionAnswered", f"{where}'s answer", request_key=request["request"],
                           answer=answer["text"], choice=answer["choice"], answered_by=answer["by"], via=answer["via"])
            if request["delivered"]:
                self._find("AnswerDelivered", f"{where}'s delivery", request_key=request["request"])
        elif kind == "progress" and "summary" in request:
            self._find("ProgressReported", where, **common, summary=request["summary"],
                       cost_micro_usd=request["cost_micro_usd"], input_tokens=request["input_tokens"],
                       output_tokens=request["output_tokens"])
        elif kind == "propose" and "title" in request:
            decided_by = request.get("decided_by")
            self._find("FollowUpProposed", where, **common, title=request["title"],
                       decision="queued" if decided_by else request["decision"])
            if decided_by is not None:
                self._find("FollowUpDecided", f"{where}'s decision", request_key=request["request"],
                           decision=request["decision"], decided_by=decided_by, task_id=request.get("added_task"))
            elif request.get("added_task") is not None:
                proposed = self._find("FollowUpProposed", where, request_key=request["request"])
                added = self._find("RunTaskAdded", f"{where}'s task", proposed_by=request["task_id"],
                                   proposal_sha256=proposed.payload["content_sha256"])
                if added.payload["task"]["task_id"] != request["added_task"]:
                    self._fail(f"{where}'s task is not the task its cited RunTaskAdded added")
        elif kind == "finish" and "summary" in request:
            self._find("WorkFinished", where, **common, summary=request["summary"])
        elif not request["refused"]:
            self._fail(f"{where} is neither made nor refused")
        for refusal in request["refused"]:
            self._find("RequestRefused", f"{where}'s refusal", request_key=request["request"], code=refusal["code"],
                       content_sha256=refusal["content_sha256"])
        for refusal in request["answers_refused"]:
            self._find("AnswerRefused", f"{where}'s refused answer", request_key=request["request"],
                       answered_by=refusal["by"], code=refusal["code"])

    def _requeued(self, target: dict[str, Any]) -> None:
        """Each time the queue went on from a moved target is a cited IntegrationRequeued, and the base the work was
        finally merged onto is the last one's (the expected commit without one). Receipts before it say neither."""
        if "base" not in target:
            return
        rounds = target.get("requeued", [])
        for n, again in enumerate(rounds):
            self._find("IntegrationRequeued", f"target.requeued[{n}]", round=again["round"],
                       expected_commit=again["expected_commit"], onto=again["onto"], moved_by=again["moved_by"],
                       requeued=again["steps"])
        if target["base"] != (rounds[-1]["onto"] if rounds else target["expected_commit"]):
            self._fail("target.base is neither the last re-queue's onto nor the expected commit")

    def _repository(self, repository: dict[str, Any]) -> None:
        """The repository id is the one the ledger's genesis event (position 1) records."""
        if repository["id"] is None:
            return
        genesis = self._find("LedgerCreated", "repository.id", repository_id=repository["id"])
        if genesis.position != 1:
            self._fail(f"the LedgerCreated naming repository.id is at position {genesis.position}, not 1")

    def _planned(self, task: dict[str, Any], where: str) -> None:
        titled = [e for e in self.cited if e.type in ("TaskPlanned", "TaskPlannedV2")
                  and e.payload.get("task_id") == task["task_id"]]
        if not titled or titled[0].payload.get("title") != task["title"]:
            self._fail(f"no cited TaskPlanned of {where} has the title {task['title']!r}")

    def _task(self, task: dict[str, Any]) -> None:
        where = f"task {task['task_id']}"
        self._planned(task, where)
        candidate = task["candidate"]
        self._find("CandidatePinned", f"{where}'s candidate", task_id=task["task_id"],
                   binding_id=candidate["binding_id"], commit=candidate["commit"], tree=candidate["tree"],
                   ref=candidate["ref"])
        for generation in task["generations"]:
            match = dict(worker_id=generation["worker_id"], generation=generation["generation"])
            if generation.get("launched") is not None:
                found = self._find("WorkerLaunched", f"{where}'s generation {generation['generation']}", **match)
                if {k: found.payload["process"].get(k) for k in generation["launched"]} != generation["launched"]:
                    self._fail(f"{where}'s generation {generation['generation']} was not launched as the receipt says")
            if "sandbox" in generation:
                requested = self._find("WorkerLaunchRequested", f"{where}'s generation {generation['generation']}",
                                       **match)
                if not _same(requested.payload.get("sandbox", _ABSENT), generation["sandbox"]):
                    self._fail(f"{where}'s generation {generation['generation']} was not sandboxed as the receipt "
                               "says")
            if generation.get("exited") is not None:
                self._find("WorkerExited", f"{where}'s generation {generation['generation']}", **match,
                           **generation["exited"])
        for check in task["checks"]:
            self._check(check, where, candidate["binding_id"])
        handoff = task["handoff"]
        if handoff["state"] != "confirmed":
            self._fail(f"{where}'s handoff is {handoff['state']!r}, not confirmed")
        confirmed = self._find("HandoffConfirmed", f"{where}'s handoff", binding_id=candidate["binding_id"])
        if sorted(c["check"] for c in confirmed.payload["checks"]) != sorted(handoff["checks"]) or sorted(
                c["check_id"] for c in confirmed.payload["checks"]) != sorted(c["check_id"] for c in task["checks"]):
            self._fail(f"{where}'s handoff rests on other check runs than the receipt names")
        if "protected" in task:  # receipts sealed before base-tests trees have none
            self._protected(task["protected"], where, task["task_id"], candidate["commit"])
        for by in task["approval"]["by"]:
            if not any(e.type == "ApprovalRecorded" and e.payload.get("by") == by and any(
                    c.get("binding_id") == candidate["binding_id"] for c in e.payload["candidates"])
                    for e in self.cited):
                self._fail(f"no cited ApprovalRecorded by {by!r} approves {where}'s candidate")

    def _protected(self, protected: dict[str, Any], where: str, task_id: str, commit: str) -> None:
        """A delivered task's protected paths: each base-tests run cited, on a tree pinned for the task on its
        candidate's commit, passed; the paths are exactly what those trees set aside (their changed paths)."""
        set_aside: set[str] = set()
        for check in protected["base_tests"]:
            self._check(check, f"{where}'s base tests", check["binding_id"])
            if check["result"] != "passed":
                self._fail(f"{where} was delivered, but check {check['check']} {check['result']} with the base's "
                           "tests")
            tree = self._find("CandidatePinned", f"{where}'s base-tests tree", binding_id=check["binding_id"],
                              task_id=task_id, parent=commit)
            set_aside.update(tree.payload["changed_paths"])
        if sorted(set_aside) != sorted(protected["paths"]):
            self._fail(f"{where}'s protected paths are not the ones its cited base-tests trees set aside")

    def _step(self, step: dict[str, Any]) -> None:
        where = f"integration step {step['step']}"
        status = step["status"]
        common = dict(step=step["step"], task_id=step["task_id"])
        if "overlaps" in step:  # queued as its task passed
            self._find("IntegrationStepQueued", where, **common, binding_id=step["binding_id"],
                       overlaps=step["overlaps"])
        if status in ("merged", "verified", "rejected", "requeued"):
            self._find("IntegrationStepMerged", where, **common, binding_id=step["binding_id"],
                       merge_commit=step["merge_commit"], tree=step["tree"], merge=step["merge"])
        if status == "requeued" and "requeued_after" in step:  # merged after a batch's rejected step, never verified
            if not any(e.type == "IntegrationBatchRequeued" and step["step"] in e.payload.get("requeued", [])
                       and e.payload.get("rejected_step") == step["requeued_after"] for e in self.cited):
                self._fail(f"{where} is named requeued after step {step['requeued_after']}, but no cited "
                           "IntegrationBatchRequeued queued it again")
            if step["verification_binding"] is not None or step["checks"]:
                self._fail(f"{where} is named requeued after a batch's rejected step, yet verified")
            return
        if status == "requeued" and not any(
                e.type == "IntegrationRequeued" and step["step"] in e.payload.get("requeued", []) for e in self.cited):
            self._fail(f"{where} is named requeued, but no cited IntegrationRequeued queued it again")
        batch = step.get("batch")
        checked_tree = step["tree"]
        if status in ("verified", "requeued") and batch is not None:
            # verified by one check run on the merged tree of the batch's last step, which holds this step's merge
            if not batch["first_step"] <= step["step"] <= batch["last_step"]:
                self._fail(f"{where} is named verified with steps {batch['first_step']}..{batch['last_step']}, "
                           "which do not include it")
            verified = self._find("IntegrationBatchVerified", where, first_step=batch["first_step"],
                                  last_step=batch["last_step"], verification_binding=step["verification_binding"],
                                  tree=batch["tree"])
            if step["task_id"] not in verified.payload["tasks"]:
                self._fail(f"{where}'s task is not among the tasks its batch's check verified")
            if sorted(c["check_id"] for c in verified.payload["checks"]) != sorted(
                    c["check_id"] for c in step["checks"]):
                self._fail(f"{where} was verified by other check runs than the receipt names")
            checked_tree = batch["tree"]
        elif status in ("verified", "requeued"):
            verified = self._find("IntegrationStepVerified", where, **common,
                                  verification_binding=step["verification_binding"], tree=step["tree"])
            if sorted(c["check_id"] for c in verified.payload["checks"]) != sorted(
                    c["check_id"] for c in step["checks"]):
                self._fail(f"{where} was verified by other check runs than the receipt names")
        elif status == "rejected":
            self._find("IntegrationStepRejected", where, **common, verification_binding=step["verification_binding"],
                       code=step["code"])
        elif status == "conflicted":
            self._find("IntegrationStepConflicted", where, **common, binding_id=step["binding_id"],
                       reason=step["code"], **({"paths": step["paths"]} if "paths" in step else {}))
        elif status == "failed":
            self._find("IntegrationStepFailed", where, step=step["step"], code=step["code"])
        elif status != "merged":
            self._fail(f"{where} has status {status!r}, which no sealed receipt has")
        if step["verification_binding"] is not None and step["checks"]:
            self._find("CandidatePinned", f"{where}'s re-verified tree", binding_id=step["verification_binding"],
                       commit=step["verification_commit"], tree=checked_tree)
        for check in step["checks"]:
            self._check(check, where, step["verification_binding"])

    def _check(self, check: dict[str, Any], where: str, binding_id: str) -> None:
        name = f"check {check['check']} ({check['check_id']}) of {where}"
        if check["binding_id"] != binding_id:
            self._fail(f"{name} names candidate {check['binding_id']!r}, not {binding_id!r}")
        found = self._find(None, name, check_id=check["check_id"], check=check["check"],
                           binding_id=check["binding_id"], config_sha256=check["config_sha256"],
                           output_sha256=check["output_sha256"], types=CHECK_EVENT_TYPES)
        if CHECK_EVENT_TYPES[found.type] != check["result"]:
            self._fail(f"{name} {CHECK_EVENT_TYPES[found.type]} in the ledger; the receipt says {check['result']}")
        self._find("CandidatePinned", f"the candidate {name} ran on", binding_id=check["binding_id"],
                   commit=check["commit"])
        if check.get("tests") is not None:
            self._tests(_object(check["tests"], f"{name}: tests"), name, check)

    def _tests(self, tests: dict[str, Any], name: str, check: dict[str, Any]) -> None:
        """The report and judgment the receipt states for a check are the cited events', and they bear its result
        out: a check judged relative to the base passed only with no new failure, each known one failing in the
        base's cited report too."""
        missing = {"judge", "report_sha256", "problem", "failing", "new_failures", "known_failures", "base"} - set(tests)
        if missing:
            self._fail(f"{name}: tests lacks {', '.join(sorted(missing))}")
        reported = self._find("CheckTestsReported", f"the test report of {name}", check_id=check["check_id"],
                              binding_id=check["binding_id"], judge=tests["judge"],
                              report_sha256=tests["report_sha256"], problem=tests["problem"],
                              new_failures=tests["new_failures"], known_failures=tests["known_failures"])
        failing = sorted(f["id"] for f in reported.payload["failing"])
        if _list(tests["failing"], f"{name}: tests.failing") != failing:
            self._fail(f"the failing tests of {name} are not those its cited report names")
        base = tests["base"]
        if base is not None:
            base = _object(base, f"{name}: tests.base")
            if {"binding_id", "check_id", "failing"} - set(base):
                self._fail(f"{name}: tests.base lacks binding_id, check_id or failing")
            if (reported.payload["base_binding_id"], reported.payload["base_check_id"]) != (
                    base["binding_id"], base["check_id"]):
                self._fail(f"{name} names another base check than its cited report was judged against")
            if base["failing"] is not None:
                found = self._find("CheckTestsReported", f"the base's test report {name} was judged against",
                                   check_id=base["check_id"], binding_id=base["binding_id"])
                if sorted(f["id"] for f in found.payload["failing"]) != _list(base["failing"], f"{name}: base"):
                    self._fail(f"the base's failing tests {name} names are not those of the base's cited report")
        if check["result"] == "passed" and tests["judge"] == "relative-to-base":
            known = set(_list(tests["known_failures"] or [], f"{name}: known_failures"))
            if tests["new_failures"] or known != set(failing) or known and (
                    base is None or base["failing"] is None or not known <= set(base["failing"])):
                self._fail(f"{name} passed relative to the base, but its failing tests are not all failing in the "
                           "base's cited report")

    def _find(self, type_: str | None, what: str, *, types: Iterable[str] = (), **fields: Any) -> _Cited:
        wanted = {type_} if type_ else set(types)
        for event in self.cited:
            if event.type in wanted and all(_same(event.payload.get(k, _ABSENT), v) for k, v in fields.items()):
                return event
        named = type_ or "/".join(sorted(wanted))
        same_type = [e for e in self.cited if e.type in wanted]
        differing = sorted({k for e in same_type for k, v in fields.items() if not _same(e.payload.get(k, _ABSENT), v)})
        self._fail(f"no cited {named} event says what the receipt says of {what}"
                   + (f" (it differs in {', '.join(differing)})" if differing else ""))
        raise AssertionError  # unreachable

    @staticmethod
    def _fail(message: str) -> NoReturn:
        raise VerificationFailed(Code.RECEIPT_CONTRADICTS_EVENT, message)


_ABSENT = object()


def _same(found: Any, said: Any) -> bool:
    """Equal as JSON, strictly: true is not 1, and 1 is not 1.0."""
    if found is _ABSENT:
        return False
    try:
        return canonical_json(found) == canonical_json(said)
    except CanonicalJSONError:
        return False


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise VerificationFailed(Code.BAD_STATEMENT, f"{where} is not a JSON object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise VerificationFailed(Code.BAD_STATEMENT, f"{where} is not a list")
    return value


def _integer(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 2**53 - 1:
        raise VerificationFailed(Code.BAD_STATEMENT, f"{where} is not a position (a whole number from 1)")
    return value


def _hex(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) != 64 or not _HEX64.issuperset(value):
        raise VerificationFailed(Code.BAD_STATEMENT, f"{where} is not a sha256 in lowercase hex")
    return value


def _path(value: Any, where: str) -> list[bytes]:
    """An audit path: hex hashes. A malformed one proves nothing: bad-proof."""
    if not isinstance(value, list) or not all(isinstance(h, str) and len(h) == 64 and _HEX64.issuperset(h)
                                              for h in value):
        raise VerificationFailed(Code.BAD_PROOF, f"the audit path of {where} is not a list of sha256 hex hashes")
    return [bytes.fromhex(h) for h in value]


def _base64(value: Any, where: str) -> bytes:
    try:
        data = base64.b64decode(value, validate=True) if isinstance(value, str) else None
    except ValueError:  # binascii.Error is one
        data = None
    if data is None or base64.b64encode(data).decode("ascii") != value:
        raise VerificationFailed(Code.BAD_STATEMENT, f"{where} is not canonical standard base64")
    return data


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _few(positions: Any) -> str:
    if not isinstance(positions, list):
        return _shown(positions)
    text = ", ".join(str(p) for p in positions[:8])
    return text + (f" ... ({len(positions)} in all)" if len(positions) > 8 else "")
