"""Sizes in docket.toml (parse_size) and [candidates] max_file_size: strict like every table."""

from __future__ import annotations

from pathlib import Path

import pytest

from docket.adapters.world.files.config_file import load_config
from docket.domain.kernel.codes import Code
from docket.domain.config import DEFAULT_MAX_FILE_SIZE, DEFAULT_TOML, Config
from docket.domain.kernel.errors import BadInput
from docket.domain.kernel.values import MAX_SAFE_INT, format_size, parse_size


@pytest.mark.parametrize(("value", "size"), [
    (1, 1), (300, 300), ("300", 300), ("300B", 300), ("1KB", 1000), ("1KiB", 1024), ("100MB", 100_000_000),
    ("100MiB", 100 * 2**20), ("1GiB", 2**30), ("2gb", 2 * 10**9), (" 1 TiB ", 2**40), (MAX_SAFE_INT, MAX_SAFE_INT),
])
def test_a_size_is_bytes_or_a_number_with_a_unit(value, size):
    assert parse_size(value) == size


@pytest.mark.parametrize("value", [0, -1, "0MB", "", "MB", "1.5GB", "1 GiBs", "1e6", "10 M", True, 1.5, None,
                                   MAX_SAFE_INT + 1, "9999999999999999TB"])
def test_anything_else_is_a_bad_size(value):
    with pytest.raises(BadInput) as caught:
        parse_size(value)
    assert caught.value.code == Code.BAD_SIZE


@pytest.mark.parametrize(("size", "text"), [(300, "300 B"), (1024, "1 KiB"), (1536, "1.5 KiB"),
                                            (100 * 2**20, "100 MiB"), (2**30, "1 GiB"), (2**30 + 1, "1 GiB")])
def test_a_size_reads_as_a_person_says_it(size, text):
    assert format_size(size) == text


def _written(folder: Path, text: str) -> Path:
    path = folder / "docket.toml"
    path.write_text(text)
    return path


def test_max_file_size_defaults_to_100_mib_and_is_in_the_commented_default_file(tmp_path):
    assert Config().candidates.max_file_size == DEFAULT_MAX_FILE_SIZE == 100 * 2**20
    assert "\n# [candidates]\n" in DEFAULT_TOML and '\n# max_file_size = "100MiB"\n' in DEFAULT_TOML
    assert load_config(_written(tmp_path, '[candidates]\nmax_file_size = "1GiB"\n')).candidates.max_file_size == 2**30
    assert load_config(_written(tmp_path, "[candidates]\nmax_file_size = 4096\n")).candidates.max_file_size == 4096


@pytest.mark.parametrize(("text", "expected"), [
    ('[candidates]\nmax_file_size = "huge"\n', "line 2: candidates.max_file_size:"),
    ("[candidates]\nmax_file_size = 0\n", "line 2: candidates.max_file_size:"),
    ("[candidates]\nmax_file_size = true\n", "line 2: candidates.max_file_size:"),
    ("[candidates]\nmax_size = 1\n", "line 2: candidates.max_size: unknown key"),
])
def test_the_candidates_table_is_strict(tmp_path, text, expected):
    with pytest.raises(BadInput) as caught:
        load_config(_written(tmp_path, text))
    assert caught.value.code == Code.BAD_CONFIG and expected in caught.value.message, caught.value.message


def test_max_log_defaults_to_100_mb_and_takes_a_size(tmp_path):
    from docket.domain.kernel.values import DEFAULT_MAX_LOG

    agent = '[agents.a]\ncommand = ["a", "{prompt}"]\n'
    assert load_config(_written(tmp_path, agent)).agents["a"].max_log == DEFAULT_MAX_LOG == 100_000_000
    assert load_config(_written(tmp_path, agent + 'max_log = "1MB"\n')).agents["a"].max_log == 1_000_000
    with pytest.raises(BadInput) as caught:
        load_config(_written(tmp_path, agent + 'max_log = "lots"\n'))
    assert caught.value.code == Code.BAD_CONFIG and "agents.a.max_log" in caught.value.message
