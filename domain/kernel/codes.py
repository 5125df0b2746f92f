"""Every error code docket reports, in one place, and the exit status each is reported with.

A code is part of docket's interface: it is printed as ``docket: error: <code>: <message>``, documented in
docs/cli.md and matched by scripts, so its text never changes. A constant equals its text, so code that decides by
a code compares with ``Code.X``, never with a string typed out again (tests/unit/test_codes.py fails on one).

``Code`` is a class of string constants, not an ``enum.Enum``: an Enum of these 260-odd members takes about 3 ms to
build (10 on a loaded machine), paid at the start of every command, since every module that raises imports it;
constants cost a tenth of a millisecond. A type checker sees each as its literal text (``Final``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["EXIT_STATUS", "Code", "all_codes", "exit_status"]


class Code:
    ADDRESS_IN_USE: Final = "address-in-use"
    AGENT_AND_COMMAND: Final = "agent-and-command"
    AGENT_NOT_FOUND: Final = "agent-not-found"
    ALREADY_ANSWERED: Final = "already-answered"
    ALREADY_DECIDED: Final = "already-decided"
    AMBIGUOUS_ID: Final = "ambiguous-id"
    ANCHOR_NOT_FOUND: Final = "anchor-not-found"
    ANSWER_AND_CHOICE: Final = "answer-and-choice"
    ANSWER_FROM_AGENT: Final = "answer-from-agent"
    ARTIFACT_CONFLICT: Final = "artifact-conflict"
    ARTIFACT_ESCAPE: Final = "artifact-escape"
    ARTIFACT_NOT_A_FILE: Final = "artifact-not-a-file"
    ARTIFACT_SYMLINK: Final = "artifact-symlink"
    AWAITING_APPROVAL: Final = "awaiting-approval"
    BAD_ADDRESS: Final = "bad-address"
    BAD_ANCHOR: Final = "bad-anchor"
    BAD_ANSWER: Final = "bad-answer"
    BAD_APPROVER: Final = "bad-approver"
    BAD_ARTIFACT_DIR: Final = "bad-artifact-dir"
    BAD_BRANCH_NAME: Final = "bad-branch-name"
    BAD_BUNDLE: Final = "bad-bundle"
    BAD_BUNDLE_PATH: Final = "bad-bundle-path"
    BAD_CANDIDATE: Final = "bad-candidate"
    BAD_CANDIDATE_REF: Final = "bad-candidate-ref"
    BAD_CONFIG: Final = "bad-config"
    BAD_COST: Final = "bad-cost"
    BAD_COUNT: Final = "bad-count"
    BAD_DATABASE_URL: Final = "bad-database-url"
    BAD_DURATION: Final = "bad-duration"
    BAD_ENCODING: Final = "bad-encoding"
    BAD_ENVELOPE: Final = "bad-envelope"
    BAD_ENVIRONMENT: Final = "bad-environment"
    BAD_EXECUTION_PATH: Final = "bad-execution-path"
    BAD_HOST: Final = "bad-host"
    BAD_ID: Final = "bad-id"
    BAD_INCLUDE: Final = "bad-include"
    BAD_KEY: Final = "bad-key"
    BAD_KEY_PATH: Final = "bad-key-path"
    BAD_LEDGER_PATH: Final = "bad-ledger-path"
    BAD_OBJECT_ID: Final = "bad-object-id"
    BAD_OUTPUT_PATH: Final = "bad-output-path"
    BAD_PLACEHOLDER: Final = "bad-placeholder"
    BAD_PORT: Final = "bad-port"
    BAD_POSITION: Final = "bad-position"
    BAD_PROMPT: Final = "bad-prompt"
    BAD_PROMPT_FILE: Final = "bad-prompt-file"
    BAD_PROOF: Final = "bad-proof"
    BAD_REF: Final = "bad-ref"
    BAD_REPOSITORY_ID: Final = "bad-repository-id"
    BAD_REQUEST: Final = "bad-request"
    BAD_RESOURCE: Final = "bad-resource"
    BAD_SIGNATURE: Final = "bad-signature"
    BAD_SIZE: Final = "bad-size"
    BAD_STATEMENT: Final = "bad-statement"
    BAD_TASKS: Final = "bad-tasks"
    BAD_TASKS_FILE: Final = "bad-tasks-file"
    BAD_TIME: Final = "bad-time"
    BAD_TRAILER: Final = "bad-trailer"
    BAD_TRUST_FILE: Final = "bad-trust-file"
    BAD_WORKTREE_PATH: Final = "bad-worktree-path"
    BASE_MISSING: Final = "base-missing"
    BASE_PIN_FAILED: Final = "base-pin-failed"
    BASE_TESTS_FAILED: Final = "base-tests-failed"
    BRANCH_NOT_A_COMMIT: Final = "branch-not-a-commit"
    BUDGET_EXHAUSTED: Final = "budget-exhausted"
    BUNDLE_LINES_MISMATCH: Final = "bundle-lines-mismatch"
    BUNDLE_NOT_FOUND: Final = "bundle-not-found"
    CANDIDATE_AMBIGUOUS: Final = "candidate-ambiguous"
    CANDIDATE_DIVERGED: Final = "candidate-diverged"
    CANDIDATE_NOT_FOUND: Final = "candidate-not-found"
    CANDIDATE_NOT_PINNED: Final = "candidate-not-pinned"
    CANDIDATE_NOT_RELEASED: Final = "candidate-not-released"
    CANDIDATE_UNSTABLE: Final = "candidate-unstable"
    CANNOT_LISTEN: Final = "cannot-listen"
    CHAIN_BROKEN: Final = "chain-broken"
    CHECK_CONFIG_CHANGED: Final = "check-config-changed"
    CHECK_FAILED: Final = "check-failed"
    CHECK_LAUNCHED: Final = "check-launched"
    CHECK_NOT_CONFIGURED: Final = "check-not-configured"
    CHECK_NOT_FOUND: Final = "check-not-found"
    CHECK_STATEMENT_MISMATCH: Final = "check-statement-mismatch"
    CITED_EVENTS_MISMATCH: Final = "cited-events-mismatch"
    CONCURRENT_UPDATE: Final = "concurrent-update"
    CONFIG_CHANGE: Final = "config-change"
    CONFIG_ENCODING: Final = "config-encoding"
    CONFIG_NOT_A_FILE: Final = "config-not-a-file"
    CONFIG_NOT_FOUND: Final = "config-not-found"
    CONFIG_SYMLINK: Final = "config-symlink"
    CONFIG_TOO_LARGE: Final = "config-too-large"
    CONFIG_UNREADABLE: Final = "config-unreadable"
    CONFIG_UNTRUSTED: Final = "config-untrusted"
    DATABASE: Final = "database"
    DEPENDENCIES_UNSETTLED: Final = "dependencies-unsettled"
    DRIVER_LOST: Final = "driver-lost"
    EFFECTOR_CURSOR_DRIFT: Final = "effector-cursor-drift"
    EMPTY_GOAL: Final = "empty-goal"
    EVENT_DIGEST_MISMATCH: Final = "event-digest-mismatch"
    EXECUTION_BUSY: Final = "execution-busy"
    EXECUTION_NOT_READY: Final = "execution-not-ready"
    EXECUTION_UNSAFE_TREE: Final = "execution-unsafe-tree"
    FILE_TOO_LARGE: Final = "file-too-large"
    FOLLOW_UP_REFUSED: Final = "follow-up-refused"
    FOREIGN_LEDGER: Final = "foreign-ledger"
    GENERATION_USED: Final = "generation-used"
    HANDOFF_NOT_OFFERED: Final = "handoff-not-offered"
    HANDOFF_REJECTED: Final = "handoff-rejected"
    HEAD_MOVED: Final = "head-moved"
    HEAD_NOT_PROVEN: Final = "head-not-proven"
    IMPORT_OUTSIDE_EXECUTION: Final = "import-outside-execution"
    INCONSISTENT: Final = "inconsistent"
    INTEGRATION_CONFLICT: Final = "integration-conflict"
    INTEGRATION_NOT_VERIFIED: Final = "integration-not-verified"
    INTEGRATION_PREPARED: Final = "integration-prepared"
    INTEGRATION_REF_MOVED: Final = "integration-ref-moved"
    INTEGRATION_REJECTED: Final = "integration-rejected"
    INTENTS_PENDING: Final = "intents-pending"
    INTERNAL: Final = "internal"
    INTERNAL_ERROR: Final = "internal-error"
    INTERRUPTED: Final = "interrupted"
    SPECULATION_CANCELLED: Final = "speculation-cancelled"
    INVALID_INPUT: Final = "invalid-input"
    JSON_AND_FOLLOW: Final = "json-and-follow"
    KEY_EXISTS: Final = "key-exists"
    KEY_NOT_FOUND: Final = "key-not-found"
    LAUNCHED_ELSEWHERE: Final = "launched-elsewhere"
    LAUNCH_FAILED: Final = "launch-failed"
    LEASE_EXPIRED: Final = "lease-expired"
    LEASE_HELD: Final = "lease-held"
    LEASE_HOLDER_UNKNOWN: Final = "lease-holder-unknown"
    LEASE_NOT_EXPIRED: Final = "lease-not-expired"
    LEASE_NOT_HELD: Final = "lease-not-held"
    LEDGER_BUSY: Final = "ledger-busy"
    LEDGER_CUT: Final = "ledger-cut"
    LEDGER_IS_A_DIRECTORY: Final = "ledger-is-a-directory"
    LEDGER_REPLACED: Final = "ledger-replaced"
    LEDGER_REWRITTEN: Final = "ledger-rewritten"
    LEDGER_UNVERIFIABLE: Final = "ledger-unverifiable"
    LEDGER_VANISHED: Final = "ledger-vanished"
    LOG_NOT_FOUND: Final = "log-not-found"
    MERKLE_NODE_DRIFT: Final = "merkle-node-drift"
    MERKLE_ROOT_MISMATCH: Final = "merkle-root-mismatch"
    MISSING_DEPENDENCY: Final = "missing-dependency"
    NOTHING_TO_APPROVE: Final = "nothing-to-approve"
    NOTHING_TO_INTEGRATE: Final = "nothing-to-integrate"
    NOT_A_LEDGER: Final = "not-a-ledger"
    NOT_A_QUESTION: Final = "not-a-question"
    NOT_A_REGULAR_FILE: Final = "not-a-regular-file"
    NOT_A_REPOSITORY: Final = "not-a-repository"
    NOT_INTEGRATED: Final = "not-integrated"
    NOT_RECORDED: Final = "not-recorded"
    NOT_SEALED: Final = "not-sealed"
    NOT_SHARED: Final = "not-shared"
    NOT_THIS_WORKER: Final = "not-this-worker"
    NO_AGENT: Final = "no-agent"
    NO_CHANNEL: Final = "no-channel"
    NO_CHECKS: Final = "no-checks"
    NO_CHOICES: Final = "no-choices"
    NO_LEDGER: Final = "no-ledger"
    NO_RUN: Final = "no-run"
    NO_SUCH_CHOICE: Final = "no-such-choice"
    NO_TARGET: Final = "no-target"
    NO_TASKS: Final = "no-tasks"
    NO_WORKER: Final = "no-worker"
    NO_WORKTREE: Final = "no-worktree"
    OLD_AFTER_NEW: Final = "old-after-new"
    OS_ERROR: Final = "os-error"
    OUTCOME_UNKNOWN: Final = "outcome-unknown"
    OUTPUT_EXISTS: Final = "output-exists"
    OUTPUT_FAILED: Final = "output-failed"
    PIN_CHANGED: Final = "pin-changed"
    PLAN_DIFFERS: Final = "plan-differs"
    POSITION_NOT_FOUND: Final = "position-not-found"
    PROJECTION_DRIFT: Final = "projection-drift"
    PROMPT_CHANGED: Final = "prompt-changed"
    PROMPT_MISSING: Final = "prompt-missing"
    PROMPT_TOO_LARGE: Final = "prompt-too-large"
    QUESTION_EXPIRED: Final = "question-expired"
    QUEUE_CLOSED: Final = "queue-closed"
    QUEUE_FIXED: Final = "queue-fixed"
    QUEUE_STOPPED: Final = "queue-stopped"
    RECEIPT_CONTRADICTS_EVENT: Final = "receipt-contradicts-event"
    RECEIPT_DIGEST_MISMATCH: Final = "receipt-digest-mismatch"
    RECEIPT_FOR_ANOTHER_COMMIT: Final = "receipt-for-another-commit"
    RECEIPT_FOR_ANOTHER_REPOSITORY: Final = "receipt-for-another-repository"
    RECEIPT_FOR_ANOTHER_RUN: Final = "receipt-for-another-run"
    REFUSED: Final = "refused"
    REMOTE_UNREACHABLE: Final = "remote-unreachable"
    REPORT_MALFORMED: Final = "report-malformed"
    REPORT_NOT_JUNIT: Final = "report-not-junit"
    REPORT_REFUSED: Final = "report-refused"
    REPOSITORY_PATH_UNSUPPORTED: Final = "repository-path-unsupported"
    REPORT_TOO_DEEP: Final = "report-too-deep"
    REPORT_TOO_LARGE: Final = "report-too-large"
    REPOSITORY_UNREADABLE: Final = "repository-unreadable"
    REQUEST_ID_CONFLICT: Final = "request-id-conflict"
    RUN_BASE_NOT_PINNED: Final = "run-base-not-pinned"
    RUN_CLOSED: Final = "run-closed"
    RUN_EXISTS: Final = "run-exists"
    RUN_FAILED: Final = "run-failed"
    RUN_NOT_ACTIVE: Final = "run-not-active"
    RUN_NOT_FOUND: Final = "run-not-found"
    RUN_NOT_PAUSED: Final = "run-not-paused"
    RUN_NOT_PLANNED: Final = "run-not-planned"
    SAME_LEDGER: Final = "same-ledger"
    SANDBOX_UNAVAILABLE: Final = "sandbox-unavailable"
    SCHEMA_MISMATCH: Final = "schema-mismatch"
    SCRIPT_NOT_FROM_BASE: Final = "script-not-from-base"
    SETUP_FAILED: Final = "setup-failed"
    SNAPSHOT_DRIFT: Final = "snapshot-drift"
    STALE_GENERATION: Final = "stale-generation"
    STALE_HEAD: Final = "stale-head"
    STALE_TOKEN: Final = "stale-token"
    STEP_CONFLICTED: Final = "step-conflicted"
    STEP_NOT_MERGED: Final = "step-not-merged"
    STEP_NOT_NEXT: Final = "step-not-next"
    STEP_REJECTED: Final = "step-rejected"
    STILL_WAITING: Final = "still-waiting"
    SYMLINK_REFUSED: Final = "symlink-refused"
    TARGET_CHECKED_OUT: Final = "target-checked-out"
    TARGET_KEEPS_MOVING: Final = "target-keeps-moving"
    TARGET_MISSING: Final = "target-missing"
    TARGET_MOVED: Final = "target-moved"
    TARGET_NOT_EMPTY: Final = "target-not-empty"
    TARGET_UNREADABLE: Final = "target-unreadable"
    TASKS_UNFINISHED: Final = "tasks-unfinished"
    TASK_EXISTS: Final = "task-exists"
    TASK_FINISHED: Final = "task-finished"
    TASK_NOT_FOUND: Final = "task-not-found"
    TASK_NOT_IN_RUN: Final = "task-not-in-run"
    TIME_OUT_OF_RANGE: Final = "time-out-of-range"
    TOO_LONG: Final = "too-long"
    TOO_MANY_CHANGES: Final = "too-many-changes"
    TOO_MANY_REQUESTS: Final = "too-many-requests"
    TOO_MANY_TRUSTED_PATHS: Final = "too-many-trusted-paths"
    TREE_TOO_DEEP: Final = "tree-too-deep"
    UNKNOWN_BRANCH: Final = "unknown-branch"
    UNKNOWN_CHECK: Final = "unknown-check"
    UNKNOWN_EVENT_TYPE: Final = "unknown-event-type"
    UNKNOWN_GENERATION: Final = "unknown-generation"
    UNKNOWN_QUESTION: Final = "unknown-question"
    UNKNOWN_REMOTE: Final = "unknown-remote"
    UNPINNED_WORK: Final = "unpinned-work"
    UNPRESERVED_CANDIDATE: Final = "unpreserved-candidate"
    UNREADABLE_FILE: Final = "unreadable-file"
    UNSAFE_PATH: Final = "unsafe-path"
    UNSAFE_TREE_PATH: Final = "unsafe-tree-path"
    UNTRUSTED_ANSWERER: Final = "untrusted-answerer"
    USAGE: Final = "usage"
    VERIFY_INCOMPLETE: Final = "verify-incomplete"
    WORKER_ALIVE: Final = "worker-alive"
    WORKER_EXISTS: Final = "worker-exists"
    WORKER_HAS_OTHER_TASK: Final = "worker-has-other-task"
    WORKER_LAUNCHING: Final = "worker-launching"
    WORKER_NOT_FOUND: Final = "worker-not-found"
    WORKER_NOT_RUNNING: Final = "worker-not-running"
    WORKER_RUNNING: Final = "worker-running"
    WORKER_WITHOUT_TASK: Final = "worker-without-task"
    WORKTREE_BUSY: Final = "worktree-busy"
    WORKTREE_ELSEWHERE: Final = "worktree-elsewhere"
    WORKTREE_NOT_REGULAR: Final = "worktree-not-regular"
    WORKTREE_UNREADABLE: Final = "worktree-unreadable"
    WRONG_KEY: Final = "wrong-key"
    WRONG_PAYLOAD_TYPE: Final = "wrong-payload-type"


def all_codes() -> dict[str, str]:
    """Every code: its constant's name -> its text."""
    return {name: text for name, text in vars(Code).items() if name.isupper()}


# The exit status of each code raised as an error: the status of the error family it is raised with
# (domain/kernel/errors.py). tests/unit/test_codes.py holds every raise site to it, and docs/cli.md's exit-code lists.
# Codes that are never an error's (warnings, reasons recorded in events) have none.
EXIT_STATUS: dict[str, int] = {
    **dict.fromkeys((
        Code.BAD_BUNDLE, Code.BAD_ENVELOPE, Code.BAD_PROOF, Code.BAD_SIGNATURE, Code.BAD_STATEMENT,
        Code.BUNDLE_LINES_MISMATCH, Code.CHAIN_BROKEN, Code.CHECK_STATEMENT_MISMATCH,
        Code.CITED_EVENTS_MISMATCH, Code.EFFECTOR_CURSOR_DRIFT, Code.EVENT_DIGEST_MISMATCH,
        Code.HEAD_NOT_PROVEN, Code.INCONSISTENT, Code.LEDGER_CUT, Code.LEDGER_REPLACED, Code.LEDGER_REWRITTEN,
        Code.LEDGER_UNVERIFIABLE, Code.LEDGER_VANISHED, Code.MERKLE_NODE_DRIFT, Code.MERKLE_ROOT_MISMATCH,
        Code.PROJECTION_DRIFT, Code.PROMPT_CHANGED, Code.PROMPT_MISSING, Code.RECEIPT_CONTRADICTS_EVENT,
        Code.RECEIPT_DIGEST_MISMATCH, Code.RECEIPT_FOR_ANOTHER_COMMIT, Code.RECEIPT_FOR_ANOTHER_REPOSITORY,
        Code.RECEIPT_FOR_ANOTHER_RUN, Code.SCHEMA_MISMATCH, Code.SNAPSHOT_DRIFT, Code.VERIFY_INCOMPLETE,
        Code.WRONG_KEY, Code.WRONG_PAYLOAD_TYPE,
    ), 1),
    **dict.fromkeys((
        Code.AGENT_AND_COMMAND, Code.AMBIGUOUS_ID, Code.ANSWER_AND_CHOICE, Code.BAD_ADDRESS, Code.BAD_ANCHOR,
        Code.BAD_ANSWER, Code.BAD_APPROVER, Code.BAD_ARTIFACT_DIR, Code.BAD_BRANCH_NAME, Code.BAD_CANDIDATE,
        Code.BAD_CANDIDATE_REF, Code.BAD_CONFIG, Code.BAD_COST, Code.BAD_COUNT, Code.BAD_DATABASE_URL,
        Code.BAD_DURATION, Code.BAD_ENCODING, Code.BAD_ENVIRONMENT, Code.BAD_EXECUTION_PATH, Code.BAD_HOST,
        Code.BAD_ID, Code.BAD_INCLUDE, Code.BAD_KEY, Code.BAD_KEY_PATH, Code.BAD_LEDGER_PATH,
        Code.BAD_OBJECT_ID, Code.BAD_OUTPUT_PATH, Code.BAD_PLACEHOLDER, Code.BAD_PORT, Code.BAD_POSITION,
        Code.BAD_PROMPT, Code.BAD_REF, Code.BAD_REPOSITORY_ID, Code.BAD_REQUEST, Code.BAD_RESOURCE,
        Code.BAD_SIZE, Code.BAD_TASKS, Code.BAD_TIME, Code.BAD_TRAILER, Code.BAD_TRUST_FILE,
        Code.BAD_WORKTREE_PATH, Code.CONFIG_ENCODING, Code.CONFIG_NOT_A_FILE, Code.CONFIG_SYMLINK,
        Code.CONFIG_TOO_LARGE, Code.CONFIG_UNREADABLE, Code.DATABASE, Code.EMPTY_GOAL, Code.INVALID_INPUT,
        Code.JSON_AND_FOLLOW, Code.LEDGER_IS_A_DIRECTORY, Code.MISSING_DEPENDENCY, Code.NOT_A_LEDGER,
        Code.NOT_A_REGULAR_FILE, Code.NOT_SHARED, Code.NO_AGENT, Code.NO_CHECKS, Code.NO_CHOICES,
        Code.NO_SUCH_CHOICE, Code.NO_TARGET, Code.NO_TASKS, Code.OLD_AFTER_NEW, Code.PROMPT_TOO_LARGE,
        Code.SAME_LEDGER, Code.SYMLINK_REFUSED, Code.TIME_OUT_OF_RANGE, Code.TOO_LONG,
        Code.TOO_MANY_TRUSTED_PATHS, Code.UNKNOWN_EVENT_TYPE, Code.UNKNOWN_REMOTE, Code.UNREADABLE_FILE,
        Code.USAGE,
    ), 2),
    **dict.fromkeys((
        Code.ADDRESS_IN_USE, Code.ALREADY_ANSWERED, Code.ALREADY_DECIDED, Code.ANSWER_FROM_AGENT,
        Code.ARTIFACT_CONFLICT, Code.ARTIFACT_ESCAPE, Code.ARTIFACT_NOT_A_FILE, Code.ARTIFACT_SYMLINK,
        Code.AWAITING_APPROVAL, Code.BUDGET_EXHAUSTED, Code.CANDIDATE_AMBIGUOUS, Code.CANDIDATE_DIVERGED,
        Code.CANDIDATE_NOT_PINNED, Code.CANDIDATE_UNSTABLE, Code.CANNOT_LISTEN, Code.CHECK_CONFIG_CHANGED,
        Code.CHECK_FAILED, Code.CHECK_LAUNCHED, Code.CHECK_NOT_CONFIGURED, Code.CONCURRENT_UPDATE,
        Code.CONFIG_CHANGE, Code.CONFIG_UNTRUSTED, Code.DEPENDENCIES_UNSETTLED, Code.DRIVER_LOST,
        Code.EXECUTION_BUSY, Code.EXECUTION_NOT_READY, Code.EXECUTION_UNSAFE_TREE, Code.FILE_TOO_LARGE,
        Code.FOLLOW_UP_REFUSED, Code.FOREIGN_LEDGER, Code.GENERATION_USED, Code.HANDOFF_NOT_OFFERED,
        Code.HEAD_MOVED, Code.INTEGRATION_NOT_VERIFIED, Code.INTEGRATION_PREPARED, Code.INTEGRATION_REF_MOVED,
        Code.KEY_EXISTS, Code.LAUNCHED_ELSEWHERE, Code.LEASE_EXPIRED, Code.LEASE_HELD,
        Code.LEASE_HOLDER_UNKNOWN, Code.LEASE_NOT_EXPIRED, Code.LEASE_NOT_HELD, Code.LEDGER_BUSY,
        Code.NOTHING_TO_APPROVE, Code.NOTHING_TO_INTEGRATE, Code.NOT_A_QUESTION, Code.NOT_INTEGRATED,
        Code.NOT_SEALED, Code.NOT_THIS_WORKER, Code.NO_WORKER, Code.NO_WORKTREE, Code.OUTPUT_EXISTS,
        Code.PIN_CHANGED, Code.PLAN_DIFFERS, Code.QUESTION_EXPIRED, Code.QUEUE_CLOSED, Code.QUEUE_FIXED,
        Code.QUEUE_STOPPED, Code.REPOSITORY_PATH_UNSUPPORTED, Code.REQUEST_ID_CONFLICT,
        Code.RUN_BASE_NOT_PINNED, Code.RUN_CLOSED, Code.RUN_EXISTS, Code.RUN_NOT_ACTIVE, Code.RUN_NOT_PAUSED,
        Code.RUN_NOT_PLANNED, Code.SANDBOX_UNAVAILABLE, Code.SCRIPT_NOT_FROM_BASE, Code.STALE_GENERATION,
        Code.STALE_HEAD, Code.STALE_TOKEN, Code.STEP_CONFLICTED, Code.STEP_NOT_MERGED, Code.STEP_NOT_NEXT,
        Code.STEP_REJECTED, Code.TARGET_CHECKED_OUT, Code.TARGET_KEEPS_MOVING, Code.TARGET_MOVED,
        Code.TARGET_NOT_EMPTY, Code.TASKS_UNFINISHED, Code.TASK_EXISTS, Code.TASK_FINISHED,
        Code.TASK_NOT_IN_RUN, Code.TOO_MANY_CHANGES, Code.TREE_TOO_DEEP, Code.UNKNOWN_CHECK,
        Code.UNKNOWN_GENERATION, Code.UNPINNED_WORK, Code.UNPRESERVED_CANDIDATE, Code.UNSAFE_PATH,
        Code.UNSAFE_TREE_PATH, Code.UNTRUSTED_ANSWERER, Code.WORKER_ALIVE, Code.WORKER_EXISTS,
        Code.WORKER_HAS_OTHER_TASK, Code.WORKER_LAUNCHING, Code.WORKER_NOT_RUNNING, Code.WORKER_RUNNING,
        Code.WORKER_WITHOUT_TASK, Code.WORKTREE_BUSY, Code.WORKTREE_ELSEWHERE, Code.WORKTREE_NOT_REGULAR,
        Code.WORKTREE_UNREADABLE,
    ), 3),
    **dict.fromkeys((
        Code.INTENTS_PENDING, Code.OUTCOME_UNKNOWN, Code.REMOTE_UNREACHABLE, Code.REPOSITORY_UNREADABLE,
    ), 4),
    **dict.fromkeys((
        Code.AGENT_NOT_FOUND, Code.ANCHOR_NOT_FOUND, Code.BASE_MISSING, Code.BUNDLE_NOT_FOUND,
        Code.CANDIDATE_NOT_FOUND, Code.CHECK_NOT_FOUND, Code.CONFIG_NOT_FOUND, Code.KEY_NOT_FOUND,
        Code.LOG_NOT_FOUND, Code.NOT_A_REPOSITORY, Code.NO_CHANNEL, Code.NO_LEDGER, Code.NO_RUN,
        Code.POSITION_NOT_FOUND, Code.RUN_NOT_FOUND, Code.TASK_NOT_FOUND, Code.UNKNOWN_BRANCH,
        Code.UNKNOWN_QUESTION, Code.WORKER_NOT_FOUND,
    ), 5),
    **dict.fromkeys((
        Code.STILL_WAITING,
    ), 7),
    **dict.fromkeys((
        Code.OUTPUT_FAILED,
    ), 9),
}


def exit_status(code: str) -> int | None:
    """The exit status docket ends with when it reports code as an error; None for a code no error carries."""
    return EXIT_STATUS.get(code)
