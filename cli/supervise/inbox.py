"""docket inbox, docket answer: the questions agents asked, across runs, and a trusted person's answer."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..console.context import Context
from ..console.parsing import command
from ...domain.kernel.codes import Code

__all__ = ["register", "register_answer"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "inbox", inbox, common,
                "list every open question agents asked, and every follow-up task they proposed that waits for a "
                "person's decision, across runs (of one run with --run), oldest first",
                "docket inbox --json")
    p.add_argument("--run", metavar="RUN", help="only this run's questions")


def register_answer(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "answer", answer, common,
                "answer an agent's question (its id from 'docket inbox'), or accept or refuse a follow-up task it "
                "proposed (accept|refuse, or --choice 1|2), as the local user or, with --as, an identity "
                "docket.toml's [inbox] trusted names; anyone else is refused (exit 3) and the refusal recorded",
                "docket answer req-7k2m9x4qab2cd3ef 'Use PostgreSQL.'")
    p.add_argument("question", metavar="QUESTION", help="the question's id (req-...)")
    p.add_argument("text", metavar="TEXT", nargs="?", help="the answer")
    p.add_argument("--choice", metavar="N", type=int, help="pick the question's choice N (counted from 1)")
    p.add_argument("--as", dest="identity", metavar="NAME",
                   help="who answers, if not the local user: a name [inbox] trusted lists")


def _age_ms(asked_at: str, now: str) -> int:
    from ...domain.kernel.values import to_ms

    return max(0, to_ms(now) - to_ms(asked_at))


def inbox(ctx: Context) -> int:
    from ...domain.kernel.values import format_duration
    from ...projections.inbox import open_questions
    from ..console.output import emit, shown

    now = ctx.clock.now()
    questions = open_questions(ctx.views().conn, ctx.args.run)
    rows = [_row(q, now) for q in questions]
    changes = _config_changes(ctx)
    lines = []
    for r in rows:
        age = format_duration(r["age_ms"] // 1000 * 1000) + " ago" if r["age_ms"] >= 1000 else "just now"
        lines.append(f"{r['question_id']}  run {shown(r['run_id'])}  task {shown(r['task_id'])}  "
                     f"{r['reason']}  asked {age}")
        if r["kind"] == "propose":
            lines.append(f"  a follow-up task: {shown(r['proposal']['title'])}")
            lines += [f"    {shown(line)}" for line in r["proposal"]["prompt"].splitlines()[:20]]
        else:
            lines.append(f"  {shown(r['question'])}")
        lines += [f"  {i}. {shown(choice)}" for i, choice in enumerate(r["choices"], 1)]
        if r["deadline_at"]:
            lines.append(f"  deadline {r['deadline_at']} ({r['on_deadline']})")
    for change in changes:
        lines.append(f"config-change  run {shown(change['run_id'])}  task {shown(change['task_id'])}  candidate "
                     f"{change['binding_id'][:12]} passed its checks and changes what the run trusts: "
                     f"{shown(', '.join(change['paths']))}")
        if change.get("protected_changes"):
            lines.append("  it also changes protected paths (its checks passed with the base's copy of them too): "
                         + shown(", ".join(change["protected_changes"][:10])))
        lines += [f"  {shown(line)}" for line in (change.get("diff") or "").splitlines()[:60]]
        lines.append(f"  approve: {shown(change['approve'])}   refuse: docket run abort {shown(change['run_id'])}")
    emit(ctx.json, {"questions": rows, "config_changes": changes},
         "\n".join(lines) if lines else "no open questions")
    return 0


def _config_changes(ctx: Context) -> list[dict[str, Any]]:
    """Candidates waiting for a person because they change what their run trusts (docket.toml, named scripts)."""
    from ...adapters.service_layer.merge_queue.approval import waiting_for_a_person

    return waiting_for_a_person(ctx.ledger, ctx.views(), ctx.args.run, with_diff=True)


def _row(q: dict[str, Any], now: str) -> dict[str, Any]:
    """An inbox entry: a question, or a proposed follow-up a person accepts (choice 1) or refuses (choice 2)."""
    from ...domain.follow_ups import CHOICES

    proposal = q["kind"] == "propose"
    return {"question_id": q["request_key"], "kind": q["kind"], "run_id": q["run_id"], "task_id": q["task_id"],
            "worker_id": q["worker_id"], "generation": q["generation"],
            "reason": "proposal" if proposal else q["reason"], "question": q["question"],
            "choices": list(CHOICES) if proposal else q["choices"], "asked_at": q["asked_at"],
            "age_ms": _age_ms(q["asked_at"], now), "deadline_at": q["deadline_at"], "on_deadline": q["on_deadline"],
            "proposal": {"title": q["title"], "prompt": q["summary"]} if proposal else None}


def answer(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.requests import answer_question, local_user
    from ...adapters.world.files.config_file import find_config, load_config, load_trusted_config
    from ..console.output import emit, shown

    a = ctx.args
    if os.environ.get("DOCKET_WORKER"):  # docket sets it for every agent it launches: an agent never answers
        from ...domain.kernel.errors import Refused

        raise Refused(Code.ANSWER_FROM_AGENT, "this runs inside an agent docket launched; a person answers its "
                                           "questions, from outside")
    # an identity other than the local user is trusted only from a docket.toml its user trusts (config-untrusted)
    trusted = (load_trusted_config(Path.cwd()) if a.identity else load_config(find_config(Path.cwd()))).inbox.trusted
    question = answer_question(ctx.ledger, ctx.clock, a.question, text=a.text, choice=a.choice,
                               by=a.identity or local_user(), trusted=trusted, docket_dir=ctx.paths.ledger.parent)
    from ...adapters.world import faults

    faults.crash_point("answer:after-record")
    ctx.update_views()
    if question.kind == "propose":
        added = f": task {shown(question.added_task)} added to run {shown(question.run_id)}" \
            if question.added_task else ""
        emit(ctx.json, {"question_id": question.key, "run_id": question.run_id, "task_id": question.task_id,
                        "decision": question.decision, "decided_by": question.decided_by,
                        "added_task": question.added_task},
             f"follow-up {question.key} (from task {shown(question.task_id)}): {question.decision} by "
             f"{shown(question.decided_by)}{added}")
        return 0
    emit(ctx.json, {"question_id": question.key, "run_id": question.run_id, "task_id": question.task_id,
                    "answer": question.answer, "choice": question.choice, "answered_by": question.answered_by,
                    "answered_at": question.answered_at},
         f"question {question.key} (task {shown(question.task_id)}): answered by {shown(question.answered_by)}")
    return 0
