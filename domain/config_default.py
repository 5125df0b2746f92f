"""docket.toml as docket init writes it: every setting, commented out at its default, explained."""

from __future__ import annotations

__all__ = ["DEFAULT_TOML"]


DEFAULT_TOML = '''\
# docket.toml: how docket runs coding agents in this repository (docs: docs/configuration.md).
# Every key is optional; an unknown key or a wrong type is an error naming the key and its line.
# Durations are strings like "90s", "45m", "1h30m", "2d".

# The agent `docket worker launch` starts when no --agent is given (must name an [agents.NAME] below).
# agent = "claude"

# A folder (relative to the repository root, not inside .git) where checks write what is worth keeping:
# reports, coverage. Untracked files a check writes there are copied back to the task's worktree (each
# replacing an earlier check's file at its path, hash-checked, never through a symlink), and untracked files
# there are left out of candidates.
# Not set: nothing is copied back.
# artifact_dir = "out/docket"

# Every agent, check and hook runs in a sandbox (Landlock): it writes only its workspace (a check: its execution),
# its own folders and a private TMPDIR, and reads only system folders, its PATH's installs and what it is given.
# Where the kernel has no Landlock, docket refuses to launch unless this says "off" (docs/security.md, "The sandbox").
# sandbox = "landlock"

# [agents.NAME]: one coding agent. command is an argv list, run without a shell.
# prompt says how the task's prompt reaches it:
#   "argument" (default): an argument contains {prompt}; "file": an argument contains {prompt_file};
#   "stdin": the prompt is written to the agent's standard input.
# env: extra variables; values may use {worktree}, {worker_dir} and {port} (give each worker its own config home).
# env_allow: variable names or globs (* ?) let through the credential scrub of the agent's environment.
# timeout: stop the agent after this long; idle_timeout: stop it after this long without output.
# report: "claude-json", "codex-jsonl" or "aider": read the agent's session, tokens and cost from its output when it
#   exits (AgentReported); docs/agents.md says which flags make each agent print them.
# Placeholders: {worktree} {worker_dir} {port} {prompt} {prompt_file}, and for docket's MCP server {requests}
#   {mcp_config} {docket}; write {{ or }} for a literal brace.
# read, write: extra paths its sandbox allows (absolute or ~/..., e.g. read = ["~/.claude"]);
# network: hosts it may reach through docket's egress proxy (e.g. ["api.anthropic.com", "*.example.com:8443"]),
#   TCP ports it may connect to directly (e.g. [443]), "none" or "any"; not set: claude, codex and aider get their
#   model API's hosts, other commands "any"; checks default to "none" (ports only, as hooks).

# Tested blocks for Codex CLI, Claude Code and aider, and why each flag is there: docs/agents.md.

# [agents.claude]
# command = ["claude", "-p", "--permission-mode", "acceptEdits", "--allowedTools", "Bash,mcp__docket", "--mcp-config", "{mcp_config}", "--strict-mcp-config", "--output-format", "json"]
# prompt = "stdin"
# report = "claude-json"
# env = { CLAUDE_CONFIG_DIR = "{worker_dir}/claude" }
# env_allow = ["ANTHROPIC_API_KEY"]
# timeout = "45m"

# [agents.codex]
# command = ["codex", "exec", "--json", "--sandbox", "danger-full-access", "-c", 'mcp_servers.docket.command="{docket}"', "-c", 'mcp_servers.docket.args=["mcp", "--socket", "{requests}"]', "-c", "mcp_servers.docket.required=true", "-c", "mcp_servers.docket.startup_timeout_sec=30", "-"]  # inside docket's sandbox (docs/agents.md)
# prompt = "stdin"
# report = "codex-jsonl"
# env = { CODEX_HOME = "{worker_dir}" }
# env_allow = ["OPENAI_API_KEY", "CODEX_API_KEY"]
# timeout = "45m"
# idle_timeout = "15m"

# [agents.aider]
# command = ["aider", "--yes-always", "--no-check-update", "--no-gitignore", "--no-auto-commits", "--no-dirty-commits", "--no-analytics", "--no-pretty", "--chat-history-file", "{worker_dir}/aider.chat.history.md", "--input-history-file", "{worker_dir}/aider.input.history", "--message-file", "{prompt_file}"]
# prompt = "file"
# report = "aider"
# env = { HOME = "{worker_dir}", GIT_CONFIG_COUNT = "2", GIT_CONFIG_KEY_0 = "user.name", GIT_CONFIG_VALUE_0 = "aider", GIT_CONFIG_KEY_1 = "user.email", GIT_CONFIG_VALUE_1 = "aider@localhost" }
# env_allow = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]
# timeout = "1h"
# idle_timeout = "10m"

# [checks.NAME]: one check `docket check run` runs against a pinned candidate, in a fresh worktree at exactly
# the candidate's commit (its working directory). It passes when it exits 0.
# command is an argv list, run without a shell; {worktree} is that worktree's path.
# With shell = true, command is exactly one string: a script run with /bin/sh -c, taken literally
#   (no placeholders; braces are the shell's).
# timeout (default "10m"), idle_timeout, env and env_allow: as for agents; env values may use {worktree}.
# A candidate is handed off only when every required check passed on it; required = false only reports.

# [checks.tests]
# command = ["python", "-m", "pytest", "-q", "--junitxml={worktree}/out/docket/junit.xml"]
# timeout = "20m"
# junit = "out/docket/junit.xml"   # its report: the failing tests and their assertions go to the agent
# judge = "relative-to-base"       # pass when no test fails that did not fail on the run's base already
# protected = ["tests/**", "test/**", "**/conftest.py", "**/test_*.py", "**/*_test.py", "pytest.ini",
#              "pyproject.toml", "setup.cfg", "tox.ini"]
#   (the default) a candidate changing these is also checked with the base's copy of them; [] turns it off

# [checks.lint]
# command = ["ruff check . && ruff format --check ."]
# shell = true
# required = false
# timeout = "5m"

# The tables below show their defaults, commented out: a key added at the end of this file stays a
# top-level key, and lands in a table only under that table's header, uncommented.

# [worktree]
# Commands run in each new task worktree before its agent starts (argv lists, no shell).
# setup = []            # e.g. [["npm", "ci"], ["make", "deps"]]
# Ignored files copied from the main checkout into each new worktree (globs relative to the repository root).
# include = []          # e.g. [".env", "config/*.local"]
# Give each worker a free TCP port in DOCKET_PORT (and {port}).
# ports = false

# [workspace]
# Where each task's workspace (a repository of its own that borrows this repository's objects) and each check's
# execution are made: <root>/workspaces/<repository id>/<run>/<task>. An absolute path, or one under ~/.
# root = "~/.local/share/docket"   # the default: $XDG_DATA_HOME/docket

# [run]
# Default target branch of `docket run open`.
# target = "main"
# Default budget of a run: active time only (time without a supervising docket is not billed).
# budget = "4h"
# Stop a run (budget-limited, its agents stopped) once what its agents reported they used reaches this cost in US
# dollars, or this many tokens (input and output together). Only agents whose block names a report format
# (report = "claude-json", "codex-jsonl" or "aider") report any; a figure an agent did not report counts as 0.
# max_cost = 2.50
# max_tokens = 2000000
# The checks `docket go` runs at once (a task's, the base's and the merge queue's verifications share them; agents
# are counted apart, by --parallel); --checks N overrides it. Default: the machine's cores.
# checks = 4

# [integration]
# Make `docket integrate` wait until `docket approve RUN --by NAME` approved every candidate it would merge.
# approval = false
# A target branch checked out in a worktree (say main, in your own checkout): "update" moves that worktree's
# index and files to the integrated commit with the branch when they are clean (nothing staged, changed or
# untracked), and refuses (target-checked-out) otherwise; "refuse" never moves a checked-out branch.
# checked_out_target = "update"
# Run the required checks once on the merged result of up to this many queued steps rather than on each step's
# merge; a batch that fails is bisected (deterministically) to the first step whose merge fails, which goes back
# to its task as feedback while the steps before it land and the steps after it are merged again. 1: each step.
# Default: 4 while the queue speculates (a batch then forms only from steps that piled up while every verification
# was busy: a step that finds one free is checked alone), else 1.
# batch = 4
# Keep up to this many verifications in flight: a step (or batch) is checked on the merge of everything queued
# ahead of it while those are still being checked; when one ahead fails, only what was built on it is cancelled
# and checked again, and a step lands as soon as it and everything ahead of it passed. Default: the run's check
# concurrency ([run] checks, --checks; the machine's cores). 1: one verification at a time, as before.
# speculate = 4

# [candidates]
# A file the agent leaves larger than this (and not already the base's at its path) refuses the pin
# (file-too-large, naming the path and its size) before any object of it is written; the task's generation
# fails with that feedback and the run goes on. Sizes: a number of bytes, or "100MB", "1GiB", "512KiB".
# max_file_size = "100MiB"

# [ledger]
# The ledger in a PostgreSQL database that several machines share, instead of the file in the repository's docket
# folder (DOCKET_DATABASE_URL, when set, is used instead). No password here, the file is committed: PGPASSWORD or
# ~/.pgpass hold it. Each machine keeps its own views of it.
# url = "postgresql://docket@db.internal/docket"

# [git]
# A remote (its name in the repository's config) that several machines share: a run's base is that remote's
# target branch, every candidate is pushed there under refs/docket/candidates/... (create-only), and the target is
# moved there by compare-and-swap, nothing forced; your clone's own branch is yours to pull. Unset: this repository.
# remote = "origin"

# [inbox]
# Who may answer an agent's question (docket answer) besides the local user: names given with --as.
# trusted = []          # e.g. ["ada@example.com"]
# How long a question waits for its answer (unset: no deadline), and what happens then: "wait" on, answer
# "default" (the first of its choices, else default_answer), or "fail" the task's generation.
# deadline = "2h"
# on_deadline = "wait"
# default_answer = "No one answered in time: decide yourself, and say what you decided."
# What a follow-up task an agent proposes becomes: "queue" it for a person, "accept" it, or "refuse" it.
# proposals = "queue"

# [hooks]
# A command run once for each matching event of a run that `docket go` supervises, with the event as
# JSON on stdin ({position, stream, type, recorded_at, payload}) and DOCKET_RUN, DOCKET_EVENT, DOCKET_POSITION,
# DOCKET_HOOK, DOCKET_TASK, DOCKET_LEDGER, DOCKET_HOST in a scrubbed environment; cwd is the repository root; no shell.
# Keys: task-finished, check-failed, run-finished, needs-attention (a task failed, a merge conflicted or was
# rejected, the target moved, the budget ran out, an effect's outcome is unknown), or an event type name
# (TaskFinished, or TaskFinished.v1 for one version). Values: an argv list, or a table with command,
# timeout (default "60s") and env_allow. A hook's failure is recorded and never stops the run.
# run-finished = ["notify-send", "docket run finished"]
# needs-attention = { command = ["./scripts/page-me.sh"], timeout = "30s", env_allow = ["PAGER_TOKEN"] }
'''
