"""The wheel installs under one namespace; help and docs are part of the interface."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from docket.cli.app import build_parser
from docket.cli.events_doc import render

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_wheel_puts_nothing_generic_at_the_top_of_site_packages(tmp_path):
    source = tmp_path / "source"  # build from a copy: setuptools leaves build/ behind
    for name in ("domain", "projections", "adapters", "cli"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(source)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("docket-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"docket", next(t for t in tops if t.endswith(".dist-info"))}
    for package in ("domain", "projections", "adapters", "cli"):
        assert f"docket/{package}/__init__.py" in names
    assert "docket/__main__.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "docket = docket.cli.app:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def _leaf_parsers(parser, path=()):
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaf_parsers(sub, (*path, name))


def test_every_command_has_help_an_example_and_json():
    leaves = list(_leaf_parsers(build_parser()))
    assert len(leaves) >= 18
    for path, parser in leaves:
        assert parser.description, path
        assert "example:\n  " in (parser.epilog or "") and "docket " in parser.epilog, path
        assert any("--json" in a.option_strings for a in parser._actions), path
        for action in parser._actions:
            assert action.help, (path, action.dest)  # every option and argument explains itself


def test_docs_events_md_is_current():
    assert (ROOT / "docs" / "events.md").read_text() == render(), "run `make docs`"


def test_readme_quick_start_is_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in quick.splitlines() if line.strip().startswith("make ")]
    assert commands == ["make demo", "make test"]


def test_completion_script_knows_the_commands():
    from docket.cli.completion import script

    bash = script("bash")
    assert '"lease") words=' in bash and "grant" in bash and "complete -o default -F _docket docket" in bash
