"""docket config show: the effective docket.toml; and the commented default `docket init` writes."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from .context import Context
from .output import emit, shown
from .parsing import command, group

__all__ = ["register", "write_default_config"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    config = group(nouns, "config", "the repository's docket.toml", "docket config show --json")
    command(config, "show", config_show, common,
            "print the effective configuration (durations in --json are milliseconds, in *_ms keys)",
            "docket config show --json")


def config_show(ctx: Context) -> int:
    from ..adapters.world.config_file import config_path, find_config, load_config

    path = find_config(Path.cwd())
    config = load_config(path)
    from .output import warn

    for code, message in config.warnings():
        warn(code, message)
    document = {"file": str(path) if path else None, "config": config.model_dump(mode="json")}
    if path:
        heading = f"# from {shown(path)}"
    else:
        expected = config_path(Path.cwd())
        heading = f"# defaults (no {shown(expected)})" if expected else "# defaults (not in a git checkout)"
    emit(ctx.json, document, "\n".join([heading, *_as_toml(document["config"])]))
    return 0


def write_default_config() -> tuple[Path | None, bool]:
    """The repository's docket.toml path (None outside a checkout), and whether the commented default was written."""
    from ..adapters.world.config_file import config_path, write_default

    path = config_path(Path.cwd())
    if path is None:
        return None, False
    return path, write_default(path.parent)


def _as_toml(config: dict[str, Any]) -> list[str]:
    """The effective configuration in docket.toml's own terms, durations written back as text."""
    lines = [f"agent = {_value(config['default_agent'])}"] if config["default_agent"] else []
    lines.append(f"artifact_dir = {_value(config['artifact_dir'])}" if config["artifact_dir"] is not None
                 else "# artifact_dir: not set")
    for table in ("agents", "checks"):
        for name, settings in config[table].items():
            lines.append(f"\n[{table}.{_key(name)}]")
            lines += [f"{key.removesuffix('_ms')} = {_value(settings[key], key)}" for key in _in_file_order(settings)
                      if settings[key] not in (None, {}, [])]
    for section in ("worktree", "run", "integration"):
        if section not in config:
            continue
        lines.append(f"\n[{section}]")
        lines += [f"{key.removesuffix('_ms')} = {_value(value, key)}" if value is not None
                  else f"# {key.removesuffix('_ms')}: not set" for key, value in config[section].items()]
    if config.get("hooks"):
        lines.append("\n[hooks]")
        for selector, hook in config["hooks"].items():
            settings = ", ".join(f"{key.removesuffix('_ms')} = {_value(hook[key], key)}"
                                 for key in _in_file_order(hook) if hook[key] not in (None, {}, []))
            lines.append(f"{_key(selector)} = {{ {settings} }}")
    return lines


def _in_file_order(settings: dict[str, Any]) -> list[str]:
    return sorted(settings, key=lambda key: key != "command")  # the command first, as people write it


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else shown(json.dumps(name, ensure_ascii=False))


def _value(value: Any, key: str = "") -> str:
    from ..domain.values import format_duration

    if key.endswith("_ms"):
        return json.dumps(format_duration(value))
    if isinstance(value, dict):  # an inline table: `{ NAME = "value" }`, not JSON's `{"NAME": "value"}`
        return "{ " + ", ".join(f"{_key(name)} = {_value(item)}" for name, item in value.items()) + " }"
    return shown(json.dumps(value, ensure_ascii=False))
