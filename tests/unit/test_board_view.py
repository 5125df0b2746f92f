"""The live view's renderers (cli/console/live.py): nothing from the ledger or a worker's output reaches the terminal raw,
and a view whose output went away stops drawing without raising."""

from __future__ import annotations

import io

from rich.console import Console

from docket.cli.console.live import LiveView, board_lines, board_table, event_line
from docket.projections.board import Board, TaskLine

HOSTILE = "\x1b[2J\x1b]0;pwned\x07 \u202eevil\u202c\r\u200bz [bold red]x[/bold red] :smile:"
RAW = ("\x1b[2J", "\x1b]0;", "\x07", "\u202e", "\u202c", "\u200b", "\r")


def board(**more: object) -> Board:
    line = TaskLine(task_id="t1", title="title", state="running", generation=2, elapsed_ms=75_400,
                    last_line=HOSTILE, cycles=1, candidate="a" * 12, checks="1/2 passed, 1 running", depends_on=(),
                    step=None)
    waiting = TaskLine(task_id="t\u202e2", title="t", state="waiting", generation=None, elapsed_ms=None,
                       last_line=None, cycles=None, candidate=None, checks=None, depends_on=("t1",), step=None)
    values = dict(run_id="r1", goal=f"goal {HOSTILE}", status="active", closed=False, target_branch="main",
                  budget_ms=3_600_000, used_ms=600_000, remaining_ms=3_000_000, integration="unprepared",
                  target_commit=None, receipt_sealed=False, receipt_sha256=None, tasks=(line, waiting))
    return Board(**(values | more))


def assert_escaped(text: str) -> None:
    assert not [raw for raw in RAW if raw in text], repr(text)
    assert "\\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil\\u202c\\r\\u200bz" in text


def test_plain_lines_escape_every_control_bidi_and_invisible_character():
    lines = board_lines(board())
    text = "\n".join(lines)
    assert_escaped(text)
    assert len(lines) == 3 and "t\\u202e2" in lines[2] and "waiting" in lines[2]
    assert lines[0].startswith("run r1: active, budget 10m used of 1h, 50m left, integration unprepared, receipt not "
                               "sealed: goal ")
    assert "running" in lines[1] and "gen 2" in lines[1] and "1m15s" in lines[1] and "1/2 passed" in lines[1]


def test_the_table_on_a_terminal_shows_markup_and_escapes_as_text():
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=400, markup=False, emoji=False).print(board_table(board()))
    text = out.getvalue()
    assert_escaped(text)
    assert "[bold red]x[/bold red] :smile:" in text  # neither markup nor an emoji code is interpreted


def test_an_event_line_is_position_time_type_and_an_escaped_summary():
    payload = {"task_id": "t1", "worker_id": "t1", "generation": 2, "cause": "exited", "exit_code": 0,
               "tail": HOSTILE, "reason": HOSTILE, "binding_id": "b" * 64, "process": {"pid": 7}}
    line = event_line(12, "2026-01-01T00:00:00.000Z", "WorkerExited.v1", payload)
    assert line.startswith("12 2026-01-01T00:00:00.000Z WorkerExited task_id=t1 worker_id=t1 generation=2 "
                           "cause=exited exit_code=0 reason=")
    assert line.endswith(" binding_id=" + "b" * 12) and "pid" not in line
    assert_escaped(line)
    assert event_line(3, "2026-01-01T00:00:00.000Z", "RunOpened.v1", {"run_id": "r1"}) == \
        "3 2026-01-01T00:00:00.000Z RunOpened"


class Gone(io.StringIO):
    """An output that went away: a closed pipe (EPIPE) or a hung-up terminal (EIO)."""

    def __init__(self, error: OSError):
        super().__init__()
        self.error = error
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise self.error

    def isatty(self) -> bool:
        return True


class FixedView(LiveView):
    """A LiveView over a fixed board and fixed events: no ledger."""

    def __init__(self, stream: io.StringIO, interactive: bool):
        super().__init__(ctx=None, run_id="r1", stream=stream, interactive=interactive)  # type: ignore[arg-type]

    def board(self, *, with_tasks: bool = True) -> Board:
        return board()

    def _new_event_lines(self) -> list[str]:
        return [event_line(1, "2026-01-01T00:00:00.000Z", "RunOpened.v1", {})]


def test_update_never_raises_once_the_output_is_gone_and_then_stops_writing():
    for interactive in (True, False):
        for error in (BrokenPipeError(32, "Broken pipe"), OSError(5, "Input/output error")):
            stream = Gone(error)
            view = FixedView(stream, interactive)
            assert view.update() == board() and view.broken
            writes = stream.writes
            view.update()
            view.draw_once(board())
            view.close()
            assert stream.writes == writes  # nothing more is tried


def test_update_on_a_pipe_writes_each_new_event_once():
    out = io.StringIO()
    view = FixedView(out, interactive=False)
    view.update()
    assert out.getvalue() == "1 2026-01-01T00:00:00.000Z RunOpened\n" and not view.broken
    view.draw_once(board())
    assert_escaped(out.getvalue())


def test_notes_and_what_needs_the_user_are_drawn_escaped_under_the_run_line():
    conflicted = TaskLine(task_id="t3", title="t", state="conflicted", generation=1, elapsed_ms=1000, last_line=None,
                          cycles=1, candidate="c" * 12, checks="1/1 passed", depends_on=(), step="conflicted",
                          note=f"in {HOSTILE}; t1 changed the same paths")
    hostile = board(tasks=(conflicted,), integration=f"stopped at step 1 (conflicted), 0/1 step(s) verified",
                    target_branch=f"main{HOSTILE}",
                    attention=(f"task t3 not delivered: conflicted in {HOSTILE}", f"main{HOSTILE} was not moved: x"))
    lines = board_lines(hostile)
    assert "integration stopped at step 1 (conflicted), 0/1 step(s) verified" in lines[0]
    assert lines[1].startswith("  action needed: task t3 not delivered: conflicted in \\x1b[2J")
    assert lines[2].startswith("  action needed: main\\x1b[2J")
    assert " conflicted " in lines[3] and " candidate cccccccccccc (in \\x1b[2J" in lines[3]
    assert lines[3].endswith("; t1 changed the same paths)")
    assert_escaped("\n".join(lines))
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=400, markup=False, emoji=False).print(board_table(hostile))
    table = out.getvalue()
    assert_escaped(table)
    assert "action needed: task t3 not delivered" in table and "t1 changed the same paths" in table


class CountedView(FixedView):
    """A FixedView that says which boards it was asked for, each build taking a second of a fake clock."""

    def __init__(self, stream: io.StringIO, interactive: bool, clock: list[float]):
        super().__init__(stream, interactive)
        self.asked: list[bool] = []
        self.clock = clock

    def board(self, *, with_tasks: bool = True) -> Board:
        self.asked.append(with_tasks)
        self.clock[0] += 1.0
        return board()


def test_a_piped_view_follows_the_run_line_alone_never_the_task_lines():
    view = CountedView(io.StringIO(), interactive=False, clock=[0.0])
    for _ in range(3):
        view.update()
    assert view.asked == [False, False, False]


def test_a_table_is_rebuilt_no_sooner_than_its_cost_allows_and_always_at_the_end(monkeypatch):
    from docket.cli.console import live

    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    view = CountedView(io.StringIO(), interactive=True, clock=clock)
    view._draw_live = lambda board: None  # type: ignore[method-assign]
    view.update()  # built in 1 s (the fake clock's)
    clock[0] += live.BOARD_COST_SHARE - 1.5
    assert view.update() == board() and view.asked == [True]  # too soon: the last board
    clock[0] += 1.0
    view.update()
    assert view.asked == [True, True]
    view.update(final=True)
    assert view.asked == [True, True, True]


def test_the_run_line_shows_what_its_agents_spent_against_the_runs_limits():
    assert ", spent" not in board_lines(board())[0]  # nothing reported, no limits: nothing said
    limited = board_lines(board(cost_micro_usd=420_000, tokens=1_500, max_cost_micro_usd=2_500_000))[0]
    assert "50m left, spent $0.42 of $2.50, 1500 tokens, integration" in limited
    nothing_yet = board_lines(board(max_tokens=10_000))[0]
    assert "spent 0 tokens of 10000, integration" in nothing_yet
