"""The marked docket.toml blocks of docs/agents.md, read by the tests that hold the page to its word."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "agents.md"
SCRIPTED_AGENT = ROOT / "examples" / "scripted_agent.py"
SCRIPTED_PLACEHOLDER = "/path/to/docket/examples/scripted_agent.py"  # what the page asks the reader to replace
_MARKED = re.compile(r"<!-- ([a-z-]+(?:: [A-Za-z0-9_-]+)?) -->\n```toml\n(.*?)\n```\n", re.DOTALL)


def marked_blocks(text: str | None = None) -> dict[str, str]:
    """Each marked ```toml block of docs/agents.md by its marker: "agent: NAME", "agent-offline: NAME", "checks",
    "tasks"."""
    text = DOC.read_text(encoding="utf-8") if text is None else text
    return {marker: body for marker, body in _MARKED.findall(text)}


def agent_block(name: str, scripted_agent: Path | None = None) -> str:
    """The page's [agents.NAME] block; for the scripted agent, with the path of examples/scripted_agent.py in it."""
    block = marked_blocks()[f"agent: {name}"]
    return block.replace(SCRIPTED_PLACEHOLDER, str(scripted_agent or SCRIPTED_AGENT))


def offline_agent(name: str, model_server: str) -> dict[str, Any]:
    """The page's [agents.NAME] settings pointed at a model server (its URL, without /v1): its `agent-offline: NAME`
    block's `args` appended to the command, `env` and `env_allow` merged, `network` replaced, `{model_server}` filled
    in."""
    agent = tomllib.loads(agent_block(name))["agents"][name]
    offline = tomllib.loads(marked_blocks()[f"agent-offline: {name}"])
    assert set(offline) <= {"args", "env", "env_allow", "network"}, f"agent-offline: {name} has {sorted(offline)}"

    def filled(value: str) -> str:
        return value.replace("{model_server}", model_server)

    agent["command"] = [*agent["command"], *(filled(arg) for arg in offline.get("args", []))]
    agent["env"] = {**agent.get("env", {}), **{k: filled(v) for k, v in offline.get("env", {}).items()}}
    agent["env_allow"] = [*agent.get("env_allow", []), *offline.get("env_allow", [])]
    if "network" in offline:  # a model server on loopback: docket's egress proxy never reaches one
        agent["network"] = offline["network"]
    return agent


def agent_toml(name: str, settings: dict[str, Any]) -> str:
    """[agents.NAME] holding settings (strings, numbers, booleans, lists of strings, tables of strings), as TOML."""

    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v, ensure_ascii=False)  # a JSON string, number or boolean is TOML too

    return "\n".join([f"[agents.{name}]", *(f"{key} = {value(v)}" for key, v in settings.items())]) + "\n"
