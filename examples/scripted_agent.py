"""A scripted coding agent: it makes the edits a task's prompt spells out, line by line, and nothing else.

docket runs it like any agent (docs/agents.md, "The scripted agent"); the demo and the tests use it
where a real agent would need a model. Standard library only:

    python3 examples/scripted_agent.py [--prompt TEXT | --prompt-file PATH]   (else the prompt is read from stdin)

Every line of the prompt that is a directive is carried out, in order; any other line is prose and
ignored. Leading spaces do not matter. Paths are relative to the working directory (the task's
worktree): an absolute path, a '..' part, a path into .git or through a symbolic link is refused, and
then nothing at all is done (exit 2).

    write PATH: TEXT          PATH holds exactly TEXT and a newline (made, with its folders, if missing)
    append PATH: TEXT         add the line TEXT at the end of PATH, unless PATH already has that line
    delete PATH               remove the file PATH (nothing to do if it is already gone)
    say: TEXT                 print TEXT
    sleep: SECONDS            wait that long (a number, e.g. 2 or 0.5)
    commit                    git add -A and git commit, as agents that commit their own work do
    commit: MESSAGE           the same with that commit message
    exit: CODE                stop here and exit with CODE (0-255)
    hang                      sleep forever, printing nothing (for idle-timeout tests)
    wait for PATH             wait until the file PATH exists (a test makes it), then go on
    fail first attempt        on a first attempt, exit 1 after everything else was done
    first attempt: DIRECTIVE  on a first attempt, do DIRECTIVE instead of the directive on the next line;
                              on a retry, skip it and do the next one

In TEXT and MESSAGE, \\n stands for a newline, \\t for a tab and \\\\ for a backslash.

A retry is a prompt that carries docket's feedback on an earlier attempt: docket appends
"Your previous attempt (generation N) was not accepted: ..." to the task's prompt (domain/task.py,
retry_prompt). Directives are read only from the text before that feedback, so whatever a failed
check printed cannot steer the agent.

The same prompt on the same tree always gives the same files: every directive can be done twice with
the result of doing it once (write replaces, append adds a line only once, delete and commit do
nothing the second time, and a commit has a fixed author and date). So an agent killed half-way and
started again on its worktree ends with the tree an uninterrupted run makes.

It prints one line per directive ("wrote greet.py") and exits 0 unless told otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RETRY_MARKER = "Your previous attempt (generation "  # the words docket's retry_prompt puts before its feedback
COMMIT_IDENTITY = {"GIT_AUTHOR_NAME": "scripted agent", "GIT_AUTHOR_EMAIL": "scripted-agent@example.invalid",
                   "GIT_COMMITTER_NAME": "scripted agent", "GIT_COMMITTER_EMAIL": "scripted-agent@example.invalid",
                   "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
DEFAULT_COMMIT_MESSAGE = "work of the scripted agent"

_EDIT = re.compile(r"(write|append) (\S+?):(?: (.*))?")
_DELETE = re.compile(r"delete (\S+)")
_WAIT_FOR = re.compile(r"wait for (\S+)")
_WITH_VALUE = re.compile(r"(say|sleep|exit|commit):(?: (.*))?")
_FIRST_ATTEMPT = re.compile(r"first attempt: (.+)")
_BARE = frozenset({"commit", "hang", "fail first attempt"})


class Refused(Exception):
    """A directive the agent will not carry out: nothing is done at all."""


@dataclass(frozen=True)
class Directive:
    verb: str  # write append delete wait-for say sleep commit exit hang fail-first-attempt
    path: str | None = None
    text: str = ""


def unescape(text: str) -> str:
    """\\n, \\t and \\\\ decoded; any other backslash is kept as it is."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}.get(m[1], m[0]), text)


def parse_line(line: str) -> Directive | None:
    """The directive a line holds, or None for prose."""
    line = line.strip()
    if line in _BARE:
        return Directive(line.replace(" ", "-"))
    if match := _EDIT.fullmatch(line):
        return Directive(match[1], match[2], unescape(match[3] or ""))
    if match := _DELETE.fullmatch(line):
        return Directive("delete", match[1])
    if match := _WAIT_FOR.fullmatch(line):
        return Directive("wait-for", match[1])
    if match := _WITH_VALUE.fullmatch(line):
        return Directive(match[1], None, unescape(match[2] or ""))
    return None


def is_retry(prompt: str) -> bool:
    return RETRY_MARKER in prompt


def plan(prompt: str) -> list[Directive]:
    """The directives to carry out, in order, for this attempt (first or retry)."""
    own = prompt.split(RETRY_MARKER, 1)[0]  # the task's own prompt, without docket's feedback
    retry = is_retry(prompt)
    directives: list[Directive] = []
    skip_next = False
    for line in own.splitlines():
        first_only = _FIRST_ATTEMPT.fullmatch(line.strip())
        directive = parse_line(first_only[1]) if first_only else parse_line(line)
        if directive is None:
            continue
        if first_only:
            if not retry:
                directives.append(directive)
                skip_next = True  # instead of the next directive
            continue
        if skip_next:
            skip_next = False
            continue
        directives.append(directive)
    return directives


def check_path(root: Path, name: str) -> Path:
    """root/name, if name is a plain relative path inside root that neither enters .git nor crosses a symlink."""
    if name.startswith("/") or os.path.isabs(name):
        raise Refused(f"{name}: an absolute path; name a file inside the worktree")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if not parts:
        raise Refused(f"{name!r}: names the worktree itself, not a file in it")
    if ".." in parts:
        raise Refused(f"{name}: '..' leaves the worktree")
    if any(part.lower() == ".git" for part in parts):
        raise Refused(f"{name}: git's own files are not the agent's to edit")
    path = root
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise Refused(f"{name}: {path.relative_to(root)} is a symbolic link; the agent does not follow links")
    return path


def check(directives: list[Directive], root: Path) -> None:
    for directive in directives:
        if directive.path is not None:
            check_path(root, directive.path)
        if directive.verb == "sleep":
            try:
                seconds = float(directive.text)
            except ValueError:
                raise Refused(f"sleep: {directive.text!r} is not a number of seconds") from None
            if not 0 <= seconds < 86400:
                raise Refused(f"sleep: {directive.text} is not between 0 and 86400 seconds")
        if directive.verb == "exit" and not (directive.text.isdigit() and int(directive.text) <= 255):
            raise Refused(f"exit: {directive.text!r} is not an exit code from 0 to 255")


def replace_file(path: Path, text: str) -> None:
    """Write text to path all at once (a kill leaves the old file or the new one, never half of it), keeping the
    mode of a file that was there."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def say(line: str) -> None:
    print(line, flush=True)


def commit(root: Path, message: str) -> None:
    env = {**os.environ, **COMMIT_IDENTITY}
    subprocess.run(["git", "add", "-A"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    staged = subprocess.run(["git", "diff", "--cached", "--quiet"], cwd=root, env=env)
    if staged.returncode == 0:
        say("nothing to commit")
        return
    subprocess.run(["git", "commit", "-q", "--no-verify", "-m", message], cwd=root, env=env, check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()
    say(f"committed {head}")


def carry_out(directive: Directive, root: Path) -> int | None:
    """Do one directive; an exit code when the agent is to stop here."""
    path = check_path(root, directive.path) if directive.path is not None else None
    if directive.verb == "write":
        replace_file(path, directive.text + "\n")
        say(f"wrote {directive.path}")
    elif directive.verb == "append":
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if directive.text in old.splitlines():
            say(f"{directive.path} already has that line")
        else:
            replace_file(path, old + ("" if old.endswith("\n") or not old else "\n") + directive.text + "\n")
            say(f"appended to {directive.path}")
    elif directive.verb == "delete":
        if path.exists():
            path.unlink()
            say(f"deleted {directive.path}")
        else:
            say(f"{directive.path} is already gone")
    elif directive.verb == "wait-for":
        say(f"waiting for {directive.path}")
        while not path.exists():
            time.sleep(0.05)
        say(f"{directive.path} is there")
    elif directive.verb == "say":
        say(directive.text)
    elif directive.verb == "sleep":
        say(f"sleeping {directive.text}s")
        time.sleep(float(directive.text))
    elif directive.verb == "commit":
        commit(root, directive.text or DEFAULT_COMMIT_MESSAGE)
    elif directive.verb == "exit":
        say(f"exiting with {int(directive.text)}")
        return int(directive.text)
    elif directive.verb == "hang":
        while True:
            time.sleep(3600)
    return None


def run(prompt: str, root: Path) -> int:
    directives = plan(prompt)
    try:
        check(directives, root)
    except Refused as e:
        print(f"scripted_agent: refused: {e}", file=sys.stderr, flush=True)
        return 2
    retry = is_retry(prompt)
    say("retry: the previous attempt was not accepted" if retry else "first attempt")
    for directive in directives:
        if directive.verb == "fail-first-attempt":
            continue
        code = carry_out(directive, root)
        if code is not None:
            return code
    if not retry and any(directive.verb == "fail-first-attempt" for directive in directives):
        say("failing the first attempt, as the prompt asks")
        return 1
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripted_agent", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--prompt", metavar="TEXT", help="the prompt itself")
    source.add_argument("--prompt-file", metavar="PATH", help="a file holding the prompt")
    args = parser.parse_args(argv)
    if args.prompt is not None:
        prompt = args.prompt
    elif args.prompt_file is not None:
        prompt = Path(args.prompt_file).read_text(encoding="utf-8")
    else:
        prompt = sys.stdin.read()
    return run(prompt, Path.cwd())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
