"""Launching an agent behind a gate: the process port as the launch intent sees it.

A use case that launches a worker tells the Launcher what to start for the
intent (``expect``). The effector then observes: a process held at a gate this
Launcher owns, one held by someone else's gate (a launch that crashed before
its outcome: it exits by itself when its gate's pipe closes), a start that
failed, nothing yet (act: start it, held), or nothing that anyone here can start
(the launching command is gone: the launch is abandoned, never redone blindly
by a process that could not supervise it). The gate is opened only after the
ledger holds the process's identity (``release``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....domain.events import WorkerLaunchRequested
from ....domain.containment.processes import ProcessIdentity
from ....domain.worker import LaunchObservation

if TYPE_CHECKING:
    from ...world.processes.lifecycle import LaunchSpec
    from .process_ports import GatedHandle, ProcessPort

__all__ = ["HOST_MARK", "LAUNCH_MARK", "Launcher"]

LAUNCH_MARK = "DOCKET_LAUNCH"  # in the environment of every process docket starts: the launch intent's id
HOST_MARK = "DOCKET_HOST"  # beside it: the host id of the supervisor that started it (its own host's to stop)


class Launcher:
    def __init__(self, processes: ProcessPort):
        self.processes = processes
        self._me: ProcessIdentity | None = None
        self._specs: dict[str, LaunchSpec] = {}
        self._held: dict[str, GatedHandle] = {}
        self._failed: dict[str, str] = {}

    def expect(self, intent_id: str, spec: LaunchSpec) -> None:
        """What to start for this launch intent, should the effector find nothing started yet."""
        self._specs[intent_id] = spec

    def observe(self, intent: WorkerLaunchRequested) -> LaunchObservation:
        held = self._held.get(intent.intent_id)
        if held is not None:
            if self._me is None:
                import os

                self._me = self.processes.identity(os.getpid())
            return LaunchObservation("held", identity=held.identity, supervisor=self._me)
        if intent.intent_id in self._failed:
            return LaunchObservation("failed", detail=self._failed[intent.intent_id])
        if self.processes.find_marked(LAUNCH_MARK, intent.intent_id):
            return LaunchObservation("other")
        if intent.intent_id in self._specs:
            return LaunchObservation("none")
        return LaunchObservation("abandoned")

    def start(self, intent: WorkerLaunchRequested) -> None:
        spec = self._specs[intent.intent_id]
        try:
            self._held[intent.intent_id] = self.processes.spawn_gated(spec)
        except OSError as e:  # no such program, a worktree gone, a log file that exists: a definite failure
            self._failed[intent.intent_id] = f"cannot start {spec.argv[0]!r}: {e.strerror or e}"[:4000]

    def release(self, intent_id: str, recorded: ProcessIdentity | None) -> GatedHandle | None:
        """Open the gate of the process the ledger recorded for this intent, if it is ours; else close it unopened.

        Returns the opened process (the caller supervises it), or None.
        """
        gated = self._held.pop(intent_id, None)
        if gated is None:
            return None
        if recorded is not None and gated.identity == recorded:
            try:
                gated.open()
            except BrokenPipeError:
                pass  # it ended (or was killed) at its gate: its supervision records how, as for any end
            return gated
        gated.close_without_opening()  # another launcher's process won: ours never runs the agent
        return None

    def close(self) -> None:
        """Close every gate still held: those processes exit without running anything."""
        for gated in self._held.values():
            gated.close_without_opening()
        self._held.clear()
