"""The read roots found on a machine (adapters/world/processes/sandbox_roots.py) never open a home dot-folder whole nor reach a
secret: a PATH folder under the home is itself, its programs' real installs, ~/.local/bin's ~/.local/lib, a tool
manager's entries less the credential-looking ones; and nothing found contains or lies in a forbidden path."""

from __future__ import annotations

import os
from pathlib import Path

from docket.adapters.world.processes.sandbox_roots import (
    CREDENTIAL_NAME,
    forbidden_paths,
    install_roots,
    launch_policy,
    subtract,
)

SECRETS = (".cargo/credentials.toml", ".cargo/credentials", ".local/share/docket/secret", ".npmrc",
           ".config/gh/hosts.yml", ".aws/credentials", ".docker/config.json", ".ssh/id_ed25519", ".netrc",
           ".git-credentials", ".pypirc", ".docket/signing")


def _file(path: Path, text: str = "x", mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _fake_home(tmp_path: Path) -> Path:
    """A home with tools on PATH beside every kind of secret."""
    home = tmp_path / "home"
    for secret in SECRETS:
        _file(home / secret, "SECRET")
    _file(home / ".cargo" / "bin" / "cargo", "#!/bin/sh\n", 0o755)
    (home / ".cargo" / "registry" / "index").mkdir(parents=True)
    _file(home / ".cargo" / "env")
    _file(home / ".cargo" / ".npm-token")  # a credential-looking name in a tool manager's folder
    pipx = home / ".local" / "share" / "pipx" / "venvs" / "black"
    _file(pipx / "pyvenv.cfg", "home = /usr/bin\n")
    _file(pipx / "bin" / "black", "#!/bin/sh\n", 0o755)
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "black").symlink_to(pipx / "bin" / "black")
    (home / ".local" / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    codex = home / ".npm-global" / "lib" / "node_modules" / "@openai" / "codex"
    _file(codex / "bin" / "codex.js", "#!/usr/bin/env node\n", 0o755)
    (home / ".npm-global" / "bin").mkdir(parents=True)
    (home / ".npm-global" / "bin" / "codex").symlink_to(codex / "bin" / "codex.js")
    (home / "bin").mkdir()
    return home


def _reaches(root: Path, secret: Path) -> bool:
    return secret.is_relative_to(root) or root.is_relative_to(secret)


def test_the_installs_under_a_home_are_what_their_programs_need_and_no_dot_folder_whole(tmp_path):
    home = _fake_home(tmp_path)
    path = [home / ".cargo" / "bin", home / ".local" / "bin", home / ".npm-global" / "bin", home / "bin"]

    roots = install_roots([str(p) for p in path], [], home)

    pipx = home / ".local" / "share" / "pipx" / "venvs" / "black"
    codex = home / ".npm-global" / "lib" / "node_modules" / "@openai" / "codex"
    for needed in (home / ".cargo" / "bin", home / ".cargo" / "registry", home / ".cargo" / "env",
                   home / ".local" / "bin", home / ".local" / "lib", pipx, codex, home / "bin"):
        assert needed in roots, (needed, roots)
    for broad in (home, home / ".cargo", home / ".local", home / ".local" / "share", home / ".npm-global"):
        assert broad not in roots, broad
    assert home / ".cargo" / "credentials.toml" not in roots and home / ".cargo" / ".npm-token" not in roots
    assert not [r for r in roots if r.is_relative_to(home / ".local" / "share" / "docket")]


def test_a_launch_on_a_fake_home_reaches_none_of_its_secrets(tmp_path):
    home = _fake_home(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    path = os.pathsep.join(str(p) for p in (home / ".cargo" / "bin", home / ".local" / "bin",
                                           home / ".npm-global" / "bin", home, home / ".local", "/usr/bin"))
    policy = launch_policy(write=[work], read=[], network="any", argv=["cargo", "build"], env={"PATH": path},
                           cwd=work, home=home, forbidden=[home / ".local" / "share" / "docket"])

    roots = [Path(r) for r in (*policy.read, *policy.write)]
    for secret in SECRETS:
        assert not [r for r in roots if _reaches(r, home / secret)], (secret, roots)
    assert str(home / ".cargo" / "bin") in policy.read  # the tool itself still runs


def test_the_users_own_read_extras_are_kept_whole(tmp_path):
    home = _fake_home(tmp_path)
    policy = launch_policy(write=[], read=[], extra_read=["~/.aws"], network="any", argv=[], env={"PATH": ""},
                           cwd=tmp_path, home=home)
    assert str(home / ".aws") in policy.read


def test_subtract_splits_a_root_around_a_forbidden_path_and_drops_one_inside_it():
    tree = {Path("/a"): [Path("/a/b"), Path("/a/c"), Path("/a/d")], Path("/a/b"): [Path("/a/b/x"), Path("/a/b/y")]}

    kept = subtract([Path("/a"), Path("/a/b/y/deep"), Path("/e")], [Path("/a/b/y"), Path("/a/d")],
                    entries=lambda folder: tree.get(folder, []))

    assert kept == [Path("/a/b/x"), Path("/a/c"), Path("/e")]


def test_subtract_on_real_folders_leaves_out_the_links_of_a_split_root(tmp_path):
    (tmp_path / "data" / "docket").mkdir(parents=True)
    (tmp_path / "data" / "bin").mkdir()
    (tmp_path / "data" / "back-in").symlink_to(tmp_path / "data" / "docket")

    kept = subtract([tmp_path / "data"], forbidden_paths(None, data=tmp_path / "data" / "docket"))

    assert kept == [tmp_path / "data" / "bin"]


def test_forbidden_paths_name_the_homes_secrets_and_dockets_data():
    home = Path("/home/u")
    forbidden = forbidden_paths(home, data=Path("/home/u/.local/share/docket"), extra=[Path("/src/repo")])
    for path in (".ssh", ".gnupg", ".aws", ".config/gh", ".docker", ".kube", ".npmrc", ".netrc", ".pypirc",
                 ".git-credentials", ".cargo/credentials", ".cargo/credentials.toml", ".config/docket",
                 ".local/share/docket", ".docket"):
        assert home / path in forbidden, path
    assert Path("/src/repo") in forbidden


def test_credential_looking_names():
    for name in ("credentials", "credentials.toml", ".npm-token", "auth.json", "hosts.yml", "config.json",
                 "client.pem", "server.key", "secrets.yaml", ".netrc", "id_ed25519"):
        assert CREDENTIAL_NAME.search(name), name
    for name in ("bin", "registry", "env", "versions", "shims", "toolchains", "config.toml", "plugins", "keyboard"):
        assert not CREDENTIAL_NAME.search(name), name


def test_a_home_reached_through_a_link_is_still_the_home(tmp_path):
    home = _fake_home(tmp_path)
    link = tmp_path / "linked-home"  # /home -> /var/home, as on Fedora Silverblue
    link.symlink_to(home)
    path = [link / ".cargo" / "bin", link / ".local" / "bin"]

    roots = install_roots([str(p) for p in path], [], link)

    assert home / ".cargo" / "bin" in roots and home / ".local" / "lib" in roots
    assert home / ".cargo" not in roots and home / ".local" not in roots
    policy = launch_policy(write=[], read=[], network="any", argv=[], env={"PATH": os.pathsep.join(map(str, path))},
                           cwd=tmp_path, home=link)
    for secret in SECRETS:
        assert not [r for r in map(Path, policy.read) if _reaches(r, home / secret)], secret


def test_a_folder_of_the_home_on_path_is_itself_not_its_parent(tmp_path):
    home = _fake_home(tmp_path)
    (home / "go" / "bin").mkdir(parents=True)
    roots = install_roots([str(home / "bin"), str(home / "go" / "bin")], [], home)
    assert roots == [home / "bin", home / "go" / "bin"]
