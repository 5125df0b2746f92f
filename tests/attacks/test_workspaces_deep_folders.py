"""Attack: an agent leaves a folder 3,000 levels deep in its workspace, or commits one 300 levels deep.

The capture walked folders recursively, so `docket go` and every resume ended in exit 70 (RecursionError). A
workspace's folders (on disk, and in the commits its capture starts from) may nest at most MAX_TREE_DEPTH deep: past
that its pin is refused ``tree-too-deep``, that task fails with the reason recorded, and the honest task lands.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.attacks.attacker_world import attacker_world, feedback, results

TASKS = '''\
[[tasks]]
id = "greet"
title = "greet"
prompt = """Greet.
write greet.py: print("hello")
"""

[[tasks]]
id = "deep"
title = "a folder 3000 deep"
prompt = """Go deep.
write deep.py: DEEP = 1
DEEP-FOLDER
"""

[[tasks]]
id = "committed"
title = "a commit 300 deep"
prompt = """Commit deep.
write committed.py: COMMITTED = 1
DEEP-COMMIT
"""
'''


def _remove_chain(top: Path) -> None:
    """Remove top's chain of folders named d from the bottom up, by relative steps (shutil.rmtree and pytest's
    clean-up recurse a frame a level, and the full path is longer than PATH_MAX)."""
    here = os.getcwd()
    try:
        os.chdir(top)
        depth = 0
        while os.path.isdir("d"):
            os.chdir("d")
            depth += 1
        for _ in range(depth):
            for name in os.listdir("."):
                os.unlink(name)
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.chdir(here)


def test_a_folder_too_deep_fails_only_its_task_with_the_reason_and_the_run_finishes(tmp_path: Path):
    world = attacker_world(tmp_path, TASKS)
    try:
        _go_deep(world)
    finally:
        for event in world.events("WorktreeRequested"):
            for top in ("deep", "committed"):
                if (Path(event["payload"]["path"]) / top).is_dir():
                    _remove_chain(Path(event["payload"]["path"]) / top)


def _go_deep(world) -> None:  # noqa: ANN001
    done = world.go("r1", "--parallel", "3", "--cycles", "1")
    assert done.returncode == 6, done.stderr
    assert results(done) == {"greet": "delivered", "deep": "failed", "committed": "failed"}
    assert world.file_at("main", "greet.py") == 'print("hello")\n'
    assert feedback(world, "deep")[0].startswith("tree-too-deep: the folder 'deep/d/d/d/")
    assert feedback(world, "committed")[0].startswith("tree-too-deep: the folder 'committed/d/d/d/")

    for command in (("go", "--resume", "r1", "--json"), ("reconcile", "--apply"), ("verify",)):
        again = world.run(*command)
        assert again.returncode in (0, 6), (command, again.stderr)  # never 70
