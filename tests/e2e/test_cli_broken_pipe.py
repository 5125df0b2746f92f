"""A broken pipe is the end of docket's output only when it is docket's stdout that broke: `docket log | head`
ends quietly (exit 0). A pipe of docket's own that breaks (a child's gate, a hook's input) is a failure like any
other, said on stderr with a non-zero exit: once it was taken for a closed stdout, and a `docket go` whose agent was
killed at its gate exited 0 having printed nothing and delivered nothing."""

from __future__ import annotations

import subprocess
import sys
import types

from docket.cli import app


def test_a_broken_pipe_of_dockets_own_is_an_error_not_a_quiet_success(monkeypatch, capsys):
    def handler(ctx):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(app, "parse_args", lambda argv: types.SimpleNamespace(handler=handler, show_version=False))
    monkeypatch.setattr("docket.cli.console.context.Context", lambda args: types.SimpleNamespace(close=lambda: None))
    code = app.main(["status"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("docket: error: os-error: ") and "Broken pipe" in err


def test_a_reader_that_closed_dockets_stdout_ends_it_quietly(tmp_path):
    script = ("import sys; from docket.cli import app\n"
              "def handler(ctx):\n"
              "    import time; time.sleep(0.5)\n"  # the reader below has closed its end by then
              "    for _ in range(10000): sys.stdout.write('line\\n')\n"
              "    sys.stdout.flush()\n"
              "app.parse_args = lambda argv: type('A', (), {'handler': staticmethod(handler), 'show_version': False})()\n"
              "import docket.cli.console.context as c; c.Context = lambda args: type('C', (), {'close': lambda self: None})()\n"
              "sys.exit(app.main(['log']))\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    process.stdout.close()  # like `head` that has read what it wanted
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert b"error" not in err and b"Traceback" not in err
