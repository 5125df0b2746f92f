"""pin_task against a real worktree: a worktree written to between the two captures pins nothing.

The worktree is made by the real CLI; the pin runs in-process with the real
dulwich port, whose capture_twice is given a change to make between the two
captures (the only way to make that moment exact).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from docket.adapters.service_layer.use_cases.candidates import pin_task
from docket.adapters.service_layer.kernel.effector import Effector
from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.ports import Ports
from docket.adapters.world.clock import SystemClock
from docket.adapters.world.git.candidates import DulwichCandidateRefs
from docket.adapters.world.git.capture import DulwichCapture
from docket.domain import events as ev
from docket.domain import task as task_aggregate

from docket.adapters.world.files.paths import task_worktree_path
from docket.domain.kernel.values import DEFAULT_MAX_FILE_SIZE

RUN, TASK = "r1", "t1"


class WrittenBetweenCaptures(DulwichCapture):
    def __init__(self, change):  # noqa: ANN001
        self.change = change

    def capture_twice(self, worktree, *, expected_head, base, artifact_dir, repository=None,  # noqa: ANN001, ANN201
                      max_file_size=DEFAULT_MAX_FILE_SIZE):  # noqa: ANN001
        from docket.adapters.world.git.capture import capture_twice

        return capture_twice(worktree, expected_head=expected_head, base=base, artifact_dir=artifact_dir,
                             repository=repository, between=lambda: self.change(Path(worktree)),
                             max_file_size=max_file_size)


@pytest.fixture
def ledger(docket):  # noqa: ANN001, ANN201
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", RUN)
    docket("task", "plan", RUN, "--title", "t", "--id", TASK)
    docket("worker", "launch", RUN, "--task", TASK, "--", "sh", "-c", "echo first > a.txt")
    opened = Ledger(docket.ledger)
    yield opened
    opened.close()


def test_a_worktree_changed_between_the_two_captures_is_unstable_and_nothing_is_pinned(docket, ledger):
    refs_before = _refs(docket.cwd)
    git = WrittenBetweenCaptures(lambda root: (root / "a.txt").write_text("moving\n"))
    effector = Effector(ledger, SystemClock(), Ports(capture=git, candidate_refs=DulwichCandidateRefs()))
    pinned = pin_task(ledger, SystemClock(), effector, RUN, TASK, artifact_dir=None, worker_id=TASK, generation=1)
    assert pinned.result == "unstable" and pinned.differing == ("a.txt",)
    history = [e for _, e in ledger.history(task_aggregate.stream_of(TASK))]
    (unstable,) = [e for e in history if isinstance(e, ev.CandidateUnstable)]
    assert unstable.differing_paths == ["a.txt"] and unstable.boundary == "generation-1"
    assert _refs(docket.cwd) == refs_before  # no ref made
    requested = docket("log", "--json", "--type", "CandidatePinRequested.v1").json()["events"]
    assert len(requested) == 1  # only the pin made when the worker exited, before this


def test_a_change_between_captures_that_is_undone_is_stable(docket, ledger):
    git = WrittenBetweenCaptures(lambda root: (root / "a.txt").write_text("first\n"))  # the same bytes again
    effector = Effector(ledger, SystemClock(), Ports(capture=git, candidate_refs=DulwichCandidateRefs()))
    pinned = pin_task(ledger, SystemClock(), effector, RUN, TASK, artifact_dir=None, worker_id=TASK, generation=1)
    assert pinned.result == "pinned" and pinned.candidate.status == "pinned"


def _refs(repo: Path) -> list[str]:
    return subprocess.run(["git", "for-each-ref", "--format=%(refname) %(objectname)"], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.splitlines()


def test_a_capture_too_large_to_record_is_refused_with_its_own_code_and_nothing_pinned(docket, ledger, monkeypatch):
    from docket.domain.kernel.errors import Refused
    from docket.domain.events import candidate as candidate_events

    for name in ("b.txt", "c.txt"):
        (task_worktree_path(docket.cwd / ".git", RUN, TASK) / name).write_text("more\n")
    monkeypatch.setattr(candidate_events, "MAX_CHANGED_PATHS", 2)  # a, b and c changed: one too many
    refs_before = _refs(docket.cwd)
    effector = Effector(ledger, SystemClock(), Ports(capture=DulwichCapture(), candidate_refs=DulwichCandidateRefs()))
    with pytest.raises(Refused) as e:
        pin_task(ledger, SystemClock(), effector, RUN, TASK, artifact_dir=None, worker_id=TASK, generation=1)
    assert e.value.code == "too-many-changes" and "3 paths" in e.value.message
    assert _refs(docket.cwd) == refs_before
