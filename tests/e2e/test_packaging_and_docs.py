"""The wheel installs under one namespace; help and docs are part of the interface."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from docket.cli.app import build_parser
from docket.cli.audit.events_doc import render

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
    assert [n for n in names if "fake" in n.rsplit("/", 1)[-1].lower()] == []  # the ports' fakes are test code
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


def test_readme_says_what_its_example_ids_are_and_points_only_inside_the_clone():
    import re

    readme = (ROOT / "README.md").read_text()
    assert "`run-7k2m9x4q` stands for the run id your `docket go` printed" in " ".join(readme.split())
    steps = (ROOT / "docs" / "steps.md").read_text()  # where the step-by-step examples went
    assert "`run-7k2m9x4q` stands for the run id that `docket run open` printed" in " ".join(steps.split())
    named = re.findall(r"`([\w./-]+\.(?:md|py|toml))`", readme)
    assert named and all(not n.startswith("..") and (ROOT / n).exists() for n in named), named


def _group_parsers(parser, path=()):
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _group_parsers(sub, (*path, name))


def test_every_command_group_has_help_and_an_example():
    groups = dict(_group_parsers(build_parser()))
    assert set(groups) == {(), ("run",), ("task",), ("worker",), ("candidate",), ("check",), ("handoff",), ("worktree",), ("lease",),
                           ("ledger",), ("config",), ("key",), ("request",)}
    for path, parser in groups.items():
        assert parser.description, path
        assert "example:\n  docket " + " ".join(path) in (parser.epilog or ""), path
    shown = subprocess.run([sys.executable, "-m", "docket", "run", "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "example:\n  docket run open " in shown.stdout


def _completion_script(shell: str) -> str:
    result = subprocess.run([sys.executable, "-m", "docket", "completion", shell], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _complete_in_bash(script: str, tmp_path: Path, *words: str) -> list[str]:
    """What bash offers for the last word, with COMP_WORDS and COMP_CWORD set as bash sets them."""
    import re

    (function,) = re.findall(r"^complete .*-F (\S+) docket$", script, re.MULTILINE)
    path = tmp_path / "docket.bash"
    path.write_text(script)
    driver = (f'source "{path}"; COMP_WORDS=(docket "$@"); COMP_CWORD=$#; COMP_LINE="docket $*"; '
              f'COMP_POINT=${{#COMP_LINE}}; {function} docket "${{COMP_WORDS[COMP_CWORD]}}" '
              '"${COMP_WORDS[COMP_CWORD-1]}"; printf "%s\\n" "${COMPREPLY[@]}"')
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", driver, "bash", *words],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return sorted(filter(None, result.stdout.splitlines()))


COMPLETIONS = [
    (("le",), ["lease", "ledger"]),
    (("ledger", ""), ["copy"]),
    (("lease", ""), ["expire", "grant", "release", "renew"]),
    (("lease", "grant", "--ttl", "10m", "--wo"), ["--worker"]),  # after an option that took a value
    (("lease", "grant", "wt/a", "--worker", "w1", "--ge"), ["--generation"]),
    (("--json", "run", "o"), ["open"]),
    (("log", "--run", "r1", "--ty"), ["--type"]),
    (("completion", ""), ["bash", "zsh"]),
]


@pytest.mark.parametrize("words, offered", COMPLETIONS, ids=[" ".join(words) + "<TAB>" for words, _ in COMPLETIONS])
def test_bash_completion_goes_on_after_options_that_take_values(tmp_path, words, offered):
    assert _complete_in_bash(_completion_script("bash"), tmp_path, *words) == offered


def test_zsh_completion_is_a_compdef_script_of_the_same_parser():
    zsh = _completion_script("zsh")
    assert zsh.startswith("#compdef docket") and "compdef " in zsh
    assert "--generation" in zsh and "--worker" in zsh and "grant" in zsh


def test_make_runs_the_suite_and_the_demo_as_a_laptop_would_with_bytecode_written(tmp_path):
    """make test, make demo and .ci/run unset PYTHONDONTWRITEBYTECODE (this machine sets it; a laptop does not)."""
    (tmp_path / "probe.mk").write_text(f"include {ROOT / 'Makefile'}\nprobe:\n\t@echo \"[$$PYTHONDONTWRITEBYTECODE]\"\n")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    shown = subprocess.run(["make", "-s", "-f", str(tmp_path / "probe.mk"), "probe"], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("unset PYTHONDONTWRITEBYTECODE") < ci.index("\nmake test")
