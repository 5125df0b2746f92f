"""The pool of checks `docket go` gives a run (issue 37, item 3): at most N of its checks hold a slot at once, the
next one waits for a slot to be given back, a wait ends promptly when the run's supervisor is interrupted (or the
candidate's checks are cancelled), a slot comes back however its holder ends, and outside a pool nothing waits."""

from __future__ import annotations

import threading
import time

import pytest

from docket.adapters.service_layer.use_cases.checks import (CheckCancelled, CheckInterrupted, cancel_checks,
                                                            check_slot, checks_pool, stopping_checks,
                                                            take_check_slot)

GUARD = 10.0  # a failure guard, never a measure of speed


class Waiter:
    """A thread that takes a slot of the run's pool (and keeps it until told), saying what became of it."""

    def __init__(self, run_id: str, binding: str | None = None) -> None:
        self.took = threading.Event()
        self.give_back = threading.Event()
        self.error: BaseException | None = None
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(run_id, binding), daemon=True)
        self._thread.start()

    def _run(self, run_id: str, binding: str | None) -> None:
        try:
            slot = take_check_slot(run_id, binding)
            self.took.set()
            self.give_back.wait(GUARD)
            slot.release()
        except BaseException as e:  # noqa: BLE001 - what the test looks at
            self.error = e
        finally:
            self.ended.set()

    def release(self) -> None:
        self.give_back.set()
        assert self.ended.wait(GUARD)


def test_n_slots_are_taken_at_once_and_the_next_check_waits_until_one_is_given_back():
    with checks_pool("run-a", 2):
        first, second = Waiter("run-a"), Waiter("run-a")
        assert first.took.wait(GUARD) and second.took.wait(GUARD)  # two at once: neither waits for the other
        third = Waiter("run-a")
        assert not third.took.wait(0.3)  # the third waits while both are held
        second.release()
        assert third.took.wait(GUARD)  # and takes the slot given back
        first.release()
        third.release()
    assert (first.error, second.error, third.error) == (None, None, None)


def test_pools_are_per_run_and_outside_a_pool_nothing_waits():
    with checks_pool("run-b", 1), check_slot("run-b"):
        with check_slot("run-c"), check_slot("run-c"):  # another run has no pool here: no limit
            pass
        other = Waiter("run-d")
        assert other.took.wait(GUARD)
        other.release()
    with check_slot("run-b"), check_slot("run-b"):  # the pool went with its block: nothing waits
        pass


def test_an_interrupt_ends_a_wait_for_a_slot_promptly_with_check_interrupted():
    interrupted = threading.Event()
    with stopping_checks("run-e", interrupted), checks_pool("run-e", 1):
        holder = Waiter("run-e")
        assert holder.took.wait(GUARD)
        waiting = Waiter("run-e")
        assert not waiting.ended.wait(0.3)  # waiting for the held slot
        set_at = time.monotonic()
        interrupted.set()
        assert waiting.ended.wait(GUARD)
        waited = time.monotonic() - set_at
        assert isinstance(waiting.error, CheckInterrupted) and waiting.error.code == "interrupted", waiting.error
        assert not waiting.took.is_set()
        assert waited < GUARD / 2, waited  # it noticed while waiting, not when the slot came back
        holder.release()
        with pytest.raises(CheckInterrupted):  # no new check takes a slot once interrupted, free as one may be
            take_check_slot("run-e")


def test_a_cancelled_candidate_stops_waiting_for_a_slot():
    with checks_pool("run-f", 1):
        holder = Waiter("run-f")
        assert holder.took.wait(GUARD)
        waiting = Waiter("run-f", binding="cand-f")
        assert not waiting.ended.wait(0.3)
        cancel_checks("cand-f", "the step it was built on was dropped")
        assert waiting.ended.wait(GUARD)
        assert isinstance(waiting.error, CheckCancelled) and "dropped" in str(waiting.error), waiting.error
        holder.release()


def test_a_slot_comes_back_when_its_holder_raises():
    with checks_pool("run-g", 1):
        with pytest.raises(RuntimeError), check_slot("run-g"):
            raise RuntimeError("the launch failed")
        after = Waiter("run-g")
        assert after.took.wait(GUARD)  # the slot was given back
        after.release()


def test_releasing_a_slot_twice_gives_back_one():
    with checks_pool("run-i", 1), check_slot("run-i") as slot:
        slot.release()
        slot.release()  # once only: the pool does not grow
        taken = Waiter("run-i")
        assert taken.took.wait(GUARD)
        extra = Waiter("run-i")
        assert not extra.took.wait(0.3)  # still one slot, not two
        taken.release()
        assert extra.took.wait(GUARD)
        extra.release()


def test_a_pool_has_at_least_one_slot():
    with pytest.raises(ValueError), checks_pool("run-h", 0):
        pass


def test_a_free_slot_goes_to_the_merge_queue_first_the_head_of_the_queue_first_then_in_order_of_asking():
    from docket.adapters.service_layer.use_cases.checks import _pools, slot_priority

    assert slot_priority("integration-3") < slot_priority("integration-12") < slot_priority("base")
    assert slot_priority("base") < slot_priority("generation-1") == slot_priority("integration-x")
    order: list[str] = []
    lock = threading.Lock()

    def take(name: str, priority: tuple[int, int], asked: threading.Event) -> None:
        asked.set()
        slot = take_check_slot("r-order", priority=priority)
        with lock:
            order.append(name)
        slot.release()

    with checks_pool("r-order", 1):
        held = take_check_slot("r-order")
        threads = []
        for name, boundary in [("task-a", "generation-1"), ("queue-12", "integration-12"), ("task-b", "generation-2"),
                               ("base", "base"), ("queue-3", "integration-3")]:
            asked = threading.Event()
            thread = threading.Thread(target=take, args=(name, slot_priority(boundary), asked), daemon=True)
            thread.start()
            assert asked.wait(GUARD)
            deadline = time.monotonic() + GUARD  # waiting in the pool before the next asks: asked in this order
            while len(_pools["r-order"].waiting) < len(threads) + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            threads.append(thread)
        held.release()
        for thread in threads:
            thread.join(GUARD)
    assert order == ["queue-3", "queue-12", "base", "task-a", "task-b"]
