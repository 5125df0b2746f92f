"""A sandboxed launch, made as docket makes an agent's, a check's or a hook's (``sandbox_for`` computes its policy,
``spawn_gated`` confines it between fork and exec), run for real on this kernel: with the user's tools on PATH under
the home, it reads none of the home's secrets (the tool-manager folders those tools live in hold credentials too,
docket's own data lies beside pip's), while the tools still run; and when docket runs as root, the launch has no
capability left, nor any an exec could give back."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from docket.adapters.world.processes.landlock import abi_version
from docket.adapters.world.processes.lifecycle import LaunchSpec, PsutilProcesses, wait_for_group
from docket.adapters.world.processes.sandbox_roots import sandbox_for
from docket.domain.containment.sandbox import Confinement

pytestmark = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock: the sandbox cannot be tested")

SECRET = "sandbox-home-secret"
SECRETS = (".cargo/credentials.toml", ".local/share/docket/secret", ".npm/_cacache/index", ".npmrc",
           ".config/gh/hosts.yml", ".aws/credentials", ".docker/config.json", ".ssh/id_ed25519")

# each try prints one line, "<what>: denied" or "<what>: READ <text>", so the test sees the attack was really made
PROBE = r'''
import subprocess, sys
home, secrets = sys.argv[1], sys.argv[2:]
for secret in secrets:
    try:
        with open(f"{home}/{secret}") as f:
            print(f"{secret}: READ {f.read()}", flush=True)
    except OSError as error:
        print(f"{secret}: denied ({type(error).__name__})", flush=True)
ran = subprocess.run(["cargo-tool"], capture_output=True, text=True)
print(f"tool: {ran.returncode} {ran.stdout.strip()}", flush=True)
'''

CAPABILITIES = r'''
import ctypes, os
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
for name in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
    print(f"{name} {int(status[name], 16)}", flush=True)
libc = ctypes.CDLL(None, use_errno=True)
name = os.uname().nodename.encode()  # its own name again: were it allowed, nothing would change
done = libc.sethostname(name, len(name))
print(f"sethostname {done} {ctypes.get_errno()}", flush=True)
print(f"uid {os.geteuid()}", flush=True)
'''


def _file(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _home(tmp_path: Path) -> Path:
    """A home with a tool in ~/.cargo/bin, ~/.local/bin on PATH, and a secret in every usual place."""
    home = tmp_path / "home"
    for secret in SECRETS:
        _file(home / secret, SECRET, 0o600)
    _file(home / ".cargo" / "bin" / "cargo-tool", "#!/bin/sh\necho the tool ran\n", 0o755)
    (home / ".local" / "bin").mkdir(parents=True)
    return home


def _launch(tmp_path: Path, script: str, args: list[str], env: dict[str, str]) -> str:
    """The output of script run by this Python, sandboxed as docket launches a check: the policy from sandbox_for,
    enforced by spawn_gated's preexec, released through its gate."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    program = _file(work / "probe.py", script)
    argv = (sys.executable, str(program), *args)
    policy = sandbox_for(Confinement(), write=[work], read=[], temporary=tmp_path / "tmp", argv=argv, env=env,
                         cwd=work)
    assert policy.enforced
    processes = PsutilProcesses()
    log = tmp_path / f"{program.stem}-{len(list(tmp_path.glob('*.log')))}.log"
    gated = processes.spawn_gated(LaunchSpec(argv=argv, cwd=work, env=env, log_path=log, sandbox=policy))
    gated.open()
    code, cause = wait_for_group(processes, gated, timeout_ms=60_000, log_path=log)
    text = log.read_text()
    assert (code, cause) == (0, None), text
    return text


def test_a_sandboxed_launch_reads_no_secret_of_the_home_yet_runs_the_tools_on_its_path(tmp_path, monkeypatch):
    home = _home(tmp_path)
    monkeypatch.setenv("HOME", str(home))  # docket's own view of the home: where its data folder is too
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    path = os.pathsep.join([str(home / ".cargo" / "bin"), str(home / ".local" / "bin"), "/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": str(home)}

    text = _launch(tmp_path, PROBE, [str(home), *SECRETS], env)

    for secret in SECRETS:  # really tried, refused by the kernel: Landlock's refusal, or hidden by the private mounts
        assert (f"{secret}: denied (PermissionError)" in text or f"{secret}: denied (FileNotFoundError)" in text), text
    assert SECRET not in text
    assert "tool: 0 the tool ran" in text, text


@pytest.mark.skipif(os.geteuid() != 0, reason="docket runs as an ordinary user here: it has no root to give away")
def test_a_sandboxed_launch_of_root_has_no_capability_and_cannot_name_the_host(tmp_path):
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(tmp_path)}
    before = os.uname().nodename

    text = _launch(tmp_path, CAPABILITIES, [], env)

    for name in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
        assert f"{name} 0\n" in text, text
    assert "sethostname -1 1\n" in text, text  # EPERM
    assert "uid 0\n" in text, text  # still uid 0, with nothing of root's power
    assert os.uname().nodename == before
