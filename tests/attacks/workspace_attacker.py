"""An agent for the workspace attack tests: it does its task's scripted work (examples/scripted_agent.py), then the
attacks its prompt names, one word a line. Usage: workspace_attacker.py PROMPT_FILE SCRIPTED_AGENT.

    HOSTILE-OUTPUT      end its output with NUL, invalid UTF-8, a lone CR, ANSI escapes and a bidi override
    DEEP-FOLDER         leave a folder 3,000 levels deep (each level made from the one above: no path is too long)
    DEEP-COMMIT         commit a folder 300 levels deep
    FIFO-GITIGNORE      a folder whose .gitignore is a FIFO
    FIFO-EXCLUDES       the workspace's core.excludesFile names a FIFO in the workspace
    OUTSIDE-EXCLUDES    the workspace's core.excludesFile names OUTSIDE_FILE (outside the workspace)
    CASE-GIT            a real folder .GIT/hooks with a hook in it
"""

import os
import subprocess
import sys
from pathlib import Path

prompt_file, scripted = sys.argv[1], sys.argv[2]
prompt = Path(prompt_file).read_text().split("Your previous attempt (generation ")[0]
attacks = {line.strip() for line in prompt.splitlines()}
done = subprocess.run([sys.executable, scripted, "--prompt-file", prompt_file])


def nested(top: str, levels: int) -> None:
    """levels folders named d, one in the other, under top, made from the one above each (chdir)."""
    here = os.getcwd()
    os.makedirs(top, exist_ok=True)
    os.chdir(top)
    try:
        for _ in range(levels):
            os.makedirs("d", exist_ok=True)
            os.chdir("d")
        Path("bottom.txt").write_text("deep\n")
    finally:
        os.chdir(here)


if "HOSTILE-OUTPUT" in attacks:
    sys.stdout.flush()
    os.write(1, b"mixed \xff\xfe bytes \x1b[31mred\x1b[0m \x1b]0;title\x07 \xe2\x80\xaeevil\ncarriage\rreturn\n"
                b"last line\x00")
if "DEEP-FOLDER" in attacks:
    nested("deep", 3000)
if "DEEP-COMMIT" in attacks:
    nested("committed", 300)
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@example.com"]
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "deep"], check=True)
if "FIFO-GITIGNORE" in attacks:
    os.makedirs("sub", exist_ok=True)
    Path("sub/kept.py").write_text("KEPT = 1\n")
    if not os.path.lexists("sub/.gitignore"):
        os.mkfifo("sub/.gitignore")
if "FIFO-EXCLUDES" in attacks:
    if not os.path.lexists("excludes.fifo"):
        os.mkfifo("excludes.fifo")
    subprocess.run(["git", "config", "core.excludesFile", os.path.abspath("excludes.fifo")], check=True)
if "OUTSIDE-EXCLUDES" in attacks:
    subprocess.run(["git", "config", "core.excludesFile", sys.argv[3]], check=True)
if "CASE-GIT" in attacks:
    os.makedirs(".GIT/hooks", exist_ok=True)
    Path(".GIT/hooks/post-checkout").write_text("#!/bin/sh\necho pwned > pwned.txt\n")
sys.exit(done.returncode)
