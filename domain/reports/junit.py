"""JUnit XML test reports (pytest's --junitxml, most test runners): which tests failed, and why, in a few lines. Pure.

A report is written by the check, so by the agent's code: hostile input. It is
parsed from bytes with expat directly, refusing any DOCTYPE or entity
declaration (no entity expansion, no external fetch), bounded in size, depth and
number of test cases. What it yields is bounded and redacted, ready for an event:
each failing test's id (``classname::name``, as pytest's own ids read), whether it
failed or errored, and the first lines of its message with the place it failed.

``judge_relative`` is the judgment relative to the run's base: a candidate passes
when every test failing on it was failing on the base already.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal, NoReturn
from xml.parsers import expat

from ..kernel.names import is_unsafe_character
from ..containment.processes import redact
from ..kernel.codes import Code

__all__ = ["MAX_REPORT_BYTES", "Judgment", "ReportError", "TestFailure", "TestReport", "escaped", "judge_relative",
           "parse_junit", "report_feedback"]

MAX_REPORT_BYTES = 16 * 1024 * 1024
MAX_TESTS = 200_000
MAX_FAILING = 10_000  # every failing id is recorded: a relative judgment cannot rest on a cut list
MAX_DEPTH = 32
MAX_ID_CHARS = 1000
MAX_MESSAGE_LINES = 5
MAX_MESSAGE_CHARS = 400
MAX_TEXT_CHARS = 1 << 20  # of one failure's body, kept while parsing
_WHERE = re.compile(r"^(\S+:\d+): ")  # pytest's last line of a failure: "tests/test_m.py:6: AssertionError"


class ReportError(ValueError):
    """The report cannot be used: code is report-too-large, report-refused, report-malformed or report-not-junit."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class TestFailure:
    __test__ = False  # not a pytest test class

    id: str
    outcome: Literal["failed", "error"]
    message: str  # its first lines, and where it failed when the report says


@dataclass(frozen=True)
class TestReport:
    __test__ = False

    tests: int
    failing: tuple[TestFailure, ...]  # in report order, each id once

    @property
    def failing_ids(self) -> frozenset[str]:
        return frozenset(f.id for f in self.failing)


def parse_junit(data: bytes, secrets: Collection[str] = ()) -> TestReport:
    """The report in data, redacted (shapes and secrets, the known values); ReportError when it is too large,
    declares a DOCTYPE or entities, is not well-formed XML, or is not JUnit (its root is neither testsuites nor
    testsuite)."""
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError(Code.REPORT_TOO_LARGE, f"the report has {len(data)} bytes; at most {MAX_REPORT_BYTES} are read")
    collector = _Collector(tuple(secrets))
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse
    parser.EntityDeclHandler = _refuse
    parser.UnparsedEntityDeclHandler = _refuse
    parser.ExternalEntityRefHandler = _refuse
    parser.StartElementHandler = collector.start
    parser.EndElementHandler = collector.end
    parser.CharacterDataHandler = collector.text
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise ReportError(Code.REPORT_MALFORMED, f"the report is not well-formed XML ({expat.ErrorString(e.code)}, "
                                              f"line {e.lineno})") from None
    if collector.root is None:
        raise ReportError(Code.REPORT_MALFORMED, "the report is empty")
    return TestReport(collector.tests, tuple(collector.failing.values()))


def _refuse(*_: object) -> NoReturn:
    raise ReportError(Code.REPORT_REFUSED, "the report declares a DOCTYPE or an entity; such reports are not read "
                                        "(entity expansion and external references are refused)")


class _Collector:
    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = secrets
        self.root: str | None = None
        self.depth = 0
        self.tests = 0
        self.failing: dict[str, TestFailure] = {}
        self.case: dict[str, str] | None = None  # the open testcase's attributes
        self.outcome: str | None = None  # failed | error, once the open testcase has one
        self.message: str | None = None
        self.body: list[str] | None = None  # the open failure's text
        self.body_chars = 0

    def start(self, name: str, attributes: dict[str, str]) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ReportError(Code.REPORT_TOO_DEEP, f"the report nests elements deeper than {MAX_DEPTH}")
        if self.root is None:
            if name not in ("testsuites", "testsuite"):
                raise ReportError(Code.REPORT_NOT_JUNIT, f"the report's root is <{name[:40]}>, not <testsuites> or "
                                                      "<testsuite>")
            self.root = name
        if name == "testcase" and self.case is None:
            self.tests += 1
            if self.tests > MAX_TESTS:
                raise ReportError(Code.REPORT_TOO_LARGE, f"the report has more than {MAX_TESTS} test cases")
            self.case, self.outcome, self.message = dict(attributes), None, None
        elif name in ("failure", "error") and self.case is not None and self.outcome is None:
            self.outcome = "failed" if name == "failure" else "error"
            self.message = attributes.get("message")
            self.body, self.body_chars = [], 0

    def text(self, data: str) -> None:
        if self.body is not None and self.body_chars < MAX_TEXT_CHARS:
            self.body.append(data)
            self.body_chars += len(data)

    def end(self, name: str) -> None:
        self.depth -= 1
        if name in ("failure", "error") and self.body is not None:
            self.message = _first_lines(self.message, "".join(self.body), self.secrets)
            self.body = None
        elif name == "testcase" and self.case is not None:
            if self.outcome is not None:
                test_id = _test_id(self.case.get("classname", ""), self.case.get("name", ""), self.secrets)
                if test_id not in self.failing:
                    if len(self.failing) >= MAX_FAILING:
                        raise ReportError(Code.REPORT_TOO_LARGE, f"the report has more than {MAX_FAILING} failing tests")
                    self.failing[test_id] = TestFailure(test_id, self.outcome,  # type: ignore[arg-type]
                                                        self.message or self.outcome)
            self.case = None


def _test_id(classname: str, name: str, secrets: tuple[str, ...]) -> str:
    """classname::name (pytest's id, with dots for its folders), or name alone; a long id is cut, a digest of the
    whole keeping it distinct."""
    test_id = redact(f"{classname}::{name}" if classname else name or "(unnamed)", secrets)
    if len(test_id) > MAX_ID_CHARS:
        test_id = test_id[:MAX_ID_CHARS - 18] + "…" + hashlib.sha256(test_id.encode()).hexdigest()[:17]
    return test_id


def _first_lines(message: str | None, body: str, secrets: tuple[str, ...]) -> str:
    """The first lines of the failure's message (of its body when it has none), and where it failed."""
    lines = [line.rstrip() for line in (message if message and message.strip() else body).splitlines()]
    lines = [line for line in lines if line.strip()][:MAX_MESSAGE_LINES]
    where = next((m.group(1) for line in reversed(body.splitlines()) if (m := _WHERE.match(line))), None)
    if where and not any(where in line for line in lines):
        lines.append(f"at {where}")
    return redact("\n".join(lines), secrets)[:MAX_MESSAGE_CHARS]


@dataclass(frozen=True)
class Judgment:
    """A candidate's report against the base's failing ids: new (failing here, not on the base) and known."""

    passed: bool
    new: tuple[str, ...]
    known: tuple[str, ...]


def judge_relative(report: TestReport, base_failing: frozenset[str]) -> Judgment:
    """For a check whose command failed: passed when some tests failed and every one failed on the base too (a
    failed command with no failing test is not explained by the base)."""
    new = tuple(f.id for f in report.failing if f.id not in base_failing)
    known = tuple(f.id for f in report.failing if f.id in base_failing)
    return Judgment(passed=bool(report.failing) and not new, new=new, known=known)


def report_feedback(report: TestReport, *, new: tuple[str, ...] | None, max_chars: int) -> str:
    """What an agent needs to repair: each failing test (only the new ones when new is given: the rest were
    failing on the base already) with the first lines of its message, escaped, at most max_chars characters."""
    wanted = report.failing if new is None else tuple(f for f in report.failing if f.id in set(new))
    head = (f"{len(wanted)} test(s) failed" if new is None else
            f"{len(wanted)} test(s) failed that pass on the run's base")
    out, used = [head + ":"], len(head) + 1
    for i, failure in enumerate(wanted):
        block = "\n".join([f"- {escaped(failure.id)} ({failure.outcome})",
                           *(f"    {escaped(line)}" for line in failure.message.splitlines())])
        rest = len(wanted) - i
        if used + len(block) + 60 > max_chars:
            out.append(f"... and {rest} more failing test(s)")
            break
        out.append(block)
        used += len(block) + 1
    if new is not None and len(report.failing) > len(wanted):
        out.append(f"({len(report.failing) - len(wanted)} other test(s) were already failing on the base)")
    return "\n".join(out)[:max_chars]


def escaped(text: str) -> str:
    """text with control, bidi and invisible characters shown as escapes (a report must not steer a terminal)."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x100 and is_unsafe_character(c)
                   else f"\\u{ord(c):04x}" if is_unsafe_character(c) else c for c in text)
