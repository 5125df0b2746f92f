"""A check judged as configured, and the run's base checked for it: once per run, on the base commit's tree.

A suite that already fails at the base fails every candidate judged by its exit;
knowing that, docket says so (in the feedback, the summary and the status), and a
check judged ``relative-to-base`` compares a candidate's failing tests with the
base's. The base is pinned as a candidate of its own (boundary ``base``, task id
the run's id: it is no task's work; the commit of the base's tree on the base
commit), so its check runs are recorded, observed and settled exactly as a task's
are, and a receipt can cite them.

Each check runs on the base once per run and configuration: a result recorded (by
this process, or by one that crashed after recording it) is reused, and threads of
one docket process take turns, so it never runs twice.

``run_check`` runs one attempt of a check on a candidate (``checks.run_attempt``),
after the base's result when the check is judged relative to the base.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ....domain import candidate as candidate_aggregate
from ....domain.check import concluded
from ...world import faults
from ...world.clock import Clock
from .checks import Baseline, CheckOutcome, CheckSpec, pinned_candidate, run_attempt
from ..kernel.ledger import Ledger
from .runs import load_run

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort

__all__ = ["BOUNDARY", "BaseCheck", "base_candidate", "check_base", "run_check"]

BOUNDARY = "base"

_guard = threading.Lock()
_turns: dict[tuple[str, str, str], threading.Lock] = {}  # (ledger, run, check digest) -> whose turn it is


@dataclass(frozen=True)
class BaseCheck:
    """A required check's recorded result on the run's base."""

    check: str
    result: str  # passed | failed | timed-out
    code: str | None
    binding_id: str
    check_id: str
    commit: str  # the base commit
    failing: frozenset[str] | None  # the tests failing there by its report (None: it has no usable report)

    @property
    def baseline(self) -> Baseline:
        return Baseline(self.binding_id, self.check_id, frozenset() if self.result == "passed" else self.failing)


def run_check(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str, spec: CheckSpec, *,
              artifact_dir: str | None, docket_dir: Path, ledger_path: Path) -> CheckOutcome:
    """Run one attempt of the check against the candidate and record its result (``checks.run_attempt``).

    A check judged relative to the base needs the base's result first (``check_base``: run once per run, then
    reused); a command that failed only tests failing there too passes."""
    candidate = pinned_candidate(ledger, binding)
    baseline = None
    if spec.judge == "relative-to-base" and candidate.boundary != BOUNDARY:
        baseline = check_base(ledger, clock, effector, candidate.run_id, spec,
                              repository=effector.local(candidate.repository),
                              artifact_dir=artifact_dir, docket_dir=docket_dir, ledger_path=ledger_path).baseline
    return run_attempt(ledger, clock, effector, binding, spec, baseline=baseline, artifact_dir=artifact_dir,
                       docket_dir=docket_dir, ledger_path=ledger_path)


def base_candidate(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, *,
                   repository: Path) -> candidate_aggregate.Candidate:
    """The run's base pinned as a candidate (pinned once; the same candidate every time after)."""
    from ...world.files.paths import integration_output_path
    from .candidates import pin_tree

    run = load_run(ledger, run_id)
    assert run.base_commit is not None, f"run {run_id} has no pinned base"
    output = integration_output_path(repository, run_id, BOUNDARY)  # where its checks' artifacts are copied back
    from ...world.files.files import own_folder

    own_folder(repository / "docket", output)
    tree = effector.ports.capture.commit_tree(repository, run.base_commit)
    return pin_tree(ledger, clock, effector, run_id, run_id, repository=repository, parent=run.base_commit,
                    tree=tree, boundary=BOUNDARY, source=f"base of {run_id}", output=output)


def check_base(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, spec: CheckSpec, *, repository: Path,
               artifact_dir: str | None, docket_dir: Path, ledger_path: Path) -> BaseCheck:
    """The check's result on the run's base: the one recorded under this configuration, or a new run of it."""
    with _turn(str(ledger_path), run_id, spec.config_sha256):
        candidate = base_candidate(ledger, clock, effector, run_id, repository=repository)
        done = concluded(candidate, spec.name, spec.config_sha256)
        if done is None:
            outcome = run_attempt(ledger, clock, effector, candidate.binding_id, spec, baseline=None,
                                  artifact_dir=artifact_dir, docket_dir=docket_dir,
                                  ledger_path=ledger_path)  # judged by its exit: it is the base
            faults.crash_point("base:after-check")
            checked = ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(candidate.binding_id))
            assert checked is not None
            candidate = checked
            done = candidate.check_run(outcome.check_id)
    tests = done.tests
    failing = None if tests is None or tests.problem else frozenset(f.id for f in tests.failing)
    return BaseCheck(spec.name, done.result or "failed", done.result_code, candidate.binding_id, done.check_id,
                     candidate.parent, failing)


def _turn(*key: str) -> threading.Lock:
    with _guard:
        return _turns.setdefault(key, threading.Lock())  # type: ignore[arg-type]
