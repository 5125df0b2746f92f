"""JUnit XML reports: the parser (pytest's own output, hostile XML), the judgment relative to the base, feedback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from docket.domain.reports.junit import (MAX_REPORT_BYTES, ReportError, judge_relative, parse_junit, report_feedback)


def _pytest_report(tmp_path: Path, source: str) -> bytes:
    (tmp_path / "test_m.py").write_text(source)
    report = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    "test_m.py"], cwd=tmp_path, capture_output=True, text=True)
    return report.read_bytes()


def test_pytest_report_gives_failing_ids_with_the_first_lines_of_each_assertion(tmp_path: Path) -> None:
    data = _pytest_report(tmp_path, "def test_ok():\n    assert True\n\n"
                                    "def test_sum():\n    total = 1 + 1\n    assert total == 3, 'one and one'\n\n"
                                    "class TestBox:\n    def test_open(self):\n        raise ValueError('stuck lid')\n")
    report = parse_junit(data)
    assert report.tests == 3
    assert [f.id for f in report.failing] == ["test_m::test_sum", "test_m.TestBox::test_open"]
    first, second = report.failing
    assert first.outcome == "failed" and "one and one" in first.message and "assert 2 == 3" in first.message
    assert "test_m.py:6" in first.message  # where: the file and line of the assertion
    assert "stuck lid" in second.message
    assert report.failing_ids == frozenset({"test_m::test_sum", "test_m.TestBox::test_open"})


def test_errors_and_skips() -> None:
    data = b"""<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
      <testcase classname="" name="tests.test_broken"><error message="collection failure">ImportError: x</error></testcase>
      <testcase classname="a" name="b"><skipped message="later"/></testcase>
      <testcase classname="a" name="c"/></testsuite></testsuites>"""
    report = parse_junit(data)
    assert report.tests == 3
    assert [(f.id, f.outcome) for f in report.failing] == [("tests.test_broken", "error")]
    assert report.failing[0].message == "collection failure"


def test_a_bare_testsuite_root_and_a_repeated_id_counted_once() -> None:
    data = (b'<testsuite><testcase classname="a" name="x"><failure message="one"/></testcase>'
            b'<testcase classname="a" name="x"><failure message="again"/></testcase></testsuite>')
    report = parse_junit(data)
    assert [f.id for f in report.failing] == ["a::x"]


@pytest.mark.parametrize("data, code", [
    (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>'
     b'<testsuites><testcase classname="a" name="&lol2;"/></testsuites>', "report-refused"),
    (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuites>&x;</testsuites>',
     "report-refused"),
    (b'<!DOCTYPE testsuites SYSTEM "http://example.com/junit.dtd"><testsuites/>', "report-refused"),
    ('<?xml version="1.0" encoding="utf-16"?><!DOCTYPE r [<!ENTITY x "y">]><testsuites/>'.encode("utf-16"),
     "report-refused"),
    (b"<testsuites><testcase", "report-malformed"),
    (b"not xml at all", "report-malformed"),
    (b"", "report-malformed"),
    (b"<html><body>hello</body></html>", "report-not-junit"),
    (b"<testsuites>" + b"<a>" * 1000 + b"</a>" * 1000 + b"</testsuites>", "report-too-deep"),
])
def test_hostile_or_broken_reports_are_refused_with_a_code(data: bytes, code: str) -> None:
    with pytest.raises(ReportError) as caught:
        parse_junit(data)
    assert caught.value.code == code


def test_a_huge_report_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(ReportError) as caught:
        parse_junit(b"<testsuites>" + b" " * MAX_REPORT_BYTES + b"</testsuites>")
    assert caught.value.code == "report-too-large"


def test_too_many_test_cases_are_refused() -> None:
    from docket.domain.reports import junit

    data = b"<testsuites>" + b'<testcase classname="a" name="x"/>' * (junit.MAX_TESTS + 1) + b"</testsuites>"
    with pytest.raises(ReportError) as caught:
        parse_junit(data)
    assert caught.value.code == "report-too-large"


def test_messages_are_bounded_and_long_ids_stay_distinct() -> None:
    long, lines = "n" * 5000, "line&#10;" * 50
    data = (f'<testsuites><testcase classname="a" name="{long}1"><failure message="{"m" * 9000}"/></testcase>'
            f'<testcase classname="a" name="{long}2"><failure message="{lines}"/></testcase>'
            f'</testsuites>').encode()
    report = parse_junit(data)
    first, second = report.failing
    assert first.id != second.id and len(first.id) <= 1000 and len(second.id) <= 1000
    assert len(first.message) <= 400 and second.message.count("\n") < 6


def test_relative_judgment_passes_only_failures_the_base_already_had() -> None:
    base = parse_junit(b'<testsuites><testcase classname="t" name="old"><failure message="x"/></testcase>'
                       b'<testcase classname="t" name="fine"/></testsuites>')
    same = parse_junit(b'<testsuites><testcase classname="t" name="old"><failure message="x"/></testcase>'
                       b'</testsuites>')
    worse = parse_junit(b'<testsuites><testcase classname="t" name="old"><failure message="x"/></testcase>'
                        b'<testcase classname="t" name="fine"><failure message="broke"/></testcase></testsuites>')
    judged = judge_relative(same, base.failing_ids)
    assert judged.passed and judged.known == ("t::old",) and judged.new == ()
    judged = judge_relative(worse, base.failing_ids)
    assert not judged.passed and judged.new == ("t::fine",) and judged.known == ("t::old",)
    nothing = parse_junit(b"<testsuites/>")  # the command failed, but no test did: not explained by the base
    assert not judge_relative(nothing, base.failing_ids).passed


def test_feedback_names_each_failing_test_and_its_first_lines_bounded_and_escaped() -> None:
    report = parse_junit(b'<testsuites><testcase classname="t" name="a"><failure message="assert 1 == 2&#10;more"/>'
                         b'</testcase><testcase classname="t" name="b&#x9b;2J&#x202e;x"><failure message="e"/></testcase>'
                         b'</testsuites>')
    text = report_feedback(report, new=None, max_chars=6000)
    assert "t::a" in text and "assert 1 == 2" in text
    assert "\x9b" not in text and "\u202e" not in text and "\\x9b" in text and "\\u202e" in text
    many = parse_junit(b"<testsuites>" + b"".join(
        f'<testcase classname="t" name="n{i}"><failure message="{"x" * 300}"/></testcase>'.encode()
        for i in range(500)) + b"</testsuites>")
    text = report_feedback(many, new=None, max_chars=3000)
    assert len(text) <= 3000 and "t::n0" in text and "more failing" in text
    only_new = report_feedback(many, new=("t::n7",), max_chars=3000)
    assert "t::n7" in only_new and "t::n0" not in only_new.split("already failing")[0]


def test_a_secret_in_a_message_is_redacted() -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    report = parse_junit(f'<testsuites><testcase classname="t" name="a"><failure message="token {token}"/>'
                         f'</testcase></testsuites>'.encode())
    assert token not in report_feedback(report, new=None, max_chars=6000)


def test_check_feedback_notes_a_red_base_and_falls_back_to_the_escaped_end_of_the_output() -> None:
    from docket.domain.candidate import TestsReported
    from docket.domain.task import MAX_FEEDBACK_CHARS, check_feedback

    report = parse_junit(b'<testsuites><testcase classname="t" name="a"><failure message="assert 1 == 2"/>'
                         b'</testcase></testsuites>')
    tests = TestsReported(report.failing, None, "exit")
    text = check_feedback("tests", "failed", "exit", tests, "ignored tail", base_result="failed", base_code="exit")
    assert text.startswith("tests: failed (exit)\nNote: tests fails on the run's base too (failed, exit)")
    assert "t::a" in text and "assert 1 == 2" in text and "ignored tail" not in text
    assert "fails on the run's base" not in check_feedback("tests", "failed", "exit", tests, "", base_result="passed")
    tail = "x\n" * 10_000 + "the last line \x1b[2J"
    text = check_feedback("tests", "failed", "exit", None, tail)
    assert len(text) <= MAX_FEEDBACK_CHARS and text.endswith("the last line \\x1b[2J") and "\x1b" not in text
    missing = TestsReported((), "report-missing", "exit")
    assert "report-missing" in check_feedback("tests", "failed", "exit", missing, "boom")
