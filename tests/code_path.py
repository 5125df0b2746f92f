"""Which of docket's source files one `docket go` task runs through, from the command to the target.

    python -m tests.code_path            # from the repository's root, with docket installed (make install)

It makes a throwaway repository, runs `docket go` of one task (the scripted agent of examples/, the check `true`)
in this process with a profiler that notes the file of every docket function called, in any thread, and prints
those files by folder. docs/architecture.md walks the same path in words.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("domain", "projections", "adapters", "cli")


def files_run(repository: Path) -> list[str]:
    """The docket source files (relative to the repository's root) whose functions ran for one task."""
    seen: set[str] = set()

    def note(frame, event, _arg):  # noqa: ANN001, ANN202
        if event == "call" and frame.f_code.co_name != "<module>":
            seen.add(frame.f_code.co_filename)

    here = os.getcwd()
    os.chdir(repository)
    sys.argv = ["docket", "go", "--goal", "one task", "--task", "write b.py: B = 2"]
    sys.setprofile(note)
    threading.setprofile(note)
    try:
        with contextlib.redirect_stdout(io.StringIO()) as said:  # the run's own lines and summary
            runpy.run_module("docket", run_name="__main__")
    except SystemExit as e:
        if e.code:
            raise SystemExit(f"docket go exited {e.code}: {said.getvalue()[-2000:]}") from None
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        os.chdir(here)
    found = {os.path.relpath(os.path.realpath(f), ROOT) for f in seen}
    return sorted(f for f in found if f.split(os.sep)[0] in FOLDERS)


def one_task_repository(work: Path) -> Path:
    repository = work / "repo"
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repository)], check=True, env=env)
    (repository / "a.py").write_text("A = 1\n")
    (repository / "docket.toml").write_text(
        'agent = "scripted"\n\n[agents.scripted]\n'
        f'command = ["{sys.executable}", "{ROOT / "examples" / "scripted_agent.py"}", "--prompt-file", '
        '"{prompt_file}"]\nprompt = "file"\n\n[checks.ok]\ncommand = ["true"]\n')
    subprocess.run(["git", "-C", str(repository), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repository), "commit", "-qm", "base"], check=True, env=env)
    subprocess.run([sys.executable, "-m", "docket", "init"], check=True, capture_output=True, cwd=repository)
    return repository


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        files = files_run(one_task_repository(Path(work)))
    by_folder = Counter(os.path.dirname(f) for f in files)
    print(f"{len(files)} docket source files ran a function for one task: "
          + ", ".join(f"{folder}/ {n}" for folder, n in sorted(by_folder.items())))
    for f in files:
        print(f"  {f}")


if __name__ == "__main__":
    main()
