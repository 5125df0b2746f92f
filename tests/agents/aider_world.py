"""A repository where the real aider works offline, as docs/agents.md configures it: for the e2e tests of aider
(tests/e2e/test_real_aider.py), its benchmark (bench/real_aider.py) and `make demo-real` (tests/demo_real.sh).

The agent's block is docs/agents.md's `agent: aider` block merged with its `agent-offline: aider` block, pointed at
a scripted model server (examples/model_server.py) whose rules answer each task's prompt with one whole file.
For the demo: `python tests/agents/aider_world.py script` prints the model server's script (JSON), and
`python tests/agents/aider_world.py repo REPO MODEL_SERVER_URL AIDER` writes such a repository.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script (the demo), tests.agents is importable too

from tests.agents.agents_doc import DOC, agent_toml, offline_agent  # noqa: E402

FAKE_KEY = "sk-docket-offline-fake-0123456789abcdefghij"  # shaped like a real key: only env_allow lets it through
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@example.com"}

GREET = "def greet(name):\n    return 'Hello, ' + name\n"
FAREWELL = "def farewell(name):\n    return 'Goodbye, ' + name\n"
FILES = {"greet": {"greet.py": GREET}, "farewell": {"farewell.py": FAREWELL}}

TASKS = '''\
[[tasks]]
id = "greet"
title = "a greeting"
prompt = "Write greet.py with a function greet(name) that returns 'Hello, ' + name."

[[tasks]]
id = "farewell"
title = "a farewell"
prompt = "Write farewell.py with a function farewell(name) that returns 'Goodbye, ' + name."
'''

# The check, committed in the repository: each module that exists says what it should.
CHECK = '''\
import importlib
import pathlib

for name, word in {"greet": "Hello", "farewell": "Goodbye"}.items():
    if pathlib.Path(f"{name}.py").exists():
        said = getattr(importlib.import_module(name), name)("Ada")
        assert said == f"{word}, Ada", f"{name} said {said!r}"
        print(f"{name}: ok")
'''


def script(*, first_attempt: dict[str, Any] | None = None) -> dict:
    """The model server's script: each task's prompt gets its file whole. With first_attempt (e.g. {"status":
    401}), a prompt without docket's retry feedback gets that instead."""
    rules: list[dict] = []
    for task, files in FILES.items():
        match = f"Write {next(iter(files))}"
        if first_attempt is None:
            rules.append({"match": match, "files": files, "text": f"Here is {task}."})
        else:
            rules += [{"match": [match, "Your previous attempt"], "files": files, "text": f"Here is {task}."},
                      {"match": match, **first_attempt}]
    return {"rules": rules, "default": {"text": "Nothing to do."}}


def model_metadata() -> str:
    """The `.aider.model.metadata.json` docs/agents.md tells a repository to commit: the ```json block of the page's
    "aider, offline" section."""
    section = DOC.read_text(encoding="utf-8").split("### aider, offline", 1)[1]
    found = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert found, "docs/agents.md's aider, offline section has no ```json block"
    json.loads(found.group(1))
    return found.group(1) + "\n"


def aider_agent(model_server: str, aider: Path | str, *, commits: bool = False) -> dict[str, Any]:
    """The page's aider settings pointed at model_server, the installed aider's path in place of `aider`. commits:
    aider's own commits on, as the page says (`--auto-commits` for `--no-auto-commits`)."""
    agent = offline_agent("aider", model_server)
    assert agent["command"][0] == "aider"
    agent["command"][0] = str(aider)
    if commits:
        agent["command"] = ["--auto-commits" if arg == "--no-auto-commits" else arg for arg in agent["command"]]
    return agent


def docket_toml(model_server: str, aider: Path | str, *, commits: bool = False) -> str:
    agents = agent_toml("aider", aider_agent(model_server, aider))
    if commits:
        agents += "\n" + agent_toml("aider-commits", aider_agent(model_server, aider, commits=True))
    return f'''agent = "aider"

{agents}
[checks.words]
command = ["{sys.executable}", "check.py"]
timeout = "1m"
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_IDENTITY}, check=True,
                          capture_output=True, text=True).stdout.strip()


def write_repository(repo: Path, model_server: str, aider: Path | str, *, commits: bool = False) -> Path:
    """A git repository at repo (made) on main: a README, check.py, the model's metadata, `.aider*` ignored and
    docket.toml with the aider block(s); tasks.toml beside it, untracked (ignored)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("words\n")
    (repo / "check.py").write_text(CHECK)
    (repo / ".aider.model.metadata.json").write_text(model_metadata())
    (repo / ".gitignore").write_text(".aider*\ntasks.toml\n")
    (repo / "docket.toml").write_text(docket_toml(model_server, aider, commits=commits))
    (repo / "tasks.toml").write_text(TASKS)
    git(repo, "add", "-f", "README.md", "check.py", ".aider.model.metadata.json", ".gitignore", "docket.toml")
    git(repo, "commit", "-q", "-m", "words")
    return repo


def aider_environment(**extra: str) -> dict[str, str]:
    """The environment docket (or aider, run directly) is started with: this one's, without docket's settings and
    any git identity (aider's comes from its block), with the fake key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKET_", "GIT_AUTHOR_", "GIT_COMMITTER_"))}
    return {**env, "OPENAI_API_KEY": FAKE_KEY, **extra}


if __name__ == "__main__":
    if sys.argv[1:] == ["script"]:
        print(json.dumps(script(), indent=2))
    elif len(sys.argv) == 5 and sys.argv[1] == "repo":
        write_repository(Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: aider_world.py script | aider_world.py repo REPO MODEL_SERVER_URL AIDER")
