"""The live view of a run (`docket go`, `docket watch`): a table updated in place on a terminal, event lines when piped.

Everything shown comes from the ledger and its views, and every string in it is
escaped (output.shown) before it is drawn, so nothing a worker prints, nor any
name in the ledger, can drive the terminal. rich is imported here and only here.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from ...domain.plan import short_id
from ...domain.kernel.values import format_cost, format_duration
from .output import shown, warn

if TYPE_CHECKING:
    from ...projections.board import Board
    from .context import Context

__all__ = ["LiveView", "board_lines", "board_table", "event_line", "latest_open_run"]

# What an event line says of its payload, in this order (ids and hashes shortened).
EVENT_FIELDS = ("task_id", "worker_id", "generation", "resource", "check", "step", "first_step", "last_step",
                "rejected_step", "result", "cause", "code", "exit_code", "reason", "binding_id", "commit")
SHORT = 12
# A table redrawn in place costs what the board costs, which grows with the run: it is rebuilt no sooner than this
# many times its last build took after that build started, so a run of a thousand tasks is not slowed by its view.
BOARD_COST_SHARE = 10
FREE_TEXT = frozenset({"note", "last output"})  # the columns a narrow terminal narrows first
OUTCOME_STYLES = {"delivered": "bold green", "partly-delivered": "bold yellow", "nothing-delivered": "bold red",
                  "stopped": "red", "waiting-for-you": "bold magenta", "running": ""}
STATE_STYLES = {"delivered": "bold green", "passed": "green", "failed": "red", "stopped": "red",
                "conflicted": "bold red", "unmergeable": "bold red", "rejected": "bold red", "merge failed": "bold red",
                "merged (target not moved)": "bold yellow", "running": "yellow", "checking": "cyan",
                "launching": "yellow", "exited": "magenta", "awaiting-input": "bold magenta"}


class LiveView:
    """A run's view, redrawn by update(): on a terminal a rich table in place, otherwise a plain line per new
    event of the run. update() catches the views up and is cheap; it never raises because the output went away
    (a closed pipe or terminal): ``broken`` then says so, and nothing more is written."""

    def __init__(self, ctx: Context, run_id: str, *, stream: TextIO | None = None, interactive: bool | None = None):
        self.ctx = ctx
        self.run_id = run_id
        self.stream = stream or sys.stdout
        self.interactive = _isatty(self.stream) if interactive is None else interactive
        self.broken = False
        self.views_position = 0  # the ledger position the last board reflects
        self._events_after = 0  # event lines: the last position printed
        self._live: Any = None
        self._warned: set[str] = set()
        self._drawn: tuple[float, Board | None] | None = None  # (when the table's board was built, that board)
        self._build_s = 0.0  # how long building that board took

    def board(self, *, with_tasks: bool = True) -> Board | None:
        """The run's board at the ledger's head (None: no such run); without with_tasks, its run line alone."""
        from ...adapters.world.files.logs import last_output_line
        from ...projections.board import run_board

        views = self._views()
        try:
            self.views_position = views.position()
            return run_board(views.conn, self.run_id, self.ctx.clock.now(), tail=last_output_line,
                             approval_required=lambda: self.ctx.approval_required, with_tasks=with_tasks)
        finally:
            views.conn.close()

    def update(self, *, final: bool = False) -> Board | None:
        """Catch up: on a pipe, a line per new event (the board's run line says whether the run closed); on a
        terminal, the table redrawn (rebuilt at most once per BOARD_COST_SHARE times its last build's cost, unless
        final: the last drawing)."""
        if not self.interactive:
            board = self.board(with_tasks=False)
            if board is not None:
                self._guarded(self._print_new_events)
            return board
        started = time.monotonic()
        if self._drawn is not None and not final:
            built_at, last = self._drawn
            if last is not None and started < built_at + BOARD_COST_SHARE * self._build_s:
                return last
        board = self.board()
        self._build_s = time.monotonic() - started
        self._drawn = (started, board)
        if board is not None:
            self._guarded(lambda: self._draw_live(board))
        return board

    def draw_once(self, board: Board) -> None:
        """The board once: a table on a terminal, plain lines otherwise."""
        if self.interactive:
            self._guarded(lambda: self._console().print(board_table(board)))
        else:
            self._guarded(lambda: self._write("".join(line + "\n" for line in board_lines(board))))

    def close(self) -> None:
        """Stop drawing in place, leaving the last table on the screen."""
        live, self._live = self._live, None
        if live is not None:
            self._guarded(live.stop)

    # Drawing ---------------------------------------------------------------
    def _draw_live(self, board: Board) -> None:
        if self._live is not None:
            self._live.update(board_table(board), refresh=True)
            return
        from rich.live import Live

        self._live = Live(board_table(board), console=self._console(), auto_refresh=False, transient=False,
                          redirect_stdout=False, redirect_stderr=False)
        self._live.start()  # draws it

    def _print_new_events(self) -> None:
        self._write("".join(line + "\n" for line in self._new_event_lines()))

    def _new_event_lines(self) -> list[str]:
        """A line for each event of the run recorded since the last call (from the first one of the run on)."""
        from ...adapters.service_layer.kernel.event_log import listed_events

        reader = self.ctx.ledger_reader
        head = reader.head_position()
        if head <= self._events_after:
            return []
        lines = [event_line(row[0], body["recorded_at"], row[3], body["payload"])
                 for row, body in listed_events(reader, self.ctx.paths.views, run_id=self.run_id, topics=(),
                                                after=self._events_after, until=head,
                                                lock_timeout=lambda: self.ctx.lock_timeout)]
        self._events_after = head
        return lines

    def _write(self, text: str) -> None:
        if text:
            self.stream.write(text)
            self.stream.flush()

    def _console(self) -> Any:
        from rich.console import Console

        class QuietConsole(Console):
            def on_broken_pipe(self) -> None:  # rich's own exits the process; the caller's loop decides instead
                self.quiet = True
                raise BrokenPipeError

        return QuietConsole(file=self.stream, markup=False, emoji=False, highlight=False)

    def _guarded(self, draw: Any) -> None:
        """Draw; if the output is gone (EPIPE, EIO, a closed file), stop writing to it for good."""
        if self.broken:
            return
        try:
            draw()
        except (OSError, ValueError):
            self.broken = True
            self._live = None
            _silence(self.stream)

    def _views(self) -> Any:
        from ...adapters.service_layer.kernel.view_freshness import fresh_views

        return fresh_views(self.ctx.ledger_reader, self.ctx.paths.views, timeout=self.ctx.lock_timeout,
                           warn=self._warn_once)

    def _warn_once(self, code: str, message: str) -> None:
        """A view refreshed twice a second says what went wrong with the views once, not twice a second."""
        if code not in self._warned:
            self._warned.add(code)
            warn(code, message)


def latest_open_run(ctx: Context) -> str | None:
    """The most recently opened run that is still open, as the views know it."""
    from ...projections import runs
    from ...projections.board import CLOSED

    views = ctx.views()
    open_runs = [r for r in runs.list_runs(views.conn) if r["status"] not in CLOSED]
    return open_runs[-1]["run_id"] if open_runs else None


# Rendering ---------------------------------------------------------------------
def _duration(ms: int | None) -> str:
    return "-" if ms is None else format_duration(ms - ms % 1000)


def run_summary(board: Board) -> str:
    budget = f"budget {_duration(board.used_ms)} used"
    if board.budget_ms:
        budget += f" of {format_duration(board.budget_ms)}, {_duration(board.remaining_ms)} left"
    budget += _spend(board)
    receipt = f"receipt {board.receipt_sha256[:SHORT]} sealed" if board.receipt_sha256 else "receipt not sealed"
    target = f" ({shown(board.target_branch)} at {board.target_commit[:SHORT]})" if board.target_commit else ""
    return (f"run {shown(board.run_id)}: {_outcome(board)}, {budget}, integration {shown(board.integration)}"
            f"{target}, {receipt}: {shown(board.goal)}")


def _outcome(board: Board) -> str:
    """What the run came to, as every surface words it (domain/reports/outcome.py); its status when the board has no
    outcome (the run's line alone), and [needs you] when something of it waits for a person."""
    if board.outcome is None:
        return board.status
    return board.outcome.line + (" [needs you]" if board.outcome.needs_you else "")


def _spend(board: Board) -> str:
    """', spent $0.42 of $2.50, 1500 tokens': what its agents reported, when they did or the run limits it."""
    parts = []
    if board.cost_micro_usd is not None or board.max_cost_micro_usd:
        parts.append(format_cost(board.cost_micro_usd or 0)
                     + (f" of {format_cost(board.max_cost_micro_usd)}" if board.max_cost_micro_usd else ""))
    if board.tokens is not None or board.max_tokens:
        parts.append(f"{board.tokens or 0} tokens" + (f" of {board.max_tokens}" if board.max_tokens else ""))
    return f", spent {', '.join(parts)}" if parts else ""


def attention_lines(board: Board) -> list[str]:
    """What the user must act on, escaped: one line each."""
    return [f"action needed: {shown(item)}" for item in board.attention]


def _cells(board: Board) -> list[list[str]]:
    """Each task's cells, escaped: task (its own id, without the run's: what tells the run's tasks apart), state,
    generation, elapsed, checks, candidate, note, last output line."""
    return [[shown(short_id(board.run_id, t.task_id)), t.state + (" [unsandboxed]" if t.unsandboxed else ""), "-" if t.generation is None else str(t.generation), _duration(t.elapsed_ms),
             shown(t.checks or "-"), t.candidate or "-", shown(t.note or ""), shown(t.last_line or "")]
            for t in board.tasks]


def board_lines(board: Board) -> list[str]:
    """The board as plain text: the run, what needs the user, then one line per task."""
    lines = [run_summary(board), *(f"  {line}" for line in attention_lines(board))]
    for task_id, state, generation, elapsed, checks, candidate, note, last in _cells(board):
        line = f"  {task_id:<16} {state:<10} gen {generation:<3} {elapsed:>8}  checks {checks}  candidate {candidate}"
        lines.append(line + (f" ({note})" if note else "") + (f": {last}" if last else ""))
    return lines


def board_table(board: Board) -> Any:
    """The board as a rich table, one row per task (a note column when a task has one), what needs the user below
    it; every cell is plain Text (never parsed as markup)."""
    from rich.table import Table
    from rich.text import Text

    caption = Text("\n".join(attention_lines(board)), style="bold") if board.attention else None
    title_style = OUTCOME_STYLES.get(board.outcome.state, "") if board.outcome is not None else ""
    table = Table(title=Text(run_summary(board), style=title_style), title_justify="left", caption=caption,
                  caption_justify="left", expand=False)
    noted = any(t.note for t in board.tasks)
    names = ("task", "state", "gen", "elapsed", "checks", "candidate", "note", "last output")
    cells = _cells(board)
    for name in names:  # on a narrow terminal the free text (note, last output) gives way first, cut short
        if name != "note" or noted:
            table.add_column(Text(name), no_wrap=name not in FREE_TEXT, overflow="ellipsis")
    for row in cells:
        table.add_row(*(Text(cell, style=STATE_STYLES.get(cell, "") if i == 1 else "",
                             no_wrap=True, overflow="ellipsis")  # a free text column is cut, never wrapped
                        for i, cell in enumerate(row) if names[i] != "note" or noted))
    return table


def event_line(position: int, recorded_at: str, type_: str, payload: dict[str, Any]) -> str:
    """``<position> <time> <type> <short summary>``, escaped."""
    parts = []
    for name in EVENT_FIELDS:
        value = payload.get(name)
        if value is None or isinstance(value, (dict, list)):
            continue
        if name in ("binding_id", "commit") and isinstance(value, str):
            value = value[:SHORT]
        parts.append(f"{name}={shown(value)}")
    return f"{position} {shown(recorded_at)} {shown(type_.split('.v')[0])} {' '.join(parts)}".rstrip()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


def _silence(stream: TextIO) -> None:
    """Point a gone output at /dev/null, so the interpreter's last flush at exit does not fail on it either."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    except OSError:
        pass
    finally:
        os.close(null)
