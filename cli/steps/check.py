"""docket check run: the configured checks against exactly a candidate's commit, each in its own execution."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from ..console.context import Context
from ..console.parsing import command, group
from ...domain.kernel.codes import Code

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    check = group(nouns, "check", "run docket.toml's [checks.NAME] against a pinned candidate",
                  "docket check run 3f9a1c0e --check tests")
    p = command(check, "run", check_run, common,
                "run checks against the candidate's commit, each in a fresh detached worktree (exit 0: all passed; "
                "6: one failed; 7: one timed out)",
                "docket check run 3f9a1c0e\n  docket check run 3f9a1c0e --check tests --check lint --json")
    p.add_argument("candidate", metavar="CANDIDATE", help="binding id (or at least 8 of its digits), or the commit")
    p.add_argument("--check", action="append", metavar="NAME", dest="checks",
                   help="a [checks.NAME] to run (repeatable; default: every configured check)")


def check_run(ctx: Context) -> int:
    from ...adapters.world.processes.process_tree import become_subreaper

    become_subreaper()  # what the agents, checks and hooks it launches leave is adopted here, and stopped
    from pathlib import Path

    from ...adapters.service_layer.use_cases.candidates import find_candidate
    from ...adapters.service_layer.use_cases.base_checks import run_check
    from ...adapters.service_layer.use_cases.base_tests import check_base_tests
    from ...adapters.service_layer.use_cases.checks import CheckSpec
    from ...adapters.world.files.config_file import load_trusted_config
    from ...domain.kernel.errors import BadInput, NotFound
    from ..console.output import emit, info, shown

    a = ctx.args
    config = load_trusted_config(Path.cwd())
    from ...adapters.world.processes.sandbox_roots import require_sandbox
    from ...domain.containment.sandbox import Confinement

    require_sandbox(Confinement(mode=config.sandbox))  # refused before anything is made or recorded
    names = list(dict.fromkeys(a.checks or sorted(config.checks)))
    if not names:
        raise BadInput(Code.NO_CHECKS, "docket.toml has no [checks.NAME]; add one (see 'docket config show')")
    for name in names:
        if name not in config.checks:
            known = ", ".join(sorted(config.checks)) or "none"
            raise NotFound(Code.CHECK_NOT_FOUND, f"docket.toml has no [checks.{name}] (configured: {known})")
    candidate = find_candidate(ctx.ledger, ctx.views(), a.candidate)
    if candidate.status != "pinned":
        from ...domain.kernel.errors import Refused

        raise Refused(Code.CANDIDATE_NOT_PINNED, f"candidate {candidate.binding_id} is {candidate.status}; checks run "
                                              "only on a pinned candidate")
    outcomes = []
    base_tests: list[dict[str, Any]] = []
    for name in names:
        chosen = config.checks[name]
        spec = CheckSpec.of(name, chosen, sandbox=config.sandbox)
        if not ctx.json:
            info(f"check {shown(name)} on candidate {candidate.binding_id[:12]} ...")
        outcome = run_check(ctx.ledger, ctx.clock, ctx.effector, candidate.binding_id, spec,
                            artifact_dir=config.artifact_dir, docket_dir=ctx.paths.ledger.parent,
                            ledger_path=ctx.paths.ledger)
        outcomes.append(outcome)
        if outcome.result == "passed":  # the base's tests on its code too, when it changed them (base_tests.py)
            tested = check_base_tests(ctx.ledger, ctx.clock, ctx.effector, candidate.binding_id, spec,
                                      artifact_dir=config.artifact_dir, docket_dir=ctx.paths.ledger.parent,
                                      ledger_path=ctx.paths.ledger)
            if tested is not None:
                base_tests.append({"check": name, "binding_id": tested.binding_id, "commit": tested.commit,
                                   "check_id": tested.run.check_id, "result": tested.result,
                                   "code": tested.run.result_code})
    ctx.update_views()
    lines = []
    for o in outcomes:
        how = "" if o.result == "passed" else f" ({o.code}" + (
            f", exit code {o.exit_code}" if o.exit_code is not None else
            f", signal {o.signal}" if o.signal is not None else "") + ")"
        lines.append(f"{o.check} #{o.attempt}: {o.result}{how}; execution {o.execution_state}"
                     + (f"; {len(o.artifacts)} artifact(s)" if o.artifacts else ""))
        if o.result != "passed" and o.tail:
            lines += [f"    {line}" for line in o.tail.splitlines()[-5:]]
    for t in base_tests:
        lines.append(f"{t['check']} with the base's tests (tree {t['commit'][:12]}): {t['result']}"
                     + (f" ({t['code']})" if t["code"] and t["result"] != "passed" else ""))
    emit(ctx.json, {"binding_id": candidate.binding_id, "commit": candidate.commit,
                    "checks": [asdict(o) for o in outcomes], "base_tests": base_tests},
         "\n".join(shown(line) for line in lines))
    results = {o.result for o in outcomes} | {t["result"] for t in base_tests}
    return 6 if "failed" in results else 7 if "timed-out" in results else 0
