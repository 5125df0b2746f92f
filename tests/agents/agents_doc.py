"""The marked docket.toml blocks of docs/agents.md, read by the tests that hold the page to its word."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "agents.md"
SCRIPTED_AGENT = ROOT / "examples" / "scripted_agent.py"
SCRIPTED_PLACEHOLDER = "/path/to/docket/examples/scripted_agent.py"  # what the page asks the reader to replace
_MARKED = re.compile(r"<!-- ([a-z]+(?:: [A-Za-z0-9_-]+)?) -->\n```toml\n(.*?)\n```\n", re.DOTALL)


def marked_blocks(text: str | None = None) -> dict[str, str]:
    """Each marked ```toml block of docs/agents.md by its marker: "agent: NAME", "checks", "tasks"."""
    text = DOC.read_text(encoding="utf-8") if text is None else text
    return {marker: body for marker, body in _MARKED.findall(text)}


def agent_block(name: str, scripted_agent: Path | None = None) -> str:
    """The page's [agents.NAME] block; for the scripted agent, with the path of examples/scripted_agent.py in it."""
    block = marked_blocks()[f"agent: {name}"]
    return block.replace(SCRIPTED_PLACEHOLDER, str(scripted_agent or SCRIPTED_AGENT))
