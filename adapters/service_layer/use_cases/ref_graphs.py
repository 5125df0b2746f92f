"""docket reconcile's look at git's objects: every ref docket owns (refs/docket/**, and each recorded target) must
name an object graph that is all there (issue 21, item 3).

A ``git gc --prune=now`` beside a run can delete objects a ref names (docket writes a pin's or a merge's objects
before the ref moves, and checks again after; a prune that slips past both leaves the ref broken, and git itself
then fails on the repository). Each such ref is reported ``ref-incomplete``; with apply, a candidate ref is made
whole again from its ledger record (the workspace it was captured from, when it still holds the content) or, when
that cannot be, released (its ref deleted, recorded); an integration ref's merges are computed again from their
recorded parents (by the merge queue's own function, which the caller passes: the merge queue's room is built on
this one). A target branch is the user's: it is reported, never changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...world.clock import Clock
from .housekeeping import GitFinding
from ..kernel.ledger import Ledger

if TYPE_CHECKING:
    from ....projections.query import ViewsConnection
    from ..kernel.ports import EffectorPort

__all__ = ["MergesAgain", "reconcile_ref_graphs"]

# a run's merge commits made whole again from their recorded parents; the ids still missing
MergesAgain = Callable[[Ledger, "EffectorPort", str], list[str]]


def reconcile_ref_graphs(ledger: Ledger, clock: Clock, effector: EffectorPort, conn: ViewsConnection,
                         repository: Path, *, apply: bool, merges_again: MergesAgain) -> list[GitFinding]:
    """The refs docket owns (and the recorded targets) that name objects missing from the repository."""
    from ....projections import candidates, integrations

    merges, inventory = effector.ports.merges, effector.ports.inventory
    refs = dict(inventory.list_docket_refs(repository))
    for row in integrations.all_integrations(conn).values():
        tip = inventory.branch_tip(repository, row["target_branch"]) if row["target_branch"] else None
        if tip is not None:
            refs.setdefault(f"refs/heads/{row['target_branch']}", tip)
    if not refs or not merges.missing_objects(repository, sorted(set(refs.values())), []):
        return []  # one walk over everything, shared: the usual answer
    by_ref = {row["ref"]: row for row in candidates.all_candidates(conn)}
    by_integration = {row["integration_ref"]: run_id for run_id, row in integrations.all_integrations(conn).items()
                      if row["integration_ref"]}
    findings = []
    for ref, oid in sorted(refs.items()):
        missing = merges.missing_objects(repository, [oid], [])
        if not missing:
            continue
        finding = GitFinding("ref-incomplete", ref, f"names {oid}, but {len(missing)} object(s) it reaches are "
                                                    f"missing from the repository (e.g. {missing[0]})")
        if apply:
            finding = replace(finding, applied=_repair(ledger, clock, effector, repository, ref, oid,
                                                       by_ref.get(ref), by_integration.get(ref), merges_again))
        findings.append(finding)
    return findings


def _repair(ledger: Ledger, clock: Clock, effector: EffectorPort, repository: Path, ref: str, oid: str,
            candidate_row: dict[str, Any] | None, integration_run: str | None, merges_again: MergesAgain) -> str:
    from ....domain.kernel.errors import DocketError
    from .candidates import complete_pinned, load_candidate, release_candidate

    if candidate_row is not None:
        candidate = load_candidate(ledger, candidate_row["binding_id"])
        if not complete_pinned(effector, candidate):
            return "repaired from its workspace"
        try:
            done = release_candidate(ledger, clock, effector, candidate.binding_id,
                                     "reconcile: objects its ref names are missing and cannot be made again")
        except DocketError as e:
            return f"kept: cannot be made whole, and releasing it failed: {e.code}: {e.message}"
        return f"released: cannot be made whole ({done})"
    if integration_run is not None:
        left = merges_again(ledger, effector, integration_run)
        return "repaired: its merges computed again" if not left else \
            f"kept: {len(left)} object(s) cannot be made again (e.g. {left[0]})"
    if ref.startswith("refs/heads/"):
        return "kept: the target branch is yours; docket never changes it here"
    return "kept: no record in the ledger owns it (reported as unowned)"
