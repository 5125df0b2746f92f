"""docket inbox, docket answer: the questions agents asked, across runs, and a trusted person's answer."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from .context import Context
from .parsing import command

__all__ = ["register", "register_answer"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "inbox", inbox, common,
                "list every open question agents asked, across runs (of one run with --run), oldest first",
                "docket inbox --json")
    p.add_argument("--run", metavar="RUN", help="only this run's questions")


def register_answer(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "answer", answer, common,
                "answer an agent's question (its id from 'docket inbox'), as the local user or, with --as, an "
                "identity docket.toml's [inbox] trusted names; anyone else is refused (exit 3) and the refusal "
                "recorded",
                "docket answer req-7k2m9x4qab2cd3ef 'Use PostgreSQL.'")
    p.add_argument("question", metavar="QUESTION", help="the question's id (req-...)")
    p.add_argument("text", metavar="TEXT", nargs="?", help="the answer")
    p.add_argument("--choice", metavar="N", type=int, help="pick the question's choice N (counted from 1)")
    p.add_argument("--as", dest="identity", metavar="NAME",
                   help="who answers, if not the local user: a name [inbox] trusted lists")


def _age_ms(asked_at: str, now: str) -> int:
    from ..domain.values import to_ms

    return max(0, to_ms(now) - to_ms(asked_at))


def inbox(ctx: Context) -> int:
    from ..domain.values import format_duration
    from ..projections.inbox import open_questions
    from .output import emit, shown

    now = ctx.clock.now()
    questions = open_questions(ctx.views().conn, ctx.args.run)
    rows = [{"question_id": q["request_key"], "run_id": q["run_id"], "task_id": q["task_id"],
             "worker_id": q["worker_id"], "generation": q["generation"], "reason": q["reason"],
             "question": q["question"], "choices": q["choices"], "asked_at": q["asked_at"],
             "age_ms": _age_ms(q["asked_at"], now), "deadline_at": q["deadline_at"],
             "on_deadline": q["on_deadline"]} for q in questions]
    lines = []
    for r in rows:
        age = format_duration(r["age_ms"] // 1000 * 1000) + " ago" if r["age_ms"] >= 1000 else "just now"
        lines.append(f"{r['question_id']}  run {shown(r['run_id'])}  task {shown(r['task_id'])}  "
                     f"{r['reason']}  asked {age}")
        lines.append(f"  {shown(r['question'])}")
        lines += [f"  {i}. {shown(choice)}" for i, choice in enumerate(r["choices"], 1)]
        if r["deadline_at"]:
            lines.append(f"  deadline {r['deadline_at']} ({r['on_deadline']})")
    emit(ctx.json, {"questions": rows}, "\n".join(lines) if lines else "no open questions")
    return 0


def answer(ctx: Context) -> int:
    from ..adapters.service_layer.requests import answer_question, local_user
    from ..adapters.world.config_file import find_config, load_config
    from .output import emit, shown

    a = ctx.args
    if os.environ.get("DOCKET_WORKER"):  # docket sets it for every agent it launches: an agent never answers
        from ..domain.errors import Refused

        raise Refused("answer-from-agent", "this runs inside an agent docket launched; a person answers its "
                                           "questions, from outside")
    trusted = load_config(find_config(Path.cwd())).inbox.trusted
    question = answer_question(ctx.ledger, ctx.clock, a.question, text=a.text, choice=a.choice,
                               by=a.identity or local_user(), trusted=trusted)
    from ..adapters.world import faults

    faults.crash_point("answer:after-record")
    ctx.update_views()
    emit(ctx.json, {"question_id": question.key, "run_id": question.run_id, "task_id": question.task_id,
                    "answer": question.answer, "choice": question.choice, "answered_by": question.answered_by,
                    "answered_at": question.answered_at},
         f"question {question.key} (task {shown(question.task_id)}): answered by {shown(question.answered_by)}")
    return 0
