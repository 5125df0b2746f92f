"""Promise 2: SIGKILL at every named crash point of the base-pin effect, then replay converges."""

from __future__ import annotations

import signal

import pytest

from docket.adapters.world.faults import CRASH_POINTS
from docket.adapters.service_layer.kernel.ledger import Ledger

from ..conftest import git

BASE_PIN_POINTS = [
    "store:before-commit",
    "run-open:after-intent",
    "effector:before-observe",
    "effector:after-observe",
    "effector:after-outcome",
    "projection:before-commit",
]


def test_every_crash_point_is_exercised_here():  # or in test_worker_crashes.py, or in test_candidate_crashes.py
    from ..attacks.test_folders_resume_locks import REF_LOCK_POINTS
    from .test_base_checks import BASE_CHECK_POINTS
    from .test_candidate_crashes import CANDIDATE_POINTS
    from .test_handoff_crashes import HANDOFF_POINTS
    from .test_go_crashes import GO_POINTS
    from .test_hooks import HOOK_POINTS
    from .test_inbox import INBOX_POINTS
    from .test_merge_queue import REPAIR_POINTS
    from .test_merge_queue_batch import BATCH_POINTS
    from .test_merge_queue_speculation import SPECULATION_POINTS
    from .test_receipts import SEAL_POINTS
    from .test_integration_crashes import INTEGRATION_POINTS
    from .test_shared_remote import REMOTE_POINTS
    from .test_worker_crashes import WORKER_POINTS

    elsewhere = {point.split("@")[0] for point in WORKER_POINTS + CANDIDATE_POINTS + HANDOFF_POINTS
                 + INTEGRATION_POINTS + SEAL_POINTS + HOOK_POINTS + GO_POINTS + BASE_CHECK_POINTS + REPAIR_POINTS
                 + REF_LOCK_POINTS + BATCH_POINTS + REMOTE_POINTS + INBOX_POINTS + SPECULATION_POINTS}
    assert set(BASE_PIN_POINTS) | elsewhere == set(CRASH_POINTS)


def outcomes_of(ledger_path, run_id: str) -> list[str]:
    ledger = Ledger(ledger_path)
    try:
        history = ledger.history(f"run:{run_id}")
    finally:
        ledger.close()
    intents = [e.intent_id for _, e in history if e.type_name() == "RunBasePinRequested.v1"]
    return [e.type_name() for _, e in history
            if getattr(e, "intent_id", None) in intents and e.type_name() != "RunBasePinRequested.v1"]


@pytest.mark.slow
@pytest.mark.parametrize("point", BASE_PIN_POINTS)
def test_crash_then_replay_leaves_exactly_one_outcome(docket, repo, point):
    docket("init")
    crashed = docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", fault=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr

    replay = docket("replay", "--apply", "--json", check=False)
    assert replay.returncode in (0, 1), replay.stderr  # 1 only if the views had drifted; they are rebuilt
    assert docket("replay", "--apply").returncode == 0  # and a second pass finds nothing to do
    assert docket("verify").returncode == 0

    if point == "store:before-commit":
        # Killed inside the first transaction: nothing of the run was committed.
        assert outcomes_of(docket.ledger, "r1") == []
        assert docket("status", "r1", check=False).returncode == 5
        return
    assert outcomes_of(docket.ledger, "r1") == ["RunBasePinned.v1"]
    status = docket("status", "r1", "--json").json()
    assert status["run"]["status"] == "active"
    assert status["run"]["base_commit"] == git(repo, "rev-parse", "main")
    assert status["pending_intents"] == []


@pytest.mark.slow
def test_no_wait_leaves_the_intent_pending_until_replay_applies_it(docket, repo):
    docket("init")
    opened = docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", "--no-wait", "--json").json()
    assert opened["intent"]["pending"] is True
    status = docket("status", "r1", "--json").json()
    assert [i["intent_id"] for i in status["pending_intents"]] == [opened["intent"]["intent_id"]]
    applied = docket("replay", "--apply", "--json").json()["applied"]
    assert [a["outcome"] for a in applied] == ["RunBasePinned.v1"]
    assert docket("status", "r1", "--json").json()["run"]["status"] == "active"
    assert outcomes_of(docket.ledger, "r1") == ["RunBasePinned.v1"]
