"""Error codes have one home, domain/kernel/codes.py: every code raised is a Code constant, raised with the exit
status the codes' table gives it (and docs/cli.md lists it under), and no decision compares a code with a string
typed out again (it names an exception type or a Code constant).

Read from the source with ast, so a new ``e.code == "..."`` fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from docket.domain.kernel.codes import EXIT_STATUS, Code, all_codes, exit_status

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("domain", "projections", "adapters", "cli")
ERRORS = {"DocketError", "BadInput", "Refused", "Conflict", "OutcomeUnknown", "NotFound", "WorkFailed", "WorkStopped",
          "VerificationFailed", "ReportError", "LedgerTampered", "Fenced"}
# each family's exit status (domain/kernel/errors.py); ReportError is JUnit's, turned into a check's result, never an exit
FAMILY_STATUS = {"BadInput": 2, "Refused": 3, "Conflict": 3, "OutcomeUnknown": 4, "NotFound": 5, "WorkFailed": 6,
                 "WorkStopped": 7, "VerificationFailed": 1, "LedgerTampered": 1, "Fenced": 3, "DocketError": 2}
# one code, two statuses: an expired question is refused to the person answering it (3), and stops the agent's own
# `docket request ask` that waited for it (7)
ALSO = {("question-expired", 7)}
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
    codes = all_codes()
    texts = list(codes.values())
    assert len(texts) == len(set(texts)) > 200
    assert [t for t in texts if not KEBAB.match(t)] == []
    assert [name for name, text in codes.items() if name != text.upper().replace("-", "_")] == []
    assert Code.RUN_CLOSED == "run-closed" and f"{Code.RUN_CLOSED}" == "run-closed"  # printed as its text
    assert set(EXIT_STATUS) <= set(texts) and exit_status(Code.NO_LEDGER) == 5 and exit_status("views-behind") is None


def _code_argument(node: ast.Call) -> ast.expr | None:
    return node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "code"), None)


def raise_sites(tree: ast.AST) -> list[tuple[int, str, ast.expr]]:
    """(line, error family, the code argument) of every error made with a code."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) in ERRORS and (code := _code_argument(node)) is not None:
            found.append((node.lineno, _called(node), code))
    return found


def test_no_code_is_raised_as_a_string():
    typed = [f"{path.relative_to(ROOT)}:{line}: {ast.unparse(code)}" for path, tree in _trees()
             for line, _, code in raise_sites(tree) if isinstance(code, (ast.Constant, ast.JoinedStr))]
    assert typed == [], "raise with a Code constant (domain/kernel/codes.py), not its text"


def test_the_check_finds_a_code_raised_as_a_string():
    sample = ast.parse('raise Refused("run-closed", "m")\nraise NotFound(code=f"x-{y}", message="m")\n'
                       'raise BadInput(Code.BAD_ID, "m")\n')
    assert [(line, family, ast.unparse(code)) for line, family, code in raise_sites(sample)] == [
        (1, "Refused", "'run-closed'"), (2, "NotFound", "f'x-{y}'"), (3, "BadInput", "Code.BAD_ID")]


def test_every_code_is_raised_with_the_exit_status_the_table_gives_it():
    wrong = []
    for path, tree in _trees():
        for line, family, code in raise_sites(tree):
            if family not in FAMILY_STATUS or not (isinstance(code, ast.Attribute) and isinstance(code.value, ast.Name)
                                                   and code.value.id == "Code"):
                continue
            text = getattr(Code, code.attr)
            status = FAMILY_STATUS[family]
            if exit_status(text) != status and (text, status) not in ALSO:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {text} raised as {family} ({status}), "
                             f"the table says {exit_status(text)}")
    assert wrong == [], "raise it with its family, or move it in EXIT_STATUS (domain/kernel/codes.py)"


def _documented_statuses() -> dict[str, set[int]]:
    """code -> the exit statuses docs/cli.md's exit-code list names it under: the lists of the error families (1 to 5,
    9), not 6 to 8, which say what became of the work (a task's failure, a stop, a run waiting) by its reasons."""
    found: dict[str, set[int]] = {}
    status = None
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text[text.index("## Exit codes"):text.index("## Warnings")]
    for line in section.splitlines():
        head = re.match(r"^- \*\*(\d+)\*\*", line)
        if head:
            status = int(head.group(1))
        if status is not None and status not in (6, 7, 8):
            for word in re.findall(r"`([a-z][a-z0-9-]+)`", line):
                if word in set(all_codes().values()):
                    found.setdefault(word, set()).add(status)
    return found


def test_the_docs_list_each_code_under_the_exit_status_it_has():
    documented = _documented_statuses()
    assert len(documented) > 100
    wrong = {code: sorted(statuses) for code, statuses in documented.items()
             if statuses != {exit_status(code)} and not all((code, s) in ALSO or s == exit_status(code)
                                                            for s in statuses)}
    assert wrong == {}, "docs/cli.md lists these under another exit status than domain/kernel/codes.py gives"


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
