"""A file named on the command line that is a FIFO, a device or a never-ending stream: refused at once with one
error line, never waited on, never read into memory without bound; a file given twice a key is refused too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Docket

ERROR_LINE = re.compile(r"docket: error: ([a-z-]+): .+")


def _run(docket: Docket, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with a short timeout: a hang is the failure this file is about."""
    return subprocess.run([sys.executable, "-m", "docket", *args], cwd=docket.cwd, env=docket.env,
                          capture_output=True, text=True, timeout=30)


def _code(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and (m := ERROR_LINE.fullmatch(lines[0])), done.stderr
    return m.group(1)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_verify_anchor_that_is_not_a_regular_file_is_refused_at_once(docket: Docket, fifo: Path, special: str):
    docket("init")
    anchor = str(fifo) if special == "fifo" else special
    done = _run(docket, "verify", "--anchor", anchor)
    assert done.returncode == 2 and _code(done) == "bad-anchor" and "regular file" in done.stderr
    honest = json.loads(docket("verify", "--json").stdout)
    (docket.cwd.parent / "anchor.json").write_text(json.dumps(honest))
    assert _run(docket, "verify", "--anchor", str(docket.cwd.parent / "anchor.json")).returncode == 0


def test_an_anchor_giving_a_key_twice_is_refused(docket: Docket, tmp_path: Path):
    docket("init")
    head = json.loads(docket("verify", "--json").stdout)["head"]
    anchor = tmp_path / "anchor.json"
    anchor.write_text('{"position": 999, "position": %d, "digest": "%s"}' % (head["position"], head["digest"]))
    done = _run(docket, "verify", "--anchor", str(anchor))
    assert done.returncode == 2 and _code(done) == "bad-anchor" and "twice" in done.stderr


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_tasks_file_or_prompt_file_that_is_not_a_regular_file_is_refused_at_once(docket: Docket, fifo: Path,
                                                                                  special: str):
    docket("init")
    name = str(fifo) if special == "fifo" else special
    done = _run(docket, "go", "--goal", "g", "--tasks", name)
    assert done.returncode == 2 and _code(done) == "bad-tasks-file" and "regular file" in done.stderr
    docket("run", "open", "--goal", "g", "--id", "r1", "--target", "main")
    done = _run(docket, "task", "plan", "r1", "--title", "t", "--prompt-file", name)
    assert done.returncode == 2 and _code(done) == "bad-prompt-file" and "regular file" in done.stderr


def test_a_receipt_bundle_that_is_a_fifo_is_refused_at_once(docket: Docket, fifo: Path, tmp_path: Path):
    from docket.adapters.world.ledger.signing import generate_key

    _, public = generate_key(tmp_path / "docket")
    done = _run(docket, "verify-receipt", str(fifo), "--key", str(public))
    assert done.returncode == 2 and _code(done) == "not-a-regular-file"
