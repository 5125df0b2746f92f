"""Handoff killed at each point (SIGKILL), then run again: one offer, one confirmation, a valid chain."""

from __future__ import annotations

import signal

import pytest

from .test_handoff import payloads, pinned, world  # noqa: F401  (world is a fixture)

HANDOFF_POINTS = ["handoff:after-observe", "store:before-commit"]


def crash(docket, *args: str, point: str) -> None:  # noqa: ANN001
    crashed = docket(*args, fault=point)
    assert crashed.returncode == -signal.SIGKILL, (crashed.returncode, crashed.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("point", HANDOFF_POINTS)
def test_a_confirmation_killed_midway_is_confirmed_once_when_run_again(world, point):  # noqa: F811
    docket = world
    candidate = pinned(docket)
    key = candidate["binding_id"]
    docket("handoff", "offer", key)
    docket("check", "run", key, "--check", "ok")

    crash(docket, "handoff", "confirm", key, point=point)
    assert payloads(docket, "HandoffConfirmed.v1") == []  # killed before its transaction committed

    confirmed = docket("handoff", "confirm", key, "--json").json()
    assert confirmed["handoff"] == "confirmed"
    docket("handoff", "confirm", key)  # confirming again records nothing
    assert len(payloads(docket, "HandoffConfirmed.v1")) == 1
    assert payloads(docket, "HandoffRejected.v1") == []
    docket("verify")


@pytest.mark.slow
def test_an_offer_killed_before_its_commit_is_offered_once_when_run_again(world):  # noqa: F811
    docket = world
    key = pinned(docket)["binding_id"]
    crash(docket, "handoff", "offer", key, point="store:before-commit")
    assert payloads(docket, "HandoffOffered.v1") == []
    docket("handoff", "offer", key)
    docket("handoff", "offer", key)
    assert len(payloads(docket, "HandoffOffered.v1")) == 1
    docket("verify")
