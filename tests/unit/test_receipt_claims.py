"""domain.receipt_claims: the target's foreign commits, a statement's subject by receipt format, and a receipt
checked against what an auditor expects; and format 2 statements through domain.receipts.verify_statement."""

from __future__ import annotations

import pytest

from docket.domain.kernel.errors import VerificationFailed
from docket.domain.reports.receipt_claims import (
    FOREIGN_LIMIT,
    Expected,
    ForeignCommits,
    check_expected,
    foreign_commits,
    subject_of,
)
from docket.domain.reports.receipts import receipt_sha256, verify_statement
from tests.unit.test_receipts import BASE, made

A, B, C, M1, M2 = ("1" * 40, "2" * 40, "3" * 40, "4" * 40, "5" * 40)


def test_foreign_commits_are_the_targets_line_back_to_the_base_less_dockets_merges():
    assert foreign_commits([M2, M1, BASE], BASE, {M1, M2}) == ForeignCommits((), True)
    assert foreign_commits([M2, A, M1, B, BASE, C], BASE, {M1, M2}) == ForeignCommits((A, B), True)
    assert foreign_commits([BASE], BASE, set()) == ForeignCommits((), True)
    # reset past the base, to another line: every commit read is foreign, and the base was never reached
    assert foreign_commits([A, B, C], BASE, set()) == ForeignCommits((A, B, C), False)
    many = [f"{i:040x}" for i in range(1, FOREIGN_LIMIT + 5)]
    cut = foreign_commits([*many, BASE], BASE, set())
    assert len(cut.commits) == FOREIGN_LIMIT and not cut.base_reached


def _receipt(status: str = "completed", fmt: int = 2) -> dict:
    return {"format": fmt, "run": {"id": "r1", "base_commit": BASE},
            "repository": {"id": "repo-" + "a" * 32, "roots": [C]},
            "target": {"ref": "refs/heads/main", "expected_commit": BASE, "final_commit": M1,
                       "outcome": {"status": status}}}


def test_the_subject_is_the_target_when_delivered_and_the_run_when_stopped():
    assert subject_of(_receipt(), "d" * 64) == ("refs/heads/main", {"gitCommit": M1})
    assert subject_of(_receipt("stopped"), "d" * 64) == ("docket-run:r1", {"sha256": "d" * 64})
    assert subject_of(_receipt("stopped", fmt=1), "d" * 64) == ("refs/heads/main", {"gitCommit": M1})  # as sealed


def _code(receipt: dict, expected: Expected) -> str | None:
    try:
        check_expected(receipt, expected, subject_digest=subject_of(receipt, "d" * 64)[1])
    except VerificationFailed as e:
        return str(e.code)
    return None


@pytest.mark.parametrize(("expected", "code"), [
    (Expected(), None),
    (Expected(run="r1", commit=M1[:7]), None),
    (Expected(run="r2"), "receipt-for-another-run"),
    (Expected(commit=M1[:6]), "receipt-for-another-commit"),
    (Expected(commit=A), "receipt-for-another-commit"),
    (Expected(repository_id="repo-" + "a" * 32), None),
    (Expected(repository_id="repo-" + "b" * 32), "receipt-for-another-repository"),
    (Expected(repository_id="repo-" + "b" * 32, roots=(C,), path_given=True), None),  # a clone: same roots
    (Expected(repository_id=None, roots=(C,), path_given=True), None),
    (Expected(repository_id=None, roots=(A,), path_given=True), "receipt-for-another-repository"),
    (Expected(repository_id=None, roots=None, path_given=True), "receipt-for-another-repository"),  # base absent
])
def test_a_receipt_is_checked_against_what_is_expected(expected, code):
    assert _code(_receipt(), expected) == code


def test_a_stopped_run_vouches_for_no_commit_and_a_format_1_receipt_names_no_repository():
    assert _code(_receipt("stopped"), Expected(commit=BASE)) == "receipt-for-another-commit"
    old = _receipt(fmt=1)
    del old["repository"]
    assert _code(old, Expected(repository_id="repo-" + "a" * 32)) == "receipt-for-another-repository"
    assert _code(old, Expected(commit=M1)) is None


def _format_2(statement: dict, *, subject: str = "run", repository_id: str | None = None) -> dict:
    receipt = statement["predicate"]["receipt"]
    receipt.update(format=2, repository={"id": repository_id, "roots": [C]})
    receipt["target"]["moved_by_others"] = {"moved": True, "commits": [A], "base_reached": True}
    digest = statement["predicate"]["receipt_sha256"] = receipt_sha256(receipt)
    if subject == "run":
        statement["subject"] = [{"name": "docket-run:r1", "digest": {"sha256": digest}}]
    return statement


def test_a_format_2_stopped_statement_is_about_the_run():
    verified = verify_statement(_format_2(made()))
    assert verified.receipt["format"] == 2 and verified.final_commit == BASE
    with pytest.raises(VerificationFailed) as caught:  # the old subject: a commit docket never verified
        verify_statement(_format_2(made(), subject="commit"))
    assert caught.value.code == "receipt-contradicts-event"


def test_a_format_2_repository_id_must_be_the_genesis_events():
    with pytest.raises(VerificationFailed) as caught:
        verify_statement(_format_2(made(), repository_id="repo-" + "a" * 32))
    assert caught.value.code == "receipt-contradicts-event" and "LedgerCreated" in caught.value.message


def test_an_unknown_format_is_refused():
    statement = made()
    statement["predicate"]["receipt"]["format"] = 4
    statement["predicate"]["receipt_sha256"] = receipt_sha256(statement["predicate"]["receipt"])
    with pytest.raises(VerificationFailed) as caught:
        verify_statement(statement)
    assert caught.value.code == "bad-statement"


def test_a_claimed_shared_remote_must_be_the_one_the_run_recorded():
    """target.remote: the remote the target lives on is what a cited RunBasePinRequested.v2 says; a receipt that
    claims one the run never recorded is refused."""
    statement = made()
    statement["predicate"]["receipt"]["target"]["remote"] = {"name": "origin", "url": "/srv/git/repo.git"}
    statement["predicate"]["receipt_sha256"] = receipt_sha256(statement["predicate"]["receipt"])
    with pytest.raises(VerificationFailed) as caught:
        verify_statement(statement)
    assert caught.value.code == "receipt-contradicts-event" and "target.remote" in caught.value.message
