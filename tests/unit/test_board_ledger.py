"""The board (projections/board.py) from real events: the domain's own decisions, folded into their aggregates and
projected into views in memory. A task is delivered only when the target was moved to a commit holding its merge;
what stops short of that is named, and so is what the user must act on."""

from __future__ import annotations

import sqlite3

from docket.domain import events as ev
from docket.domain.merge_queue import integration, target_move
from docket.domain import run, task, worker
from docket.domain.kernel.canonical import canonical_json
from docket.domain.effects import IntegrationObservation
from docket.domain.kernel.values import from_ms, to_ms
from docket.projections import integrations
from docket.projections.board import overlap_lines, overlap_warnings, run_board
from docket.projections.views import Views

T0 = "2026-01-01T00:00:00.000Z"
BASE = "b" * 40
OTHER = "e" * 40


def commit(n: int, kind: str = "m") -> str:
    return ({"m": "a", "t": "c"}[kind] + f"{n:03x}") * 10


def binding(task_id: str) -> str:
    return (task_id.encode().hex() * 64)[:64]


class Recorded:
    """A ledger in memory: each decision's events get the next positions, are folded into their aggregate (by
    stream) and projected into the views, as `docket` does."""

    def __init__(self) -> None:
        self.views = Views(sqlite3.connect(":memory:", isolation_level=None))
        self.views.ensure_schema()
        self.position = 1  # LedgerCreated
        self.ms = 0
        self.state: dict[str, object] = {}

    def now(self) -> str:
        self.ms += 1000
        return from_ms(to_ms(T0) + self.ms)

    def record(self, apply, events):  # noqa: ANN001, ANN201
        events = events if isinstance(events, list) else [events]
        if not events:
            return None
        state = self.state.get(events[0].stream)
        rows = []
        for event in events:
            self.position += 1
            state = apply(state, event, self.position)
            rows.append((self.position, event.stream, event.version, event.type_name(),
                         canonical_json({"payload": event.payload(), "recorded_at": event.recorded_at})))
        self.views.apply(rows, lambda position: "0" * 64)
        self.state[events[0].stream] = state
        return state

    def board(self, **options: object):  # noqa: ANN201
        return run_board(self.views.conn, "r1", self.now(), tail=lambda path: None, **options)


def passed_run(tasks: tuple[str, ...] = ("t1", "t2"), *, planned: bool = True) -> tuple[Recorded, object]:
    """Run r1 (planned as `docket go` plans it, or not), its tasks passed, each with its worker at generation 1."""
    book = Recorded()
    r = book.record(run.apply, run.open_run("r1", "pin", "goal", "main", None, "/repo/.git", book.now()))
    r = book.record(run.apply, run.record_base_pin(r, "pin", book.now(), commit=BASE))
    if planned:
        r = book.record(run.apply, run.plan_run(r, [(t, []) for t in tasks], "scripted", 3, 2, book.now()))
    for task_id in tasks:
        t = book.record(task.apply, task.plan(None, r, task_id, f"title {task_id}", book.now()))
        book.record(worker.apply, worker.register(None, r, task_id, "implementer", "r1", task_id, book.now()))
        book.record(task.apply, task.finish(t, r, result="passed", binding_id=binding(task_id), code=None,
                                            message=None, now=book.now()))
    return book, r


def prepared(book: Recorded, r, tasks: tuple[str, ...] = ("t1", "t2"),  # noqa: ANN001
             overlaps: tuple[tuple[str, str, list[str]], ...] = ()):  # noqa: ANN201
    steps = [ev.IntegrationStep(task_id=t, binding_id=binding(t), commit=commit(n, "t"), worker_id=t, generation=1)
             for n, t in enumerate(tasks, start=1)]
    return book.record(integration.apply, integration.prepare(
        None, r, repository="/repo/.git", target_branch="main", expected_commit=BASE,
        integration_ref="refs/docket/integrations/r1", steps=steps, required_checks=[],
        overlaps=[ev.PathOverlapWarning(first_task=a, second_task=b, paths=p) for a, b, p in overlaps],
        approval_required=False, now=book.now()))


def merged(book: Recorded, i, number: int, *, verify: bool = True):  # noqa: ANN001, ANN201
    """Step number merged on the integration ref (and re-verified)."""
    (request,) = integration.request_step(i, number, intent_id=f"step-{number}", head=i.head(),
                                          merge_commit=commit(number), tree=commit(number, "t"), merge="merged",
                                          now=book.now())
    i = book.record(integration.apply, request)
    i = book.record(integration.apply, integration.decide_step(
        i, request, IntegrationObservation("merged", commit=commit(number)), book.now()))
    if verify:
        i = verified(book, i, number)
    return i


def verified(book: Recorded, i, number: int):  # noqa: ANN001, ANN201
    return book.record(integration.apply, integration.verified(
        i, number, verification_binding=binding(f"v{number}"), tree=commit(number, "t"), checks=[], now=book.now()))


def target_moved_as(book: Recorded, i, observed: target_move.TargetObservation):  # noqa: ANN001, ANN201
    """The target's intent recorded, then its outcome as the effector decides it from what it observed."""
    (intent,) = target_move.request_target(i, intent_id="target", checkout=None, now=book.now())
    i = book.record(integration.apply, intent)
    return book.record(integration.apply, target_move.decide_target(i, intent, observed, book.now()))


def states(board) -> dict[str, str]:  # noqa: ANN001
    return {t.task_id: t.state for t in board.tasks}


def test_a_task_is_delivered_only_once_the_target_was_moved_to_a_commit_holding_its_merge():
    book, r = passed_run()
    i = prepared(book, r)
    assert states(book.board()) == {"t1": "passed", "t2": "passed"}  # in the queue, nothing merged yet
    i = merged(book, i, 1, verify=False)
    assert states(book.board()) == {"t1": "verifying", "t2": "passed"}
    i = merged(book, verified(book, i, 1), 2)
    board = book.board()
    assert states(board) == {"t1": "merged (target not moved)", "t2": "merged (target not moved)"}
    assert board.integration == "2/2 step(s) verified, main not moved" and board.target_commit is None
    (intent,) = target_move.request_target(i, intent_id="target", checkout=None, now=book.now())
    i = book.record(integration.apply, intent)
    assert states(book.board()) == {"t1": "merged (target not moved)", "t2": "merged (target not moved)"}
    assert book.board().integration == "moving main, 2/2 step(s) verified"
    book.record(integration.apply, target_move.decide_target(
        i, intent, target_move.TargetObservation("found", commit=commit(2)), book.now()))
    board = book.board()
    assert states(board) == {"t1": "delivered", "t2": "delivered"}
    assert board.integration == "completed, 2 task(s) delivered" and board.target_commit == commit(2)
    assert board.attention == ()


def test_a_target_moved_by_someone_else_delivers_nothing_and_the_board_says_so():
    book, r = passed_run()
    i = prepared(book, r)
    i = merged(book, merged(book, i, 1), 2)
    target_moved_as(book, i, target_move.TargetObservation("found", commit=OTHER))
    board = book.board()
    assert states(board) == {"t1": "merged (target not moved)", "t2": "merged (target not moved)"}
    assert [t.note for t in board.tasks] == ["target-moved", "target-moved"]
    assert board.integration == "stopped (target-moved), 0 task(s) delivered"
    (todo,) = board.attention
    assert todo.startswith("main was not moved: refs/heads/main names " + OTHER)
    assert "moved by someone else" in todo


def test_a_conflicted_step_names_its_paths_and_the_tasks_warned_about_the_same_paths():
    book, r = passed_run()
    i = prepared(book, r, overlaps=(("t1", "t2", ["same.txt"]),))
    i = merged(book, i, 1)
    paths = ["same.txt", *(f"d/{n}.txt" for n in range(999))]
    book.record(integration.apply, integration.conflicted(i, 2, head=i.head(), reason="conflicted", paths=paths,
                                                          message="step 2 conflicts", now=book.now()))
    board = book.board()
    assert states(board) == {"t1": "merged (target not moved)", "t2": "conflicted"}
    t1, t2 = board.tasks
    assert t1.note == "the queue stopped at step 2 (conflicted)"
    assert t2.note == "in same.txt, d/0.txt, d/1.txt and 997 more; t1 changed the same paths"
    assert "integrated" not in str(board.document()) and "delivered" not in states(board).values()
    (todo,) = board.attention
    assert todo == "task t2 not delivered: conflicted in same.txt, d/0.txt, d/1.txt and 997 more; t1 changed the same paths"
    assert board.document()["tasks"][1]["note"] == t2.note


def test_an_unmergeable_step_and_a_rejected_merge_say_why():
    book, r = passed_run()
    i = prepared(book, r)
    book.record(integration.apply, integration.conflicted(i, 1, head=BASE, reason="unmergeable", paths=[],
                                                          message="no merge base", now=book.now()))
    board = book.board()
    assert (board.tasks[0].state, board.tasks[0].note) == ("unmergeable", "no merge base")

    book, r = passed_run()
    i = merged(book, prepared(book, r), 1, verify=False)
    book.record(integration.apply, integration.rejected(i, 1, verification_binding=binding("v1"), check="ok",
                                                        check_id="c1", code="exit", message="exited 1",
                                                        now=book.now()))
    board = book.board()
    assert (board.tasks[0].state, board.tasks[0].note) == ("rejected", "check ok failed on the merged tree (exit)")
    assert board.attention[0] == "task t1 not delivered: rejected, check ok failed on the merged tree (exit)"


def test_a_target_checked_out_is_what_the_user_must_act_on_with_the_command_that_goes_on():
    for planned, command in ((True, "'docket go --resume r1'"), (False, "'docket integrate r1'")):
        book, r = passed_run(("t1",), planned=planned)
        i = merged(book, prepared(book, r, ("t1",)), 1)
        target_moved_as(book, i, target_move.TargetObservation("found", commit=BASE, checked_out="/elsewhere"))
        board = book.board()
        assert states(board) == {"t1": "merged (target not moved)"}
        assert board.tasks[0].note == "target-checked-out"
        assert board.integration == "1/1 step(s) verified, main not moved (target-checked-out)"
        (todo,) = board.attention
        assert todo.startswith("main was not moved: refs/heads/main is checked out in /elsewhere")
        assert todo.endswith(f"then run {command} again"), todo


def test_a_conflicted_task_whose_worker_was_relaunched_is_shown_by_its_new_generation():
    book, r = passed_run()
    i = merged(book, prepared(book, r), 1)
    book.record(integration.apply, integration.conflicted(i, 2, head=i.head(), reason="conflicted",
                                                          paths=["same.txt"], message="x", now=book.now()))
    w = book.state[worker.stream_of("t2")]
    book.record(worker.apply, worker.relaunch(w, r, book.now()))  # its repair: generation 2
    board = book.board()
    assert states(board) == {"t1": "merged (target not moved)", "t2": "launching"}
    assert board.tasks[1].generation == 2 and board.tasks[1].note is None
    assert board.attention == ()


def test_approval_awaited_is_named_when_required():
    book, r = passed_run(("t1",))
    assert book.board().attention == ()
    assert book.board(approval_required=lambda: True).attention == ()  # nothing confirmed: nothing to approve


def test_same_path_warnings_recorded_at_prepare_are_worded_and_bounded():
    book, r = passed_run(tuple(f"t{n}" for n in range(13)))
    pairs = tuple((f"t{n}", f"t{n + 1}", ["x" * 500, "b", "c", "d"]) for n in range(12))
    prepared(book, r, tuple(f"t{n}" for n in range(13)), overlaps=pairs)
    integration_row = integrations.integration_of(book.views.conn, "r1")
    lines = overlap_lines(overlap_warnings(integration_row))
    assert len(lines) == 11 and lines[-1].startswith("and 2 more pair(s) of tasks")
    assert lines[0] == f"t0 and t1 both change {'x' * 119}\u2026, b, c and 1 more"



def test_the_run_line_alone_is_the_full_boards_without_its_task_lines():
    """What a piped live view follows (docket go, docket watch): the same run line, no per-task work."""
    from dataclasses import replace

    book, r = passed_run()
    checked = []
    for step in range(3):
        if step == 1:
            i = prepared(book, r)
        if step == 2:
            merged(book, i, 1)
        now = book.now()
        full = run_board(book.views.conn, "r1", now, tail=lambda path: None)
        alone = run_board(book.views.conn, "r1", now, tail=lambda path: None, with_tasks=False)
        assert alone == replace(full, tasks=(), attention=(), outcome=None)  # no per-task count
        checked.append(alone.integration)
    assert checked == ["unprepared", "merging, 0/2 step(s) verified", "merging, 1/2 step(s) verified"]
    assert run_board(book.views.conn, "r2", book.now(), with_tasks=False) is None
