"""docket's files are opened as what they claim to be (issue 5, item 10).

The ledger and views are created create-only at 0600 without following
symlinks; an existing file that is a symlink, not a regular file, or not a
ledger is refused before anything is written to it, and its mode is never
changed. Exposed ledgers get a one-line warning. Any number of concurrent
`docket init` on a fresh repository succeed.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import Docket

ERROR = "docket: error: {}: "
WARNING = "docket: warning: {}: "


def docket_lines(stderr: str) -> list[str]:
    """docket's own lines on stderr (other libraries' warnings aside)."""
    return [line for line in stderr.splitlines() if line.startswith("docket:")]


def refused(result, code: str, exit_code: int = 2) -> None:
    assert result.returncode == exit_code, result.stderr
    lines = docket_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith(ERROR.format(code)), result.stderr


def snapshot(path: Path) -> tuple[int, int, bytes]:
    st = path.stat()
    return stat.S_IMODE(st.st_mode), st.st_uid, path.read_bytes()


def test_a_text_file_given_as_ledger_is_refused_untouched(docket, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    notes.chmod(0o644)
    before = snapshot(notes)
    for command in (("init",), ("run", "pause", "r1"), ("log",), ("verify",), ("status",)):
        refused(docket(*command, "--ledger", str(notes), check=False), "not-a-ledger")
        assert snapshot(notes) == before, command
    assert not (tmp_path / "notes.views.sqlite").exists()


def test_an_sqlite_database_of_another_program_is_refused_untouched(docket, tmp_path):
    other = tmp_path / "app.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (name TEXT)")
    conn.commit()
    conn.close()
    other.chmod(0o664)
    before = snapshot(other)
    refused(docket("init", "--ledger", str(other), check=False), "not-a-ledger")
    assert snapshot(other) == before
    assert not Path(f"{other}-wal").exists()


def test_a_device_given_as_ledger_is_refused_untouched(docket, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making a character device needs root")
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private /dev/null
    device.chmod(0o666)
    refused(docket("init", "--ledger", str(device), check=False), "not-a-regular-file")
    assert stat.S_IMODE(device.stat().st_mode) == 0o666


def test_a_fifo_given_as_ledger_is_refused_without_blocking(docket, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o644)
    for command in (("init",), ("verify",)):
        refused(docket(*command, "--ledger", str(fifo), check=False), "not-a-regular-file")
    assert stat.S_IMODE(fifo.stat().st_mode) == 0o644


def test_a_symlinked_ledger_is_refused(docket, tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("precious\n")
    target.chmod(0o644)
    link = tmp_path / "ledger.sqlite"
    link.symlink_to(target)
    refused(docket("init", "--ledger", str(link), check=False), "symlink-refused")
    assert snapshot(target) == (0o644, os.geteuid(), b"precious\n")
    dangling = tmp_path / "dangling.sqlite"
    dangling.symlink_to(tmp_path / "nowhere.sqlite")
    refused(docket("init", "--ledger", str(dangling), check=False), "symlink-refused")
    assert not (tmp_path / "nowhere.sqlite").exists()


def test_a_symlinked_views_file_is_refused_and_its_target_untouched(docket, tmp_path):
    docket("init")
    views = docket.ledger.with_name("views.sqlite")
    views.unlink()
    target = tmp_path / "target.txt"
    target.write_text("precious\n")
    target.chmod(0o644)
    views.symlink_to(target)
    result = docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", check=False)
    assert snapshot(target) == (0o644, os.geteuid(), b"precious\n")
    assert "symlink-refused" in result.stderr, result.stderr
    docket("status", check=False)
    assert snapshot(target) == (0o644, os.geteuid(), b"precious\n")


def test_open_views_refuses_a_symlink(tmp_path):
    from docket.adapters.service_layer.kernel.projector import open_views
    from docket.domain.kernel.errors import BadInput

    target = tmp_path / "target.sqlite"
    target.write_bytes(b"")
    target.chmod(0o644)
    (tmp_path / "views.sqlite").symlink_to(target)
    with pytest.raises(BadInput) as refused_:
        open_views(tmp_path / "views.sqlite")
    assert refused_.value.code == "symlink-refused"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_docket_creates_its_files_at_0600_even_with_a_permissive_umask(docket):
    env = dict(docket.env)
    proc = subprocess.run(["sh", "-c", f"umask 000 && exec {sys.executable} -m docket init"],
                          cwd=docket.cwd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert docket_lines(proc.stderr) == []
    for path in (docket.ledger, docket.ledger.with_name("views.sqlite")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(docket.ledger.parent.stat().st_mode) == 0o700


def test_an_exposed_ledger_gets_a_warning_and_keeps_its_mode(docket):
    docket("init")
    docket.ledger.chmod(0o644)
    lines = docket_lines(docket("verify").stderr)
    assert len(lines) == 1 and lines[0].startswith(WARNING.format("ledger-exposed")), lines
    assert stat.S_IMODE(docket.ledger.stat().st_mode) == 0o644


def test_a_ledger_owned_by_someone_else_gets_a_warning(docket):
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    docket("init")
    os.chown(docket.ledger, 4242, -1)
    result = docket("log")
    assert WARNING.format("ledger-not-owned") in result.stderr, result.stderr


def test_a_ledger_folder_writable_by_others_gets_a_warning(docket, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    ledger = str(shared / "ledger.sqlite")
    result = docket("init", "--ledger", ledger)
    assert WARNING.format("ledger-folder-exposed") in result.stderr, result.stderr
    shared.chmod(0o1777)  # sticky, like /tmp: others cannot replace our file
    assert "warning" not in docket("verify", "--ledger", ledger).stderr


def test_concurrent_init_on_a_fresh_repository(docket, tmp_path):
    """Twelve `docket init` at once, several rounds: exactly one creates, none fails."""
    for round_ in range(6):
        ledger = tmp_path / f"round{round_}" / "ledger.sqlite"
        ledger.parent.mkdir()  # init makes no missing folder (bad-ledger-path)
        procs = [subprocess.Popen([sys.executable, "-m", "docket", "init", "--json", "--ledger", str(ledger)],
                                  cwd=docket.cwd, env=docket.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(12)]
        results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        failures = [(code, err) for code, _, err in results if code != 0]
        assert not failures, f"round {round_}: {failures[:3]}"
        created = [out for _, out, _ in results if '"created": true' in out]
        assert len(created) == 1, f"round {round_}: {len(created)} created"
        assert Docket(docket.cwd, docket.env)("verify", "--ledger", str(ledger)).returncode == 0
