"""Error codes have one home, domain/kernel/codes.py: every code raised is a Code member, and no decision compares a code
with a string typed out again (it names an exception type or a Code member).

Read from the source with ast, so a new ``e.code == "..."`` fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from docket.domain.kernel.codes import Code

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("domain", "projections", "adapters", "cli")
ERRORS = {"DocketError", "BadInput", "Refused", "Conflict", "OutcomeUnknown", "NotFound", "WorkFailed", "WorkStopped",
          "VerificationFailed", "ReportError"}
KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def _trees():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "_root" not in path.parts:
                yield path, ast.parse(path.read_text())


def _called(node: ast.Call) -> str | None:
    return node.func.id if isinstance(node.func, ast.Name) else \
        node.func.attr if isinstance(node.func, ast.Attribute) else None


def _names_a_code(node: ast.expr) -> bool:
    """``e.code``, ``run.failure_code``, ``last.code`` ...: an attribute that holds a code."""
    return isinstance(node, ast.Attribute) and (node.attr == "code" or node.attr.endswith("_code"))


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for element in node.elts for s in _strings(element)]
    return []


def string_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """Comparisons of a code attribute with string literals (directly, or in a tuple, list or set)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_a_code(side) for side in sides):
                found += [(node.lineno, s) for side in sides for s in _strings(side)]
    return found


def test_codes_are_unique_kebab_case_and_named_after_their_text():
    texts = [code.value for code in Code]
    assert len(texts) == len(set(texts))
    assert [t for t in texts if not KEBAB.match(t)] == []
    assert [c.name for c in Code if c.name != c.value.upper().replace("-", "_")] == []
    assert Code.RUN_CLOSED == "run-closed" and f"{Code.RUN_CLOSED}" == "run-closed"  # printed as its text


def test_every_code_raised_as_a_string_is_a_member():
    unknown = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in ERRORS and node.args:
                unknown += [f"{path.relative_to(ROOT)}:{node.lineno}: {s}" for s in _strings(node.args[0])
                            if s not in set(Code)]
    assert unknown == [], "add these codes to domain/kernel/codes.py"


def test_no_decision_compares_a_code_with_a_string():
    found = [f"{path.relative_to(ROOT)}:{line}: {s!r}" for path, tree in _trees()
             for line, s in string_comparisons(tree)]
    assert found == [], "compare with a Code member, or catch the exception's own type"


def test_the_check_finds_a_string_comparison():
    sample = ast.parse('if e.code in ("run-closed", "lease-held") or last.result_code != "interrupted": pass\n'
                       'if e.code == Code.RUN_CLOSED: pass\n')
    assert string_comparisons(sample) == [(1, "run-closed"), (1, "lease-held"), (1, "interrupted")]


def test_an_error_of_its_own_type_prints_its_code_and_keeps_its_family():
    from docket.domain.kernel import errors

    made = {kind: kind("why") for kind in (errors.RunClosed, errors.TargetCheckedOut, errors.AwaitingApproval,
                                           errors.DependenciesUnsettled, errors.OutputExists, errors.StaleGeneration,
                                           errors.StaleToken, errors.StorageFailed)}
    assert {kind.__name__: (e.code, e.exit_code) for kind, e in made.items()} == {
        "RunClosed": ("run-closed", 3), "TargetCheckedOut": ("target-checked-out", 3),
        "AwaitingApproval": ("awaiting-approval", 3), "DependenciesUnsettled": ("dependencies-unsettled", 3),
        "OutputExists": ("output-exists", 3), "StaleGeneration": ("stale-generation", 3),
        "StaleToken": ("stale-token", 3), "StorageFailed": ("database", 2)}
    assert all(type(e.code) is str and str(e) == f"{e.code}: why" for e in made.values())
    assert isinstance(made[errors.StaleToken], errors.Fenced) and isinstance(made[errors.RunClosed], errors.Refused)


def test_an_error_explained_in_context_keeps_its_type_code_and_exit_code():
    from docket.domain.kernel import errors

    for original in (errors.NotFound("key-not-found", "no key"), errors.BadInput("bad-key", "not a key"),
                     errors.OutputExists("there"), errors.StorageFailed("disk I/O error")):
        told = original.explained(f"run r exports with key k: {original.message}; resume with --key")
        assert (type(told), told.code, told.exit_code) == (type(original), original.code, original.exit_code)
        assert told.message.endswith("resume with --key") and str(told) == f"{told.code}: {told.message}"
        assert original.message != told.message  # the original is left as it was
