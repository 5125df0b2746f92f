"""--parallel's places under `docket go`: an agent holds one from before its generation is launched until it has
ended; its judging (pin, checks, handoff) holds none, so the next task's agent starts meanwhile, and checks are
counted apart (--checks, adapters/service_layer/use_cases/checks.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["AgentPlace", "AgentPlaces"]

PLACE_POLL_SECONDS = 0.1  # how often a task waiting for an agent's place looks whether its supervisor was interrupted
PLACE_WAIT_SECONDS = 1.0  # how long it waits before it reads its run again (paused, aborted: it waits no more)


class AgentPlaces:
    """--parallel's places: a task's agent holds one from before its generation is launched until it has ended
    (``supervise`` returned). Its judging (pin, checks, handoff) holds none, so the next task's agent starts
    meanwhile; a task sent back with feedback takes a place again before its next generation, and comes before a
    task not started yet. ``freed`` is called each time a place is given back (it wakes the main loop)."""

    def __init__(self, places: int, freed: Callable[[], object] = lambda: None) -> None:
        if places < 1:
            raise ValueError(f"--parallel is at least 1, not {places}")
        self.places = places
        self._semaphore = threading.BoundedSemaphore(places)
        self._freed = freed
        self._lock = threading.Lock()
        self._waiting = 0  # the tasks waiting for a place to launch their next generation

    @property
    def waiting(self) -> int:
        with self._lock:
            return self._waiting

    def try_take(self) -> AgentPlace | None:
        """A place for a task not started yet, if one is free now and no started task waits for one; else None."""
        if self.waiting:
            return None
        return AgentPlace(self) if self._semaphore.acquire(blocking=False) else None

    def _wait(self, waiting: bool) -> None:
        with self._lock:
            self._waiting += 1 if waiting else -1

    def _take(self, interrupted: threading.Event | None, within: float) -> AgentPlace | None:
        """A place, waited for up to ``within`` seconds (then None); None at once when ``interrupted`` is set, before
        or while it waits (a place taken meanwhile is given back)."""
        end = time.monotonic() + within
        while True:
            taken = self._semaphore.acquire(timeout=max(0.0, min(PLACE_POLL_SECONDS, end - time.monotonic())))
            if interrupted is not None and interrupted.is_set():
                if taken:
                    self._give_back()
                return None
            if taken:
                return AgentPlace(self)
            if time.monotonic() >= end:
                return None

    def _give_back(self) -> None:
        self._semaphore.release()
        self._freed()


class AgentPlace:
    """One of --parallel's places, held until released (once: releasing again does nothing)."""

    def __init__(self, places: AgentPlaces) -> None:
        self._places: AgentPlaces | None = places

    def release(self) -> None:
        places, self._places = self._places, None
        if places is not None:
            places._give_back()  # noqa: SLF001 - its own pool


class _Holder:
    """A task's thread and --parallel's places: the place it holds for its agent, if any (first the one the main
    loop took when it started the thread, then each one it takes before it launches a generation), and whether it
    waits for one (from its first try until it has one, or ends)."""

    def __init__(self, places: AgentPlaces | None, place: AgentPlace | None) -> None:
        self.places = places
        self.place = place
        self._waiting = False

    @property
    def needs_place(self) -> bool:
        return self.places is not None and self.place is None

    def take(self, interrupted: threading.Event | None) -> bool:
        """Whether a place is held now, after a wait of a second at most (or until ``interrupted``)."""
        if self.places is None or self.place is not None:
            return True
        if not self._waiting:
            self.places._wait(True)  # noqa: SLF001
            self._waiting = True
        self.place = self.places._take(interrupted, PLACE_WAIT_SECONDS)  # noqa: SLF001
        if self.place is not None:
            self._stop_waiting()
        return self.place is not None

    def release(self) -> None:
        """Give back the place held, if any (and wait for none)."""
        self._stop_waiting()
        place, self.place = self.place, None
        if place is not None:
            place.release()

    def _stop_waiting(self) -> None:
        if self._waiting and self.places is not None:
            self.places._wait(False)  # noqa: SLF001
        self._waiting = False
