"""How `docket status` words a worker's generation: a lost one names the host it was given up with, escaped."""

from docket.cli.supervise.status import _process_part


def test_a_lost_generation_names_its_host_and_a_hostile_host_name_is_escaped():
    assert _process_part({"status": "lost", "host": "alpha"}) == ", lost with host alpha"
    assert "\x1b" not in _process_part({"status": "lost", "host": "evil\x1b]0;pwned\x07"})
    assert _process_part({"status": "exited", "exit_cause": "exited", "exit_code": 0}) == ", exited with code 0"
