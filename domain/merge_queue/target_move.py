"""The move of a run's target branch, the last act of its Integration: what the branch and the worktree that has
it checked out are observed to be, whether a checked-out target may be moved with its files (as git's
``updateInstead`` does), the intent to move it, and the outcome of each observation. The aggregate's state and fold
are in integration.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .. import events as ev
from ..aggregate import next_event
from ..kernel.codes import Code
from ..kernel.errors import Refused, TargetCheckedOut
from .foreign_commits import moved_by_others_event
from .integration import Integration, stream_of
from ..effects import Act, Unknown

if TYPE_CHECKING:
    from ..effects import Act, ForeignCommits, Unknown

__all__ = ["CheckedOutTarget", "CheckoutObservation", "TargetIntent", "TargetObservation", "checkout_to_update",
           "decide_target", "moved_by_others", "moved_unrecorded", "request_target"]

TargetIntent = ev.IntegrationTargetRequested | ev.IntegrationTargetRequestedV2 | ev.IntegrationTargetRequestedV3
CheckedOutTarget = Literal["update", "refuse"]


@dataclass(frozen=True)
class CheckoutObservation:
    """The index and files of the worktree that has the target checked out, against two commits' trees: at-old
    (its index and tracked files are the expected commit's, and no untracked file is where the move to the
    integrated commit writes), at-new (its index and tracked files are the integrated commit's), dirty (neither;
    changes: the first few local changes or paths in the way, like "staged a.txt", "unstaged README.md",
    "untracked notes.md" or "untracked files in docs/"), or unreadable. Untracked files anywhere else do not
    count, as in git's own moves."""

    state: Literal["at-old", "at-new", "dirty", "unreadable"]
    changes: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class TargetObservation:
    """What the target branch names: found (commit), missing, or unreadable; checked_out: the worktree that has it
    checked out, if any (moving it alone would leave that worktree's files behind); checkout: that worktree's index
    and files, when they were looked at."""

    state: Literal["found", "missing", "unreadable"]
    commit: str | None = None
    checked_out: str | None = None
    detail: str = ""
    checkout: CheckoutObservation | None = None


def checkout_to_update(branch: str, observed: TargetObservation, *, policy: CheckedOutTarget) -> str | None:
    """The worktree the target's intent is to update with the branch (None: no worktree has it checked out).

    Refused ``target-checked-out`` when one has and the policy is refuse, or when its index or files are clean
    neither at the commit the branch names nor at the commit it is to move to (observed.checkout: at-new is an
    update that stopped before the branch moved), or cannot be read."""
    where = observed.checked_out
    if where is None:
        return None
    if policy == "refuse":
        raise TargetCheckedOut(f"the target branch {branch} is checked out in {where}, and "
                               "[integration] checked_out_target = \"refuse\" in docket.toml: docket "
                               "never moves a branch under a checkout. Switch that worktree to another "
                               "branch (or integrate into one that is not checked out), then run "
                               "'docket integrate' again")
    checkout = observed.checkout
    if checkout is not None and checkout.state in ("at-old", "at-new"):
        return where
    raise TargetCheckedOut(_dirty_message(branch, where, checkout))


def _dirty_message(branch: str, where: str, checkout: CheckoutObservation | None) -> str:
    if checkout is None or checkout.state == "unreadable":
        what = f"cannot be read ({checkout.detail if checkout else 'not looked at'})"
    else:
        what = "has local changes in the way: " + ", ".join(checkout.changes or ("its index or files differ",))
    return (f"the target branch {branch} is checked out in {where}, which {what}; docket moves a checked-out "
            "branch only when its index and tracked files are clean and no untracked file is where the delivered "
            "tree writes, and moved nothing. Commit, stash, move or remove those, then run 'docket integrate' again")


def request_target(integration: Integration, *, intent_id: str, checkout: str | None = None,
                   now: str, remote: tuple[str, str] | None = None) -> list[ev.Event]:
    """The intent to move the target branch to the last step's merge, and with it the index and files of checkout
    (the worktree that has it checked out, clean; None: none has); or, the run having a shared git remote (name,
    URL), the branch there, by compare-and-swap. Nothing when requested or done."""
    if integration.target is not None:
        return []
    # a queue that goes on moves it whenever verified steps lie beyond it, though a step was queued meanwhile
    behind = integration.rolling and not integration.ended and integration.head() != integration.target_expected
    if integration.status != "updating-target" and not behind:
        raise Refused(Code.INTEGRATION_NOT_VERIFIED, f"the integration of run {integration.run_id} is "
                                                  f"{integration.status}; the target moves after every step is "
                                                  "verified")
    last = [s for s in integration.steps if s.status == "verified"][-1] if integration.rolling else (
        integration.steps[-1])
    assert last.merge_commit is not None and last.tree is not None and integration.repository is not None
    assert integration.target_ref is not None and integration.target_expected is not None
    on_remote = {} if remote is None else {"remote": remote[0], "remote_url": remote[1]}
    return [next_event(ev.IntegrationTargetRequestedV3 if remote else ev.IntegrationTargetRequestedV2,
                       stream_of(integration.run_id), integration.version, now, intent_id=intent_id,
                       run_id=integration.run_id, repository=integration.repository,
                       target_ref=integration.target_ref, expected_commit=integration.target_expected,
                       commit=last.merge_commit, tree=last.tree, checkout=None if remote else checkout, **on_remote)]


def decide_target(integration: Integration, intent: TargetIntent, observed: TargetObservation,
                  now: str) -> ev.Event | Unknown | Act:
    """Completed once the branch names the integrated commit (the checkout is its owner's again from then on).
    While it names the expected commit: Act when no worktree has it checked out, or the intent's checkout is clean
    at either end (the act updates what is left of it, then moves the branch); target-checked-out when another
    worktree has it, or the intent's has local changes. Moved by someone else: Act while the intent's checkout
    was updated already (the act moves it back), then target-moved."""

    stream = stream_of(integration.run_id)
    common = dict(intent_id=intent.intent_id, run_id=intent.run_id, target_ref=intent.target_ref)
    if observed.state == "found" and observed.commit == intent.commit:
        return next_event(ev.IntegrationCompleted, stream, integration.version, now, **common,
                          previous=intent.expected_commit, commit=intent.commit, tree=intent.tree, result="observed")
    if observed.state == "unreadable":
        return Unknown(observed.detail or f"cannot read {intent.target_ref}")
    checkout = getattr(intent, "checkout", None)  # a v1 intent never updates a checkout
    ours = observed.checkout if checkout is not None and observed.checked_out == checkout else None

    def moved(code: str, message: str) -> ev.Event:
        found = observed.commit if observed.commit and len(observed.commit) in (40, 64) else None
        return next_event(ev.IntegrationTargetMoved, stream, integration.version, now, **common,
                          expected_commit=intent.expected_commit, found=found, code=code, message=message[:4000])

    if observed.state == "found" and observed.commit == intent.expected_commit:
        if observed.checked_out is None:
            return Act()
        if observed.checked_out != checkout:
            return moved("target-checked-out", f"{intent.target_ref} is checked out in {observed.checked_out}; "
                                               "moving it would leave that worktree's files behind. Switch that "
                                               "worktree to another branch, then run 'docket integrate' again")
        if ours is None or ours.state == "unreadable":
            return Unknown(f"cannot read the checkout at {checkout}: {ours.detail if ours else 'not looked at'}")
        if ours.state in ("at-old", "at-new"):
            return Act()
        return moved("target-checked-out", _dirty_message(intent.target_ref.removeprefix("refs/heads/"),
                                                          checkout, ours))
    if ours is not None and ours.state == "at-new":
        return Act()  # the files were updated and then the branch moved by someone else: they go back first
    what = "is absent" if observed.state == "missing" else f"names {observed.commit}"
    left = ""
    if ours is not None and ours.state != "at-old":
        left = (f"; the checkout at {checkout} is left as it is"
                + (f" ({', '.join(ours.changes)})" if ours.changes else ""))
    return moved("target-moved", f"{intent.target_ref} {what}, not the expected {intent.expected_commit}: it was "
                                 f"moved by someone else during the integration; nothing was reset or forced{left}")


def moved_unrecorded(integration: Integration) -> bool:
    """The target move found the target moved by someone else, and which commits it brought is not recorded yet."""
    return integration.moved_unrecorded()


def moved_by_others(integration: Integration, foreign: ForeignCommits | None, now: str) -> list[ev.Event]:
    """IntegrationTargetMovedByOthers once the target move found the target moved by someone else
    (IntegrationTargetMoved ``target-moved``): the commits it names that docket did not leave there; nothing
    otherwise, or once recorded."""
    if not moved_unrecorded(integration):
        return []
    expected, found = integration.target_expected, integration.target_found
    assert integration.target_ref is not None and expected is not None and found is not None
    return [moved_by_others_event(integration.run_id, integration.version, now, target_ref=integration.target_ref,
                                  expected=expected, found=found, seen="target-moved", foreign=foreign)]
