"""A merge step's verification pin records the paths its steps changed on the integration (against the head they
merged onto), not every path changed since the run's base: a run's ledger grows by the same bytes for its
thousandth step as for its first (issue 22, goal 5: the pins of a 1,000-task run listed up to 1,000 paths each).
gc still finds each verification's work in the target's history."""

from __future__ import annotations

import json

from tests.e2e.go_world import make_go_world

TASKS = "".join(f'''
[[tasks]]
id = "t{n}"
title = "t{n}"
prompt = "write t{n}.py: T{n} = {n}"
''' for n in range(1, 5))


def test_each_merge_steps_verification_pin_lists_only_its_own_steps_paths(tmp_path):
    world = make_go_world(tmp_path, tasks=TASKS)
    done = world.run("go", "--goal", "four", "--tasks", "tasks.toml", "--id", "r", "--target", "main",
                     "--parallel", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert all(row["result"] == "delivered" for row in json.loads(done.stdout)["tasks"])
    requested = {e["payload"]["binding_id"]: e["payload"] for e in world.events("CandidatePinRequested")}
    pins = [e["payload"] for e in world.events("CandidatePinned")
            if requested[e["payload"]["binding_id"]]["boundary"].startswith("integration-")]
    assert len(pins) == 4
    for pin in pins:
        step_task = requested[pin["binding_id"]]["task_id"]
        assert pin["changed_paths"] == [f"{step_task[2:]}.py"], pin  # "r.t3" -> t3.py alone
        assert requested[pin["binding_id"]]["changed_paths"] == pin["changed_paths"]
    bases = [pin["base"] for pin in pins]
    assert len(set(bases)) == 4  # each against the head its step merged onto
    gc = world.run("gc", "--json")
    assert gc.returncode == 0, gc.stderr
    removable = {item["name"] for item in json.loads(gc.stdout)["items"]
                 if (item["kind"], item["action"]) == ("candidate", "remove")}
    assert {pin["binding_id"] for pin in pins} <= removable  # found delivered in the target's history
    assert world.run("verify").returncode == 0
