"""`docket worker launch` pins what the agent left when it exits, with docket.toml's [candidates] max_file_size."""

from __future__ import annotations

from tests.e2e.go_world import _SANDBOX_OFF_WITHOUT_LANDLOCK
from tests.e2e.test_workers import agent, workers  # noqa: F401  (the fixture)


def test_the_pin_on_exit_refuses_a_file_over_the_configured_limit(workers):  # noqa: F811
    workers.config(_SANDBOX_OFF_WITHOUT_LANDLOCK + "[candidates]\nmax_file_size = 10\n")
    workers.plan("t1")
    result = workers.launch("t1", "--", *agent("--write", "big.txt=more than ten bytes"))
    doc = result.json()
    assert doc["pin"]["code"] == "file-too-large", doc
    assert "big.txt is 19 bytes" in doc["pin"]["message"] and "(10 B)" in doc["pin"]["message"]
    assert not workers.events("CandidatePinRequested")
