"""The web view's timeline of a finished run spans the run's own life: a `docket gc` recorded days after the run
closed (it releases the run's candidates and removes its worktrees, in the run's streams) does not stretch the axis
and squeeze the run's bars into a sliver (issue 35, item 10). A real `docket go`, a real gc under a clock three days
on (DOCKET_CLOCK_SKEW_MS, honoured with DOCKET_TESTING=1), a real `docket serve`."""

from __future__ import annotations

import re
from pathlib import Path

from docket.domain.kernel.values import format_duration, to_ms
from tests.e2e.go_world import make_go_world
from tests.e2e.test_serve import Served

DAYS = 3


def test_a_gc_days_after_the_run_does_not_stretch_its_timeline(tmp_path: Path):
    world = make_go_world(tmp_path)
    done = world.go("r1", "--cycles", "2")
    assert done.returncode == 0, done.stderr
    run = world.json("status", "r1")["run"]
    assert run["closed_at"], run
    later = dict(world.env, DOCKET_TESTING="1", DOCKET_CLOCK_SKEW_MS=str(DAYS * 86_400_000))
    world.env = later
    removed = [i for i in world.json("gc", "--apply")["items"] if i["action"] == "removed"]
    assert {i["kind"] for i in removed} >= {"candidate", "worktree"}, removed
    released = world.events("CandidateReleased")
    assert released and all(to_ms(e["recorded_at"]) - to_ms(run["closed_at"]) > (DAYS - 1) * 86_400_000
                            for e in released)

    served = Served(world)
    try:
        status, headers, svg = served.request("/runs/r1/timeline.svg")
        _, _, page = served.request("/runs/r1")
    finally:
        served.stop()
    assert status == 200 and headers["content-type"].startswith("image/svg+xml"), svg
    life = (to_ms(run["closed_at"]) - to_ms(run["opened_at"])) // 1000 * 1000
    axis = re.findall(r'text-anchor="end">([^<]*)</text>', svg)
    assert axis == [format_duration(life)], axis  # the axis ends at the close, not three days on
    assert axis == re.findall(r'text-anchor="end">([^<]*)</text>', page)  # the run's page draws the same picture
    # the run's bars fill the picture: the last one ends near the right edge, not within its first pixels
    ends = [float(x) + float(w) for x, w in re.findall(r'<rect class="span [a-z]+" x="([\d.]+)" y="\d+" '
                                                          r'width="([\d.]+)"', svg)]
    assert ends and max(ends) > 700, ends
