"""What a run trusts of its repository (domain/containment/trust.py) and the rule that a candidate changing it is queued only
once a person approves it, whatever its checks said (domain/merge_queue/integration.py: require_trusted_unchanged)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from docket.domain import events as ev
from docket.domain.merge_queue import integration
from docket.domain import run
from docket.domain.kernel.errors import Refused
from docket.domain.containment.trust import named_paths, trusted_changes

from .builders import T0, Book
from .test_integration_aggregate import CANDIDATE, HEAD, RUN, fold

TRUSTED = ("docket.toml", ".gitattributes", ".gitmodules", "scripts/check.sh", "Makefile")


@pytest.mark.parametrize("argv, expected", [
    (["./scripts/check.sh", "--fast"], {"scripts/check.sh"}),
    (["bash", "scripts/ci.sh"], {"scripts/ci.sh"}),
    (["python3", "run_checks.py", "-q"], {"run_checks.py"}),
    (["sh", "-c", "./lint.sh && python -m pytest -q tests/ ; echo done"], {"lint.sh"}),
    (["sh", "-c", "make check"], {"GNUmakefile", "makefile", "Makefile"}),
    (["python", "-m", "pytest", "-q"], set()),
    (["/usr/bin/env", "pytest", "--rootdir=.", "../elsewhere/x.sh", "/abs/x.sh"], set()),  # nothing of the repository
    (["sh", "-c", "echo 'unclosed ./a.sh"], {"a.sh"}),
    (["sh", "-c", "cd scripts && ./check.sh"], {"check.sh", "scripts/check.sh"}),  # where the shell reads it from
    (["bash", "-c", "cd tools/ci; cd ..; python3 run.py"], {"run.py", "tools/run.py"}),
    (["sh", "-c", "cd /elsewhere && ./x.sh"], {"x.sh"}),  # a folder outside: only the word as written
    (["make", "-C", "sub", "check"], {"GNUmakefile", "makefile", "Makefile", "sub/GNUmakefile", "sub/makefile",
                                      "sub/Makefile"}),
])
def test_the_files_a_command_names(argv, expected):
    assert named_paths([argv]) == expected


def test_a_change_under_or_at_a_trusted_path_is_found():
    changed = ["src/app.py", "docket.toml", "scripts/check.sh", "scripts/other.sh", "tests/test_app.py"]
    assert trusted_changes(changed, TRUSTED) == ("docket.toml", "scripts/check.sh")
    assert trusted_changes(["vendor/lib/a.py"], ["vendor/lib"]) == ("vendor/lib/a.py",)
    assert trusted_changes(["src/app.py"], TRUSTED) == ()
    # a .gitattributes anywhere (working-tree-encoding, filters for the files below it)
    assert trusted_changes(["src/.gitattributes", "src/a.py"], TRUSTED) == ("src/.gitattributes",)


def configured(trusted=TRUSTED):
    book = Book()
    r = book.active_run()
    events = run.record_configuration(r, config_sha256="ab" * 32, trusted_paths=trusted, now=T0)
    r = book.apply(run.apply, r, events)
    assert r.configured and r.trusted_paths == tuple(sorted(trusted)) and r.config_sha256 == "ab" * 32
    assert run.record_configuration(r, config_sha256="cd" * 32, trusted_paths=(), now=T0) == []  # once: a resume
    return replace(RUN, trusted_paths=r.trusted_paths)                                        # keeps what it trusted


def test_a_candidate_changing_a_trusted_path_is_queued_only_once_a_person_approves_it():
    trusting = configured()
    state = fold(integration.open_queue(None, trusting, repository="/repo/.git", target_branch="release",
                                        expected_commit=HEAD, integration_ref="refs/docket/integrations/r1",
                                        required_checks=[], now=T0))
    step = ev.IntegrationStep(task_id="t1", binding_id="1" * 64, commit=CANDIDATE, worker_id="t1", generation=1)
    with pytest.raises(Refused) as refused:
        integration.queue_step(state, trusting, step, waiting_for=[], overlaps=[], now=T0,
                               changed=["src/a.py", "docket.toml"])
    assert refused.value.code == "config-change" and "docket approve r1 --task t1" in refused.value.message
    # the queue goes on meanwhile, and an approval is recorded while it does
    state = fold(integration.record_approval(state, trusting, by="alice", candidates=[("t1", "1" * 64, CANDIDATE)],
                                             now=T0), state)
    assert len(integration.queue_step(state, trusting, step, waiting_for=[], overlaps=[], now=T0,
                                      changed=["src/a.py", "docket.toml"])) == 1
    # a candidate that changes nothing trusted needs no one
    other = ev.IntegrationStep(task_id="t2", binding_id="2" * 64, commit=CANDIDATE, worker_id="t2", generation=1)
    assert len(integration.queue_step(state, trusting, other, waiting_for=[], overlaps=[], now=T0,
                                      changed=["src/b.py"])) == 1


def test_a_fixed_queue_is_refused_a_trusted_change_unapproved_even_without_approval_required():
    trusting = configured()
    step = ev.IntegrationStep(task_id="t1", binding_id="1" * 64, commit=CANDIDATE, worker_id="t1", generation=1)
    with pytest.raises(Refused) as refused:
        integration.prepare(None, trusting, repository="/repo/.git", target_branch="release", expected_commit=HEAD,
                            integration_ref="refs/docket/integrations/r1", steps=[step], required_checks=[],
                            overlaps=[], approval_required=False, now=T0, changed={"1" * 64: ["scripts/check.sh"]})
    assert refused.value.code == "config-change"
    approved = fold(integration.record_approval(None, trusting, by="alice", candidates=[("t1", "1" * 64, CANDIDATE)],
                                                now=T0))
    assert integration.prepare(approved, trusting, repository="/repo/.git", target_branch="release",
                               expected_commit=HEAD, integration_ref="refs/docket/integrations/r1", steps=[step],
                               required_checks=[], overlaps=[], approval_required=False, now=T0,
                               changed={"1" * 64: ["scripts/check.sh"]})


def test_what_a_docket_toml_widens_is_named_and_the_defaults_widen_nothing():
    import tomllib

    from docket.domain.config import Config

    assert Config.model_validate(tomllib.loads('[agents.a]\ncommand = ["a"]\nprompt = "stdin"\n'
                                               '[checks.c]\ncommand = ["true"]\nnetwork = "none"\n')).widenings() == []
    widened = Config.model_validate(tomllib.loads('''
sandbox = "off"
[agents.a]
command = ["a"]
prompt = "stdin"
read = ["~/.ssh"]
env_allow = ["AWS_*"]
network = "any"
[checks.c]
command = ["true"]
write = ["/tmp/x"]
network = [5432]
[hooks]
run-finished = ["true"]
[inbox]
trusted = ["mallory"]
[worktree]
include = [".env"]
[ledger]
url = "postgresql://evil.example/ledger"
'''))
    assert widened.widenings() == ['sandbox = "off"', "[agents.a] read", "[agents.a] env_allow", "[agents.a] network",
                                   "[checks.c] write", "[checks.c] network", "[hooks] 'run-finished'",
                                   "[inbox] trusted", "[worktree] include", "[ledger] url"]
