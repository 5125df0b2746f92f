"""Egress by host, the pure rules (domain/containment/egress.py): allow-list entries, matching, the addresses never reached, the
default of a known agent, the bounded tally; and the network values docket.toml may give."""

from __future__ import annotations

import pytest

from docket.domain.config import Config
from docket.domain.containment.egress import RefusalTally, default_network, host_allowed, host_entry, refused_address
from docket.domain.containment.sandbox import SandboxPolicy, network_setting


def test_entries_are_hosts_in_normal_form():
    assert host_entry("API.Anthropic.com.") == "api.anthropic.com"
    assert host_entry("*.githubusercontent.com") == "*.githubusercontent.com"
    assert host_entry("example.com:8443") == "example.com:8443"
    assert host_entry("example.com:*") == "example.com:*"
    assert host_entry("[::1]:443") == "[::1]:443"
    for bad in ("https://api.anthropic.com", "a/b", "user@host", "*", "a.*.b", "-a.com", "x:0", "x:70000", ""):
        with pytest.raises(ValueError):
            host_entry(bad)


def test_matching_is_exact_or_under_a_wildcard_and_port_443_unless_named():
    allowed = ("api.anthropic.com", "*.githubusercontent.com", "example.com:8443")
    assert host_allowed("api.anthropic.com", 443, allowed)
    assert host_allowed("API.ANTHROPIC.COM.", 443, allowed)
    assert not host_allowed("api.anthropic.com", 80, allowed)
    assert not host_allowed("evil-api.anthropic.com", 443, allowed)
    assert not host_allowed("api.anthropic.com.evil.com", 443, allowed)
    assert host_allowed("raw.githubusercontent.com", 443, allowed)
    assert not host_allowed("githubusercontent.com", 443, allowed)  # "*." is what is under it
    assert not host_allowed("xgithubusercontent.com", 443, allowed)
    assert host_allowed("example.com", 8443, allowed) and not host_allowed("example.com", 443, allowed)
    assert not host_allowed("169.254.169.254", 80, allowed)


@pytest.mark.parametrize("address", ["169.254.169.254", "127.0.0.1", "127.9.9.9", "10.1.2.3", "172.16.0.1",
                                     "192.168.1.1", "100.100.100.200", "0.0.0.0", "::1", "::", "fd00:ec2::254",
                                     "fe80::1", "::ffff:169.254.169.254", "::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe",
                                     "224.0.0.1", "255.255.255.255", "not-an-address"])
def test_loopback_link_local_private_and_reserved_addresses_are_refused(address):
    assert refused_address(address) is not None


@pytest.mark.parametrize("address", ["1.1.1.1", "160.79.104.10", "2606:4700::1111", "192.0.2.2"])
def test_public_addresses_are_not(address):
    assert refused_address(address) is None


def test_known_agents_default_to_their_model_api_hosts():
    assert default_network(["claude", "-p"]) == ("api.anthropic.com",)
    assert default_network(["/opt/cli/bin/codex", "exec"]) == ("api.openai.com", "chatgpt.com")
    assert default_network(["python3", "agent.py"]) == "any"
    config = Config.model_validate({"agents": {
        "claude": {"command": ["claude", "-p"], "prompt": "stdin"},
        "open": {"command": ["claude", "-p"], "prompt": "stdin", "network": "any"},
        "other": {"command": ["my-agent", "{prompt}"]},
        "listed": {"command": ["my-agent", "{prompt}"], "network": ["api.example.com", "*.example.org"]}}})
    assert config.agents["claude"].network == ("api.anthropic.com",)
    assert config.agents["open"].network == "any"
    assert config.agents["other"].network == "any"
    assert config.agents["listed"].network == ("*.example.org", "api.example.com")


def test_network_values():
    assert network_setting(["b.com", "a.com", "a.com"]) == ("a.com", "b.com")
    assert network_setting([443, 22]) == (22, 443)
    with pytest.raises(ValueError, match="all TCP ports or all host names"):
        network_setting([443, "a.com"])
    for section in ("checks", "hooks"):
        body = {"command": ["x"], "network": ["api.example.com"]}
        with pytest.raises(ValueError, match="egress proxy, which serves agents only"):
            Config.model_validate({section: {"t" if section == "checks" else "run-completed": body}})


def test_the_policy_records_hosts_and_keeps_the_proxy_port_out_of_its_digest():
    policy = SandboxPolicy.of(write=["/w"], read=[], network=("api.anthropic.com",))
    proxied = policy.through_proxy(40001)
    assert proxied.egress_port == 40001 and policy.egress_port is None
    assert proxied.sha256() == policy.sha256()
    assert proxied.record().network == ["api.anthropic.com"]


def test_the_tally_is_bounded_and_counts_everything():
    tally = RefusalTally(limit=3)
    for i in range(10):
        tally.add(f"h{i}.example", 443)
    for _ in range(5):
        tally.add("h0.example", 443)
    tally.add("BAD host\x00\n", 80)
    assert tally.total == 16
    assert len(tally.counts) == 3
    assert tally.entries()[0] == ("h0.example", 443, 6)
    tally2 = RefusalTally()
    tally2.add("BAD host\x00\n", 80)
    assert tally2.entries() == [("bad?host??", 80, 1)]
