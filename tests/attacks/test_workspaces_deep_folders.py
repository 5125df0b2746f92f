"""Attack: an agent leaves a folder 3,000 levels deep in its workspace, or commits one 300 levels deep.

The capture walked folders recursively, so `docket go` and every resume ended in exit 70 (RecursionError). A
workspace's folders (on disk, and in the commits its capture starts from) may nest at most MAX_TREE_DEPTH deep: past
that its pin is refused ``tree-too-deep``, that task fails with the reason recorded, and the honest task lands.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.attacks.attacker_world import attacker_world, feedback, honest_and, results, task

TASKS = honest_and(task("deep", "a folder 3000 deep", "Go deep.", "write deep.py: DEEP = 1", "DEEP-FOLDER"),
                   task("committed", "a commit 300 deep", "Commit deep.", "write committed.py: COMMITTED = 1",
                        "DEEP-COMMIT"))


def _remove_tree(root: Path) -> None:
    """Remove root and everything in it without recursion and by relative steps: shutil.rmtree and pytest's own
    clean-up recurse a frame a level (RecursionError at the end of the whole session), and the full path of a folder
    3,000 levels deep is longer than PATH_MAX."""
    if not root.is_dir() or root.is_symlink():
        return
    here = os.getcwd()
    names: list[str] = []  # the folders entered below root, in order
    try:
        os.chdir(root)
        while True:
            deeper = None
            with os.scandir(".") as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        deeper = entry.name
                        break
                    os.unlink(entry.name)
            if deeper is not None:
                os.chmod(deeper, 0o700)
                os.chdir(deeper)
                names.append(deeper)
            elif names:
                os.chdir("..")
                os.rmdir(names.pop())
            else:
                break
    finally:
        os.chdir(here)
    root.rmdir()


def test_a_folder_too_deep_fails_only_its_task_with_the_reason_and_the_run_finishes(tmp_path: Path, data_dir: Path):
    world = attacker_world(tmp_path, TASKS)
    try:
        _go_deep(world)
    finally:  # every copy of the deep folders, wherever docket kept or moved the workspaces
        _remove_tree(data_dir.parent)
        _remove_tree(tmp_path)


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
