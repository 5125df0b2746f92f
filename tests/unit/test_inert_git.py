"""The switches and the environment every git command docket runs carries (adapters/world/git/inert_git.py)."""

from __future__ import annotations

import os

from docket.adapters.world.git.inert_git import inert_environment, inert_switches


def test_every_program_git_could_run_on_its_own_is_switched_off() -> None:
    switches = inert_switches("/private/hooks")
    pairs = dict(s.split("=", 1) for s in switches[1::2])
    assert switches[::2] == ["-c"] * len(pairs)
    assert pairs == {"core.hooksPath": "/private/hooks", "core.fsmonitor": "false",
                     "core.attributesFile": os.devnull, "core.pager": "cat", "core.askPass": "",
                     "core.sshCommand": "false", "credential.helper": "", "protocol.allow": "never",
                     "submodule.recurse": "false", "core.quotepath": "false"}


def test_the_environment_is_an_allow_list_pointing_git_at_dockets_own_git_dir() -> None:
    docket_environment = {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
        "OPENAI_API_KEY": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "AWS_SECRET_ACCESS_KEY": "x" * 40,
        "GIT_DIR": "/elsewhere", "GIT_CONFIG_PARAMETERS": "'filter.evil.smudge'='sh evil'", "GIT_EXTERNAL_DIFF": "evil",
        "GIT_SSH_COMMAND": "evil", "GIT_ASKPASS": "evil", "LD_PRELOAD": "/tmp/evil.so", "PYTHONPATH": "/src",
        "XDG_CONFIG_HOME": "/home/u/.config", "EDITOR": "evil",
    }
    env = inert_environment(docket_environment, git_dir="/private", work_tree="/checkout", index="/checkout/.git/index",
                            objects="/checkout/.git/objects")
    assert env == {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
        "GIT_DIR": "/private", "GIT_WORK_TREE": "/checkout", "GIT_INDEX_FILE": "/checkout/.git/index",
        "GIT_OBJECT_DIRECTORY": "/checkout/.git/objects", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat",
        "GIT_NO_LAZY_FETCH": "1", "GIT_NO_REPLACE_OBJECTS": "1",
    }
