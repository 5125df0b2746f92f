"""docket config show: the effective docket.toml; and the commented default `docket init` writes."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ..console.context import Context
from ..console.output import emit, shown
from ..console.parsing import command, group
from ...domain.kernel.codes import Code

__all__ = ["register", "write_default_config"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    config = group(nouns, "config", "the repository's docket.toml", "docket config show --json")
    command(config, "show", config_show, common,
            "print the effective configuration (durations in --json are milliseconds, in *_ms keys), what it "
            "widens beyond docket's defaults, and whether you trust it",
            "docket config show --json")
    command(config, "trust", config_trust, common,
            "trust this repository's docket.toml as it is now, after reading it: what it widens (read and write "
            "extras, env_allow, network, hooks, [inbox] trusted, sandbox = \"off\") is honoured only for a "
            "docket.toml you trust, recorded by digest in ~/.config/docket/trust.toml, outside the repository",
            "docket config trust --json")


def config_show(ctx: Context) -> int:
    from ...adapters.world.files.config_file import config_path, find_config, load_config

    path = find_config(Path.cwd())
    config = load_config(path)
    from ..console.output import warn

    for code, message in config.warnings():
        warn(code, message)
    widenings = config.widenings()
    trusted = _trusted(path) if path is not None and widenings else None
    document: dict[str, Any] = {"file": str(path) if path else None, "config": config.model_dump(mode="json"),
                "widens": widenings, "trusted": trusted}
    if path:
        heading = f"# from {shown(path)}"
        if widenings:
            heading += (f"\n# it widens: {shown(', '.join(widenings))}\n# "
                        + ("trusted by you" if trusted else "NOT trusted: docket refuses to launch with it until you "
                                                             "run 'docket config trust' (config-untrusted)"))
    else:
        expected = config_path(Path.cwd())
        heading = f"# defaults (no {shown(expected)})" if expected else "# defaults (not in a git checkout)"
    emit(ctx.json, document, "\n".join([heading, *_as_toml(document["config"])]))
    return 0


def _trusted(path: Path) -> bool:
    from ...adapters.world.files.config_file import config_sha256
    from ...adapters.world.files.paths import find_git_common_dir
    from ...adapters.world.files.user_config import trusts

    common = find_git_common_dir(path.parent.absolute())
    return common is not None and trusts(common, config_sha256(path))


def config_trust(ctx: Context) -> int:
    from ...adapters.world.files.config_file import config_sha256, find_config, load_config
    from ...adapters.world.files.paths import find_git_common_dir
    from ...adapters.world.files.user_config import trust, trust_file
    from ...domain.kernel.errors import NotFound

    path = find_config(Path.cwd())
    common = find_git_common_dir(Path.cwd().absolute())
    if path is None or common is None:
        raise NotFound(Code.CONFIG_NOT_FOUND, "no docket.toml in this repository to trust ('docket init' writes one)")
    config = load_config(path)  # a file docket cannot read is never trusted
    digest = config_sha256(path)
    added = trust(common, digest, ctx.clock.now())
    widenings = config.widenings()
    said = "trusted" if added else "already trusted"
    emit(ctx.json, {"file": str(path), "sha256": digest, "repository": str(common.resolve()), "widens": widenings,
                    "added": added, "trust_file": str(trust_file())},
         f"{said}: {shown(path)} (sha256 {digest[:12]})"
         + (f"; it widens: {shown(', '.join(widenings))}" if widenings else "; it widens nothing"))
    return 0


def write_default_config() -> tuple[Path | None, bool]:
    """The repository's docket.toml path (None outside a checkout), and whether the commented default was written."""
    from ...adapters.world.files.config_file import config_path, write_default

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
    from ...domain.kernel.values import format_duration

    if key.endswith("_ms"):
        return json.dumps(format_duration(value))
    if isinstance(value, dict):  # an inline table: `{ NAME = "value" }`, not JSON's `{"NAME": "value"}`
        return "{ " + ", ".join(f"{_key(name)} = {_value(item)}" for name, item in value.items()) + " }"
    return shown(json.dumps(value, ensure_ascii=False))
