"""A repository's identity file is read as a file or not at all: a folder or a FIFO planted at its name (by an
agent, or by a crash) reads as no identity, never as an error that escapes nor as a read that blocks."""

from __future__ import annotations

import os
from pathlib import Path

from docket.adapters.world.ledger.identity import ID_FILE, read_identity

IDENTITY = "repo-" + "a" * 32


def test_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ID_FILE).parent.mkdir(parents=True)
    (tmp_path / ID_FILE).write_text(IDENTITY + "\n")
    assert read_identity(tmp_path) == IDENTITY


def test_a_folder_at_its_name_is_no_identity(tmp_path: Path) -> None:
    (tmp_path / ID_FILE).mkdir(parents=True)
    assert read_identity(tmp_path) is None


def test_a_fifo_at_its_name_is_no_identity_and_does_not_block(tmp_path: Path) -> None:
    (tmp_path / ID_FILE).parent.mkdir(parents=True)
    os.mkfifo(tmp_path / ID_FILE)
    assert read_identity(tmp_path) is None


def test_a_symlink_at_its_name_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text(IDENTITY)
    (tmp_path / ID_FILE).parent.mkdir(parents=True)
    (tmp_path / ID_FILE).symlink_to(tmp_path / "elsewhere")
    assert read_identity(tmp_path) is None
