"""docket watch: a run's live view from another terminal, read from the ledger and its views alone."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ...domain.kernel.errors import NotFound
from ..console.context import Context
from ..console.parsing import command
from ...domain.kernel.codes import Code

__all__ = ["register"]

INTERVAL_S = 0.5


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "watch", watch, common,
                "show a run's tasks as they go (state, generation, elapsed, checks, last output line), redrawn in "
                "place on a terminal, one line per new event when piped, until the run closes",
                "docket watch r1\n  docket watch --once --json")
    p.add_argument("run", nargs="?", metavar="RUN", help="the run (default: the most recently opened open run)")
    p.add_argument("--once", action="store_true", help="draw the run once and exit (implied by --json)")


def watch(ctx: Context) -> int:
    from ..console.live import LiveView, latest_open_run
    from ..console.output import emit

    ctx.require_ledger_file()
    run_id = latest_open_run(ctx) if ctx.args.run is None else ctx.args.run
    if run_id is None:
        raise NotFound(Code.NO_RUN, "no open run to watch; name one (docket status lists them)")
    view = LiveView(ctx, run_id)
    board = view.board()
    if board is None:
        raise NotFound(Code.RUN_NOT_FOUND, f"no run {run_id}")
    if ctx.json:
        emit(True, {"position": view.views_position, **board.document()}, None)
        return 0
    if ctx.args.once:
        view.draw_once(board)
        return 0
    try:
        while not view.broken:
            board = view.update()
            if board is None or board.closed:
                break
            time.sleep(INTERVAL_S)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how one stops watching
    finally:
        view.close()
    return 0
