"""A check that a candidate cannot weaken: the base's tests run on the candidate's code too.

A check's ``protected`` globs (domain/containment/protected.py; default: the test folders, test
modules, conftest.py files and pytest.ini) name the files that decide what its tests
test. When a candidate's tree holds other protected files than the run's base, and
the base holds at least one, the check also runs on its *base-tests tree*: the
candidate's tree with every protected path as the base has it (a test the candidate
changed, skipped or deleted comes back, a conftest.py or pytest.ini it added is
gone). That tree is pinned as a candidate of its own (boundary ``base-tests``, the
candidate's task, its commit on the candidate's commit, its changed paths the
candidate's protected paths it set aside), so its check runs are
recorded, observed and settled as any candidate's are, and a receipt can cite them.
The candidate passes the check only if both executions pass (judged the same way:
by exit, or relative to the base).

Each check runs on a candidate's base-tests tree once per configuration: a result
recorded (by this process, or one that crashed after recording it) is reused, and
threads of one docket process take turns, so it never runs twice.
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
from .checks import CheckSpec, pinned_candidate
from ..kernel.ledger import Ledger

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort
    from ....projections.query import ViewsConnection

__all__ = ["BOUNDARY", "BaseTests", "base_tests_candidate", "check_base_tests", "protected_paths_of"]

BOUNDARY = "base-tests"

_guard = threading.Lock()
_turns: dict[tuple[str, str, str], threading.Lock] = {}  # (ledger, candidate, check digest) -> whose turn it is


@dataclass(frozen=True)
class BaseTests:
    """A check's recorded result on a candidate's base-tests tree."""

    binding_id: str  # the base-tests candidate's
    commit: str
    run: candidate_aggregate.CheckRun

    @property
    def result(self) -> str:
        return self.run.result or "failed"


def base_tests_candidate(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str,
                         spec: CheckSpec) -> candidate_aggregate.Candidate | None:
    """The candidate's base-tests tree for the check, pinned (once; the same candidate every time after); None when
    the check protects nothing, the base holds no protected file, or the candidate's protected files are the base's."""
    from ...world.files.files import own_folder
    from ...world.files.paths import integration_output_path
    from ...world.git.trees import base_tests_tree
    from .base_checks import BOUNDARY as BASE
    from .candidates import pin_tree

    candidate = pinned_candidate(ledger, binding)
    if not spec.protected or candidate.boundary in (BASE, BOUNDARY) or candidate.commit is None:
        return None
    repository = effector.local(candidate.repository)
    made = base_tests_tree(repository, candidate.commit, candidate.base, tuple(spec.protected))
    if made is None:
        return None
    tree, set_aside = made
    output = integration_output_path(repository, candidate.run_id, f"{BOUNDARY}-{binding[:16]}")
    own_folder(repository / "docket", output)  # where its checks' artifacts are copied back
    return pin_tree(ledger, clock, effector, candidate.run_id, candidate.task_id, repository=repository,
                    parent=candidate.commit, tree=tree, boundary=BOUNDARY, source=f"base tests of {binding}",
                    output=output, changed=set_aside)  # its changed paths: the candidate's protected ones


def check_base_tests(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str, spec: CheckSpec, *,
                     artifact_dir: str | None, docket_dir: Path, ledger_path: Path) -> BaseTests | None:
    """The check's result on the candidate's base-tests tree: the one recorded under this configuration, or a new
    run of it; None when the candidate has no base-tests tree for this check (base_tests_candidate)."""
    from .base_checks import run_check

    with _turn(str(ledger_path), binding, spec.config_sha256):
        tested = base_tests_candidate(ledger, clock, effector, binding, spec)
        if tested is None:
            return None
        done = concluded(tested, spec.name, spec.config_sha256)
        if done is None:
            outcome = run_check(ledger, clock, effector, tested.binding_id, spec, artifact_dir=artifact_dir,
                                docket_dir=docket_dir, ledger_path=ledger_path)  # judged as the candidate's own
            faults.crash_point("base-tests:after-check")
            tested = ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(tested.binding_id))
            assert tested is not None
            done = tested.check_run(outcome.check_id)
    assert tested.commit is not None
    return BaseTests(tested.binding_id, tested.commit, done)


def protected_paths_of(conn: ViewsConnection, run_id: str, task_id: str, commit: str | None) -> list[str]:
    """The protected paths the candidate of the task at commit changed, as its base-tests trees set them aside (their
    changed paths, in the candidates view), sorted; [] when it has none."""
    import json

    from ....projections.candidates import candidates_of

    if not commit:
        return []
    return sorted({path for row in candidates_of(conn, run_id, task_id)
                   if row["boundary"] == BOUNDARY and row["parent"] == commit
                   for path in json.loads(row["changed_paths"] or "[]")})


def _turn(*key: str) -> threading.Lock:
    with _guard:
        return _turns.setdefault(key, threading.Lock())  # type: ignore[arg-type]
