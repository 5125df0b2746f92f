"""The variables that lead out of the sandbox (an agent's socket, a bus, a display, a database and its password
file) reach no agent, check or hook, whose environments are all made by scrub_environment, unless the user's
env_allow names them exactly: a glob, even "*", is not asking for the user's ssh-agent."""

from __future__ import annotations

from docket.domain.containment.processes import WITHHELD_UNLESS_NAMED, scrub_environment

DOORS = {"SSH_AUTH_SOCK": "/run/user/0/ssh-agent.sock", "SSH_AGENT_PID": "4242", "GPG_AGENT_INFO": "/run/gpg:1:1",
         "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus", "DOCKER_HOST": "unix:///var/run/docker.sock",
         "XDG_RUNTIME_DIR": "/run/user/0", "DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0",
         "XAUTHORITY": "/home/u/.Xauthority", "PGHOST": "/var/run/postgresql", "PGPASSFILE": "/home/u/.pgpass",
         "PGSERVICEFILE": "/home/u/.pg_service.conf", "TMUX": "/tmp/tmux-0/default,1,0", "KUBECONFIG": "/k"}
PLAIN = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8"}


def test_every_door_out_is_withheld_by_default():
    kept, removed = scrub_environment({**PLAIN, **DOORS})
    assert kept == PLAIN and sorted(removed) == sorted(DOORS)
    assert set(DOORS) <= WITHHELD_UNLESS_NAMED


def test_a_glob_lets_no_door_through_not_even_a_star():
    for allow in (["*"], ["SSH_*", "DOCKER_*", "PG*", "XDG_*", "*DISPLAY*", "DBUS_*"], ["?*"]):
        kept, _ = scrub_environment({**PLAIN, **DOORS}, allow)
        assert kept == PLAIN, allow


def test_a_door_named_exactly_goes_through_alone():
    kept, removed = scrub_environment({**PLAIN, **DOORS}, ["SSH_AUTH_SOCK", "PGHOST", "*"])
    assert kept == {**PLAIN, "SSH_AUTH_SOCK": DOORS["SSH_AUTH_SOCK"], "PGHOST": DOORS["PGHOST"]}
    assert "DOCKER_HOST" in removed and "SSH_AGENT_PID" in removed
