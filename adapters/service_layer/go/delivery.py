"""Delivering a `docket go` run once every task has finished: integrate what passed, seal the receipt, export it
signed, complete the run; or leave it waiting for its user."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain import run as run_aggregate
from ....domain.kernel.codes import Code
from ....domain.kernel.errors import AwaitingApproval, DocketError, OutputExists, Refused, TargetCheckedOut
from ...world import faults
from ..merge_queue.speculation import Speculation
from .session import RunDriver
from .settings import GoSettings
from ..use_cases.runs import complete_run, load_run
from ..use_cases.tasks import load_task

if TYPE_CHECKING:
    from securesystemslib.signer import CryptoSigner
    from ..use_cases.receipts import Sealed

__all__ = ["choose_signer", "deliver", "export_key", "receipt_path"]



def export_key(key: str | None) -> tuple[str, str] | None:
    """The key id and absolute path of the private key given with --key (BadInput and NotFound as load_signer)."""
    import os

    from ...world.ledger.signing import load_signer

    if key is None:
        return None
    return load_signer(key).public_key.keyid, os.path.abspath(key)


def choose_signer(run: run_aggregate.Run, key: str | None) -> CryptoSigner | None:
    """The signer the run's receipt is exported with: --key's, else the key its plan records (None: no export).
    A key other than the planned one is refused, and a planned key that cannot be loaded says which key it is."""
    from ...world.ledger.signing import load_signer

    planned = run.plan.export_key if run.plan is not None else None
    if key is not None:
        signer = load_signer(key)
        if planned is not None and signer.public_key.keyid != planned[0]:
            raise Refused(Code.PLAN_DIFFERS, f"run {run.run_id} was planned to export with key {planned[0]} "
                                          f"({planned[1]}), not {signer.public_key.keyid}")
        return signer
    if planned is None:
        return None
    keyid, path = planned
    try:
        signer = load_signer(path)
    except DocketError as e:
        raise e.explained(f"run {run.run_id} exports its receipt with key {keyid}, planned at {path}: "
                          f"{e.message}; resume with --key naming that key's private file") from None
    if signer.public_key.keyid != keyid:
        raise Refused(Code.PLAN_DIFFERS, f"run {run.run_id} exports its receipt with key {keyid}, but {path} now "
                                      f"holds key {signer.public_key.keyid}; resume with --key naming the planned "
                                      "key's private file")
    return signer


def deliver(d: RunDriver, settings: GoSettings, run_id: str, signer: CryptoSigner | None,
            speculation: Speculation | None = None) -> None:
    """Once every task has finished: integrate what passed, seal, export, complete the run."""
    from ..merge_queue.integration import integrate
    from ..merge_queue.integration_steps import load_integration

    run = load_run(d.ledger, run_id)
    if run.status != "active" or run.plan is None:
        return
    tasks = [load_task(d.ledger, task_id) for task_id in run.plan.task_ids]
    if any(task.result is None for task in tasks):
        return
    passed = {task.task_id: [task.finished_binding] for task in tasks  # a task passes on its candidate's checks
              if task.result == "passed" and task.finished_binding is not None}
    integration = load_integration(d.ledger, run_id)
    queued = integration is not None and integration.rolling  # a queue that went on while the agents worked
    if (passed or queued) and (integration is None or not integration.ended or integration.moved_unrecorded()):
        faults.crash_point("go:before-integrate")
        try:
            integrate(d.ledger, d.clock, d.effector, run_id, tasks=list(run.plan.task_ids), candidates=passed,
                      checks=settings.checks, approval_required=settings.approval,
                      artifact_dir=settings.artifact_dir, docket_dir=settings.docket_dir,
                      ledger_path=settings.ledger_path, checked_out_target=settings.checked_out_target,
                      batch=settings.batch,
                      speculation=speculation or Speculation(d.open_session, settings.speculate))
        except (TargetCheckedOut, AwaitingApproval) as e:  # refusals only the user can lift
            _wait(d, run_id, e)
            return
        except Refused as e:
            if e.code == Code.TARGET_KEEPS_MOVING:  # resumed, it goes on from where the target is then
                _wait(d, run_id, e)
                return
            if e.code != Code.NOTHING_TO_INTEGRATE:
                raise
        d.update_views()
    integration = load_integration(d.ledger, run_id)
    if integration is not None and not integration.ended:
        return  # the target could not be moved now (checked out and dirty): resume once it can
    if integration is not None:
        from ..merge_queue.integration import record_moved_target
        from ..use_cases.receipts import seal_run

        record_moved_target(d.ledger, d.clock, d.effector, run_id)  # recorded before the receipt is sealed
        if not load_integration(d.ledger, run_id).ended:  # type: ignore[union-attr]
            return  # re-queued onto the moved target after a crash: delivered by the next pass

        faults.crash_point("go:before-seal")
        sealed = seal_run(d.ledger, d.reader(), d.clock, run_id, list(run.plan.task_ids))
        if signer is not None:
            _export(d, sealed, signer)
    faults.crash_point("go:before-complete")
    if load_run(d.ledger, run_id).status == "active":
        complete_run(d.ledger, d.clock, run_id)
    d.update_views()


def _wait(d: RunDriver, run_id: str, refused: Refused) -> None:
    """RunWaiting: the run ends waiting for its user, with what to do and then how to finish it."""
    then = f"'docket go --resume {run_id}'"
    message = (refused.message.replace("'docket integrate'", then) if "'docket integrate'" in refused.message
               else f"{refused.message}; then run {then}")

    def decision(now: str) -> list[Any]:
        return run_aggregate.wait(load_run(d.ledger, run_id), refused.code, message, now)

    d.ledger.decide(decision, d.clock.now())
    d.update_views()


def receipt_path(docket_dir: Path, run_id: str) -> Path:
    """Where the run's sealed receipt is exported."""
    return docket_dir / "receipts" / f"{run_id}.intoto.jsonl"


def _export(d: RunDriver, sealed: Sealed, signer: CryptoSigner) -> Path:
    from ...world.ledger.signing import write_bundle
    from ..use_cases.export import receipt_bundle

    from ...world.files.files import own_folder

    path = receipt_path(d.docket_dir, sealed.event.run_id)
    own_folder(d.docket_dir, path.parent)  # a symlink planted there is refused: the receipt is never written out
    d.ledger.require_intact()  # the bundle proves events read from the ledger now: the one docket wrote
    try:
        write_bundle(path, receipt_bundle(d.reader(), sealed, signer))
    except OutputExists:
        pass  # exported before a crash: the same bundle (signatures are deterministic)
    return path
