"""Shell completion scripts, generated from the argument parser itself."""

from __future__ import annotations

import argparse


def _tree(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Map 'noun' or 'noun verb' to the words that may follow it."""
    out: dict[str, list[str]] = {}

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        words = [o for a in p._actions for o in a.option_strings if o.startswith("--")]
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    words.append(name)
                    walk(sub, f"{path} {name}".strip())
        out[path] = sorted(set(words))

    walk(parser, "")
    return out


def script(shell: str) -> str:
    from .app import build_parser

    tree = _tree(build_parser())
    cases = "\n".join(f'        "{k}") words="{" ".join(v)}" ;;' for k, v in sorted(tree.items()))
    bash = f"""_docket() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" w words
    for w in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        case "$w" in -*) ;; *) [[ -n "$path" ]] && path="$path $w" || path="$w" ;; esac
    done
    case "$path" in
{cases}
        *) words="" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _docket docket"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash
    return bash
