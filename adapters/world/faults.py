"""Named crash points: DOCKET_FAULT=<point> makes the process SIGKILL itself there.

Tests crash at each point and prove that replay converges (DESIGN.md, promise 2).
The effector's points are shared by every intent type; DOCKET_FAULT=<point>@<intent
type name> (e.g. ``effector:before-act@WorkerLaunchRequested.v1``) crashes there
only for that type. DOCKET_FAULT=pause:<point> stops the process there instead (SIGSTOP), until a test
continues it: another process can then be shown what it finds meanwhile.
"""

from __future__ import annotations

import os

__all__ = ["CRASH_POINTS", "armed", "crash_point"]

CRASH_POINTS = {
    "store:before-commit": "events and digests written, transaction not yet committed",
    "run-open:after-intent": "RunOpened and its base-pin intent committed, effector not started",
    "effector:before-observe": "intent read, world not yet observed",
    "effector:after-observe": "world observed, outcome not yet recorded",
    "effector:before-act": "the world is positively in the state before the effect; not acted on yet",
    "effector:after-act": "the effect was carried out (a ref made, a process started held at its gate, a group "
                          "signalled); not observed again, outcome not yet recorded",
    "launch:before-gate": "the launched process's identity is recorded; its gate is not opened yet",
    "launch:after-gate": "the gate is open and the agent runs; supervision has not started",
    "supervise:before-exit": "the worker's process ended; WorkerExited not yet recorded",
    "supervise:before-pin": "WorkerExited recorded; the worktree not yet captured for its candidate",
    "pin:after-capture": "the worktree captured twice (objects written, unreferenced); the pin intent not recorded",
    "pin:before-push": "a candidate pinned in the repository, not yet pushed to the run's shared git remote",
    "workspace:before-rename": "a workspace's (or an execution's) files, index and git dir are written in its staging "
                               "folder; not renamed into place",
    "workspace:after-rename": "a workspace (or an execution) is in place; its creation not yet observed",
    "execution-pool:after-take": "an idle pooled execution's records deleted to bring it to a new commit; its folder "
                                 "not yet changed (execution_pool.py)",
    "execution-pool:before-place": "a pooled execution brought to its commit and recorded as placed; not yet renamed "
                                   "to the execution's path",
    "execution-pool:after-place": "a pooled execution renamed to the execution's path; its creation not yet observed",
    "execution-pool:after-give-back": "an execution renamed back into the pool; not yet compared with its records, "
                                      "repaired and recorded idle",
    "check:after-request": "CheckRequested and its execution intent recorded; the execution not yet made",
    "check:before-gate": "the check's process identity is recorded; its gate is not opened yet",
    "check:after-exit": "the check's process ended; its execution not inspected, no result recorded",
    "check:before-result": "the execution inspected and artifacts copied back; the result not yet recorded",
    "check:after-result": "the check's result recorded; its execution's removal not yet asked for",
    "base:after-check": "a check's result on the run's base recorded (adapters/service_layer/use_cases/base_checks.py); the candidate "
                        "that asked for it not yet judged",
    "base-tests:after-check": "a check's result on a candidate's base-tests tree recorded "
                              "(adapters/service_layer/use_cases/base_tests.py); the candidate not yet judged",
    "handoff:after-observe": "the candidate's ref observed for a handoff confirmation; nothing decided or recorded",
    "integrate:after-prepare": "IntegrationPrepared recorded (v2: the queue opened as the first task passed); no "
                               "step merged yet",
    "integrate:after-merge-computed": "a step's merge commit written to the object store (unreferenced); its intent "
                                      "not recorded",
    "integrate:before-push": "a step's merge at the integration ref in this clone, not yet on the run's shared git "
                             "remote",
    "integrate:after-step": "IntegrationStepMerged recorded; the merged tree not yet pinned for re-verification",
    "integrate:before-verified": "every required check ran on the merged tree; IntegrationStepVerified not recorded",
    "integrate:before-rejected": "a required check did not pass on a merged tree; IntegrationStepRejected (or, for a "
                                 "batch, IntegrationBatchFailed) not recorded",
    "integrate:after-batch-failed": "IntegrationBatchFailed recorded; the batch's bisection not started",
    "integrate:after-speculation-started": ("IntegrationVerificationStarted recorded ([integration] speculate); "
                                            "its checks not started"),
    "integrate:before-target": "every step verified; the target's intent not yet recorded",
    "integrate:after-queued": "a passed task's step queued (IntegrationStepQueued); not merged yet",
    "go:before-repair": "a task's step was dropped from the queue; its worktree not yet made again at the "
                        "integrated head",
    "integrate:after-checkout-update": "the index and files of the checkout that has the target out moved to the "
                                       "integrated tree; the branch not yet moved",
    "go:before-launch": "docket go chose a task's next generation; nothing of it recorded yet",
    "go:after-agent": "docket go saw its agent's end recorded; the generation not judged yet",
    "go:after-pin": "docket go pinned a generation's work; its checks not run yet",
    "go:before-handoff": "every required check passed on a task's candidate; its handoff not offered yet",
    "go:before-feedback": "a generation judged failed; TaskFeedbackRecorded not recorded yet",
    "go:before-answered": "a generation that ended asking has its answers; TaskAnswered not recorded yet",
    "request:before-reply": "a worker's request decided and recorded; its reply not sent to the agent yet",
    "answer:after-record": "docket answer recorded QuestionAnswered; its views not updated, nothing printed",
    "go:before-integrate": "every task finished; the merge queue not started",
    "go:before-seal": "the integration ended; the receipt not sealed",
    "go:before-complete": "the receipt sealed (and exported); RunCompleted not recorded",
    "seal:before-record": "a run's receipt built and its Merkle root computed (block hashes kept); ReceiptSealed not "
                          "recorded",
    "hook:after-request": "the hooks of the run's new events are recorded (HookRequested); none driven yet",
    "hook:after-claim": "a hook's started-marker made (it is claimed); its command not started",
    "hook:after-start": "a hook's command started (its gate opened); docket does not wait for it",
    "hook:after-exit": "a hook's command ended and its result file is written; HookFinished not recorded",
    "ref:after-lock": "a ref under refs/docket/ locked (its <ref>.lock made, as dulwich does first) by a writer that "
                      "recorded who it is (ref_locks.py); the ref not yet written. Scoped by the folder under "
                      "refs/docket/ (ref:after-lock@candidates)",
    "effector:after-outcome": "outcome committed, projections not yet caught up",
    "projection:before-commit": "projection rows written, transaction not yet committed",
}

_ARMED = os.environ.get("DOCKET_FAULT")


def armed(name: str, scope: str | None = None) -> bool:
    """Whether crash_point(name, scope) would kill this process (for a point that must first leave its trace)."""
    assert name in CRASH_POINTS, name
    return _ARMED is not None and (_ARMED == name or (scope is not None and _ARMED == f"{name}@{scope}"))


def crash_point(name: str, scope: str | None = None) -> None:
    assert name in CRASH_POINTS, name
    if _ARMED is None:
        return  # not armed (every run but a crash test's): signal is imported only by one that is
    import signal

    if armed(name, scope):
        os.kill(os.getpid(), signal.SIGKILL)
    if _ARMED == f"pause:{name}" or (scope is not None and _ARMED == f"pause:{name}@{scope}"):
        os.kill(os.getpid(), signal.SIGSTOP)  # DOCKET_FAULT=pause:<point>: stopped there until a SIGCONT (tests)
