"""--parallel's places under `docket go` (issue 37, item 3): an agent holds one until it has ended, a task sent
back waits for one before it relaunches (and comes before a task not started yet), a wait ends promptly when the
supervisor is interrupted, and a place given back wakes the main loop."""

from __future__ import annotations

import threading
import time

import pytest

from docket.adapters.service_layer.go.agent_places import AgentPlaces, _Holder

GUARD = 10.0  # a failure guard, never a measure of speed


def test_n_places_are_taken_and_each_comes_back_once():
    freed = []
    places = AgentPlaces(2, freed=lambda: freed.append(1))
    first, second = places.try_take(), places.try_take()
    assert first is not None and second is not None
    assert places.try_take() is None  # both held
    first.release()
    first.release()  # once: releasing again does nothing
    assert freed == [1]
    third = places.try_take()
    assert third is not None and places.try_take() is None
    second.release()
    third.release()
    with pytest.raises(ValueError):
        AgentPlaces(0)


def test_a_task_waiting_to_relaunch_comes_before_a_task_not_started_and_takes_the_place_given_back():
    places = AgentPlaces(1)
    held = places.try_take()
    assert held is not None
    waiter = _Holder(places, None)
    took = threading.Event()

    def relaunch() -> None:
        while not waiter.take(None):
            pass
        took.set()

    thread = threading.Thread(target=relaunch, daemon=True)
    thread.start()
    deadline = time.monotonic() + GUARD
    while places.waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert places.waiting == 1
    held.release()
    assert places.try_take() is None  # the main loop does not take it from the waiting task
    assert took.wait(GUARD)
    assert places.waiting == 0 and places.try_take() is None  # the relaunched agent holds it
    waiter.release()
    assert places.try_take() is not None


def test_a_wait_for_a_place_ends_promptly_once_interrupted_and_takes_none():
    places = AgentPlaces(1)
    held = places.try_take()
    assert held is not None
    interrupted = threading.Event()
    waiter = _Holder(places, None)
    threading.Timer(0.2, interrupted.set).start()
    began = time.monotonic()
    assert waiter.take(interrupted) is False
    assert time.monotonic() - began < GUARD
    interrupted.set()
    held.release()
    assert waiter.take(interrupted) is False  # a place free, but interrupted: none is taken
    waiter.release()
    assert places.waiting == 0 and places.try_take() is not None


def test_without_places_nothing_waits():
    holder = _Holder(None, None)
    assert not holder.needs_place and holder.take(None)
    holder.release()
