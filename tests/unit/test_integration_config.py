"""[integration] in docket.toml: approval, strict like every table, and read light for `docket status`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from docket.adapters.world.files.config_file import approval_required, load_config
from docket.domain.config import DEFAULT_TOML, Config
from docket.domain.kernel.errors import BadInput


def written(folder: Path, text: str) -> Path:
    path = folder / "docket.toml"
    path.write_text(text)
    return path


def test_approval_is_off_by_default_and_in_the_commented_default_file(tmp_path):
    assert Config().integration.approval is False
    assert "\n# [integration]\n" in DEFAULT_TOML and "\n# approval = false\n" in DEFAULT_TOML
    assert load_config(written(tmp_path, "[integration]\napproval = true\n")).integration.approval is True


@pytest.mark.parametrize(("text", "expected"), [
    ('[integration]\napproval = "yes"\n', "line 2: integration.approval: Input should be a valid boolean"),
    ("[integration]\napproval = 1\n", "line 2: integration.approval: Input should be a valid boolean"),
    ("[integration]\napprove = true\n", "line 2: integration.approve: unknown key"),
    ("integration = 1\n", "line 1: integration:"),
])
def test_the_integration_table_is_strict(tmp_path, text, expected):
    with pytest.raises(BadInput) as caught:
        load_config(written(tmp_path, text))
    assert caught.value.code == "bad-config" and expected in caught.value.message, caught.value.message


@pytest.mark.parametrize(("text", "required"), [
    ("[integration]\napproval = true\n", True),
    ("[integration]\napproval = false\n", False),
    ('[integration]\napproval = "true"\n', False),  # not a boolean: only `true` requires approval
    ("[run]\n", False),
    ("integration = 1\n", False),
    ("[integration\n", False),  # unparsable: the commands that act on the configuration say so
])
def test_status_reads_approval_with_the_standard_library(tmp_path, text, required):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    written(tmp_path, text)
    assert approval_required(tmp_path) is required


def test_no_repository_or_no_file_requires_no_approval(tmp_path):
    assert approval_required(tmp_path) is False
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert approval_required(tmp_path) is False
    (tmp_path / "docket.toml").symlink_to(written(tmp_path / ".git", "[integration]\napproval = true\n"))
    assert approval_required(tmp_path) is False  # a symlink is never followed


def test_a_checked_out_target_is_updated_by_default_refused_when_configured_and_nothing_else(tmp_path):
    assert Config().integration.checked_out_target == "update"
    assert '\n# checked_out_target = "update"\n' in DEFAULT_TOML
    text = '[integration]\nchecked_out_target = "refuse"\n'
    assert load_config(written(tmp_path, text)).integration.checked_out_target == "refuse"
    with pytest.raises(BadInput) as caught:
        load_config(written(tmp_path, '[integration]\nchecked_out_target = "force"\n'))
    assert caught.value.code == "bad-config" and "integration.checked_out_target" in caught.value.message


def test_batch_is_four_while_the_queue_speculates_else_one_and_in_the_commented_default_file(tmp_path):
    assert Config().integration.batch is None and Config().integration.speculate is None
    assert Config().integration.batch_for(2) == 4 and Config().integration.batch_for(1) == 1
    assert "\n# batch = 4\n" in DEFAULT_TOML and "\n# speculate = 4\n" in DEFAULT_TOML
    configured = load_config(written(tmp_path, "[integration]\nbatch = 8\nspeculate = 3\n")).integration
    assert (configured.batch_for(3), configured.batch_for(1), configured.speculate) == (8, 8, 3)


@pytest.mark.parametrize(("text", "expected"), [
    ("[integration]\nspeculate = 0\n", "line 2: integration.speculate: Input should be greater than or equal to 1"),
    ("[integration]\nspeculate = 257\n", "line 2: integration.speculate: Input should be less than or equal to 256"),
])
def test_a_speculation_out_of_range_is_bad_config(tmp_path, text, expected):
    with pytest.raises(BadInput) as caught:
        load_config(written(tmp_path, text))
    assert caught.value.code == "bad-config" and expected in caught.value.message, caught.value.message


@pytest.mark.parametrize(("text", "expected"), [
    ("[integration]\nbatch = 0\n", "line 2: integration.batch: Input should be greater than or equal to 1"),
    ("[integration]\nbatch = 1001\n", "line 2: integration.batch: Input should be less than or equal to 1000"),
    ('[integration]\nbatch = "8"\n', "line 2: integration.batch: Input should be a valid integer"),
    ("[integration]\nbatch = 2.5\n", "line 2: integration.batch: Input should be a valid integer"),
])
def test_a_batch_size_out_of_range_is_bad_config(tmp_path, text, expected):
    with pytest.raises(BadInput) as caught:
        load_config(written(tmp_path, text))
    assert caught.value.code == "bad-config" and expected in caught.value.message, caught.value.message
