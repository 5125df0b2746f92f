"""What a receipt says about the world beyond its events, as pure functions: the repository it is about, the
commits on the target that docket did not make, its statement's subject, and whether it is the receipt an auditor
expects (verify-receipt --repository, --commit, --run).

The repository's identity has two parts (receipt format 2):

- ``id``: the identity docket gave the repository at `docket init` (``repo-<32 hex>``, in its git common dir),
  which the ledger's genesis event (LedgerCreated, position 1, cited) records. It names the one repository, the
  clone on one machine, whose ledger sealed the receipt; another clone has another (or none).
- ``roots``: the root commits of the run's base commit's history. They are the same in every clone and fork of
  the project, whatever its remotes are called: what an auditor holding their own clone can check.

A stopped run delivered nothing: its statement's subject is the run itself (``docket-run:<id>``, with the
receipt's sha256), never the target's commit, which docket did not verify.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..kernel.errors import VerificationFailed
from ..kernel.codes import Code

__all__ = [
    "REPOSITORY_ID",
    "ForeignCommits",
    "Expected",
    "check_expected",
    "foreign_commits",
    "run_subject_name",
    "subject_of",
]

REPOSITORY_ID = re.compile(r"repo-[0-9a-f]{32}")
FOREIGN_LIMIT = 100  # commits listed; a target reset to an unrelated history could name thousands


@dataclass(frozen=True)
class ForeignCommits:
    """Commits on the target's first-parent history after the run's base that docket did not make."""

    commits: tuple[str, ...]  # newest first, at most FOREIGN_LIMIT
    base_reached: bool  # False: the base is not on that history (the target was reset past it), or the list is cut

    def as_dict(self) -> dict[str, Any]:
        return {"commits": list(self.commits), "base_reached": self.base_reached}


def foreign_commits(history: Sequence[str], base: str, docket_made: Collection[str]) -> ForeignCommits:
    """history: the target's first-parent commits from its tip back (as far as the reader went); base: the run's
    base commit; docket_made: the commits docket recorded making (its merge commits). Each commit before the base
    that docket did not make is foreign."""
    found: list[str] = []
    for commit in history:
        if commit == base:
            return ForeignCommits(tuple(found[:FOREIGN_LIMIT]), len(found) <= FOREIGN_LIMIT)
        if commit not in docket_made:
            found.append(commit)
    return ForeignCommits(tuple(found[:FOREIGN_LIMIT]), False)


def run_subject_name(run_id: str) -> str:
    return f"docket-run:{run_id}"


def subject_of(receipt: dict[str, Any], receipt_sha256: str) -> tuple[str, dict[str, str]]:
    """The statement's subject (name, digests): the target at its final commit when the integration completed;
    from format 2 on, a stopped run's own name and the receipt's digest, since no commit was delivered."""
    target = receipt["target"]
    if receipt.get("format", 1) >= 2 and target["outcome"]["status"] != "completed":
        return run_subject_name(receipt["run"]["id"]), {"sha256": receipt_sha256}
    return target["ref"], {"gitCommit": target["final_commit"]}


@dataclass(frozen=True)
class Expected:
    """What verify-receipt was told to expect. repository_id: the id given, or the one of the repository at the path
    given (None: it has none); roots: that repository's root commits of the receipt's base (None: the base is not
    in it); a path was given when either is set or path_given."""

    run: str | None = None
    commit: str | None = None
    repository_id: str | None = None
    roots: tuple[str, ...] | None = None
    path_given: bool = False


def check_expected(receipt: dict[str, Any], expected: Expected, *, subject_digest: dict[str, str]) -> None:
    """VerificationFailed (receipt-for-another-run, -commit, -repository) when the receipt is about something else."""
    if expected.run is not None and receipt["run"]["id"] != expected.run:
        raise VerificationFailed(Code.RECEIPT_FOR_ANOTHER_RUN, f"the receipt is of run {receipt['run']['id']!r}, not "
                                                            f"{expected.run!r}")
    if expected.commit is not None:
        commit = subject_digest.get("gitCommit")
        wanted = expected.commit.lower()
        if commit is None:
            raise VerificationFailed(Code.RECEIPT_FOR_ANOTHER_COMMIT, f"the receipt's run stopped and vouches for no "
                                     f"commit (its target stayed at {receipt['target']['expected_commit']}), not "
                                     f"for {expected.commit}")
        if len(wanted) < 7 or not commit.startswith(wanted):
            raise VerificationFailed(Code.RECEIPT_FOR_ANOTHER_COMMIT, f"the receipt vouches for commit {commit}, not "
                                                                   f"{expected.commit}")
    if expected.repository_id is not None or expected.roots is not None or expected.path_given:
        _check_repository(receipt, expected)


def _check_repository(receipt: dict[str, Any], expected: Expected) -> None:
    said = receipt.get("repository")
    if said is None:
        raise VerificationFailed(Code.RECEIPT_FOR_ANOTHER_REPOSITORY, "the receipt (format 1) names no repository: it "
                                                                   "cannot be matched to one")
    if expected.repository_id is not None and said.get("id") == expected.repository_id:
        return
    if not expected.path_given:  # an id was given, and it is not the receipt's
        raise VerificationFailed(Code.RECEIPT_FOR_ANOTHER_REPOSITORY, f"the receipt is of repository {said.get('id')}, "
                                                                   f"not {expected.repository_id}")
    if expected.roots is None:
        raise VerificationFailed(Code.RECEIPT_FOR_ANOTHER_REPOSITORY, f"the receipt's base commit "
                                 f"{receipt['run']['base_commit']} is not in that repository")
    if sorted(expected.roots) != sorted(said.get("roots") or []):
        raise VerificationFailed(Code.RECEIPT_FOR_ANOTHER_REPOSITORY, f"the receipt's repository has root commit(s) "
                                 f"{', '.join(said.get('roots') or []) or 'unknown'}; that repository's history of "
                                 f"the base has {', '.join(expected.roots)}")
