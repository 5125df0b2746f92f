"""The sandbox policy (domain/containment/sandbox.py), its configuration, and what an older kernel makes of it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from docket.adapters.world.processes import landlock
from docket.adapters.world.processes.sandbox_roots import require_sandbox
from docket.domain.kernel.codes import Code
from docket.domain.config import Config
from docket.domain.kernel.errors import Refused
from docket.domain.containment.sandbox import Confinement, SandboxPolicy, network_setting, unsandboxed


def test_a_policy_sorts_its_roots_keeps_a_written_root_out_of_the_read_ones_and_has_a_stable_digest():
    one = SandboxPolicy.of(write=["/w", "/t", "/w"], read=["/usr", "/w", "/etc"], network=(443,))
    two = SandboxPolicy.of(write=["/t", "/w"], read=["/etc", "/usr"], network=(443,))
    assert one == two and one.sha256() == two.sha256()
    assert (one.write, one.read) == (("/t", "/w"), ("/etc", "/usr"))
    assert one.sha256() != SandboxPolicy.of(write=["/t", "/w"], read=["/etc", "/usr"], network="any").sha256()
    record = one.record()
    assert (record.enforced, record.write_roots, record.network, record.policy_sha256) == (
        True, ["/t", "/w"], [443], one.sha256())
    assert unsandboxed().record().enforced is False


def test_network_is_any_none_ports_or_hosts_never_both():
    assert network_setting("none") == "none"
    assert network_setting([443, 80, 443]) == (80, 443)
    assert network_setting(["api.anthropic.com:443"]) == ("api.anthropic.com:443",)  # enforced by the egress proxy
    with pytest.raises(ValueError, match="all TCP ports or all host names"):
        network_setting([443, "api.anthropic.com"])
    for bad in ([0], [70000], [True], "some"):
        with pytest.raises(ValueError):
            network_setting(bad)


def test_the_configuration_defaults_agents_to_any_checks_to_none_and_the_sandbox_on():
    config = Config.model_validate({"agents": {"a": {"command": ["a", "{prompt}"], "read": ["~/.claude"]}},
                                    "checks": {"t": {"command": ["true"]}}})
    assert config.sandbox == "landlock"
    assert config.confinement(config.agents["a"]) == Confinement("landlock", ("~/.claude",), (), "any")
    assert config.confinement(config.checks["t"]).network == "none"
    off = Config.model_validate({"sandbox": "off"})
    assert off.sandbox == "off"
    for bad in ({"sandbox": "none"}, {"agents": {"a": {"command": ["a", "{prompt}"], "read": ["relative/path"]}}},
                {"agents": {"a": {"command": ["a", "{prompt}"], "write": ["/x/../etc"]}}}):
        with pytest.raises(ValidationError):
            Config.model_validate(bad)


def test_an_older_kernel_drops_what_it_lacks_and_the_policy_then_says_what_it_means():
    policy = SandboxPolicy.of(write=["/w"], read=[], network="none")
    assert landlock.effective(policy, 3).network == "any"  # no TCP rules before ABI 4: recorded as it is
    assert landlock.effective(policy, 4) == policy


def test_without_landlock_a_sandboxed_launch_is_refused_unless_the_configuration_says_off(monkeypatch):
    monkeypatch.setattr(landlock, "_abi", 0)  # a kernel without Landlock (or macOS)
    with pytest.raises(Refused) as refused:
        require_sandbox(Confinement())
    assert refused.value.code == Code.SANDBOX_UNAVAILABLE and 'sandbox = "off"' in refused.value.message
    require_sandbox(Confinement(mode="off"))


def test_the_install_of_a_program_folder_is_what_its_programs_need(tmp_path):
    from docket.adapters.world.processes.sandbox_roots import install_roots

    home = tmp_path / "home"
    npm = home / ".cache" / "agents" / "codex-1" / "node_modules" / ".bin"  # an npm install under a mixed folder
    venv = tmp_path / "venv" / "bin"
    pyenv = home / ".pyenv" / "versions" / "3.11" / "bin"
    for folder in (npm, venv, pyenv):
        folder.mkdir(parents=True)
    roots = install_roots([str(npm), str(venv), str(pyenv), "relative/bin", ""], [], home)
    assert home / ".cache" / "agents" / "codex-1" in roots  # the package: its vendored binaries are beside .bin
    assert tmp_path / "venv" in roots  # a bin folder's parent
    assert home / ".pyenv" / "versions" in roots and home / ".pyenv" not in roots  # a tool manager's entries
    assert home not in roots and home / ".cache" not in roots  # never the home folder nor a mixed folder whole
