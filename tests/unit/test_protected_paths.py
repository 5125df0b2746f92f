"""A check's protected globs (domain/containment/protected.py): ** spans folders, * stays within one; the default covers the test
folders, test modules anywhere, every conftest.py and pytest.ini."""

from __future__ import annotations

import pytest

from docket.domain.config import CheckConfig, check_config_sha256
from docket.domain.containment.protected import DEFAULT_PROTECTED, is_protected, protected_changes


@pytest.mark.parametrize("path", ["tests/test_app.py", "tests/data/x.json", "test/a.py", "conftest.py",
                                  "pkg/sub/conftest.py", "pkg/test_mod.py", "test_top.py", "pkg/mod_test.py",
                                  "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"])
def test_the_default_protects_tests_and_what_selects_them(path):
    assert is_protected(path, DEFAULT_PROTECTED)


@pytest.mark.parametrize("path", ["app.py", "pkg/testing.py", "pkg/pytest.ini", "contest.py", "mytests/a.py",
                                  "pkg/pyproject.toml", "docs/tests.md"])
def test_the_default_leaves_code_alone(path):
    assert not is_protected(path, DEFAULT_PROTECTED)


def test_globs_match_by_parts():
    assert is_protected("a/b/c.py", ["a/**"]) and is_protected("a/b/c.py", ["**/c.py"])
    assert not is_protected("a/b/c.py", ["a/*.py"]) and is_protected("a/c.py", ["a/*.py"])
    assert is_protected("c.py", ["**/c.py"]) and not is_protected("a/b/c.py", [])
    assert protected_changes(["app.py", "tests/t.py", "conftest.py"], DEFAULT_PROTECTED) == ("conftest.py",
                                                                                           "tests/t.py")


def test_the_default_keeps_a_checks_digest_and_a_change_of_it_does_not():
    plain = CheckConfig.model_validate({"command": ["pytest"]})
    same = CheckConfig.model_validate({"command": ["pytest"], "protected": list(reversed(DEFAULT_PROTECTED))})
    off = CheckConfig.model_validate({"command": ["pytest"], "protected": []})
    assert plain.protected == list(DEFAULT_PROTECTED)
    assert check_config_sha256("t", plain) == check_config_sha256("t", same) != check_config_sha256("t", off)
    with pytest.raises(ValueError):
        CheckConfig.model_validate({"command": ["pytest"], "protected": ["../outside/**"]})
