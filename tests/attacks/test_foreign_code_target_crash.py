"""The commits a moved target brought are recorded even when docket is killed right after it recorded that the
target moved (between IntegrationTargetMoved and IntegrationTargetMovedByOthers): the next `docket integrate`
records them, once, and moves nothing."""

from __future__ import annotations

from tests.conftest import git
from tests.e2e.test_integration import RUN, TARGET, make_world, offered, payloads, tip


def test_killed_after_the_target_was_found_moved_the_next_integrate_records_the_foreign_commits(docket):
    make_world(docket)
    offered(docket, "t1", "echo one > a.txt")
    crashed = docket("integrate", RUN, fault="integrate:before-target")
    assert crashed.returncode < 0
    theirs = git(docket.cwd, "commit-tree", "-p", tip(docket), "-m", "a backdoor",
                 git(docket.cwd, "rev-parse", f"{TARGET}^{{tree}}"))
    left = tip(docket)
    git(docket.cwd, "update-ref", f"refs/heads/{TARGET}", theirs)
    killed = docket("integrate", RUN, fault="effector:after-outcome@IntegrationTargetRequested.v2")
    assert killed.returncode < 0
    assert payloads(docket, "IntegrationTargetMoved.v1")
    assert payloads(docket, "IntegrationTargetMovedByOthers.v1") == []
    again = docket("integrate", RUN, check=False)
    assert again.returncode == 3 and again.stderr.startswith("docket: error: target-moved:"), again.stderr
    (moved,) = payloads(docket, "IntegrationTargetMovedByOthers.v1")
    assert (moved["seen"], moved["expected_commit"], moved["found"], moved["foreign_commits"]) == (
        "target-moved", left, theirs, [theirs])
    docket("integrate", RUN, check=False)
    assert len(payloads(docket, "IntegrationTargetMovedByOthers.v1")) == 1 and tip(docket) == theirs
