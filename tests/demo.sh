#!/usr/bin/env bash
# `make demo`: a scripted scenario through the real docket CLI in a throwaway repository.
set -euo pipefail

work=$(mktemp -d "${TMPDIR:-/tmp}/docket-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
repo="$work/repo"
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com
unset DOCKET_LEDGER DOCKET_FAULT DOCKET_NOW DOCKET_TESTING

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
expect_fail() {  # a command that must be refused: show its one-line error and exit code
    printf '$ %s\n' "$*"
    set +e; "$@"; code=$?; set -e
    [ "$code" -ne 0 ] || { echo "expected a refusal"; exit 1; }
    echo "(exit $code)"
}

step "a throwaway git repository in $work"
git init -q -b main "$repo" && cd "$repo"
echo "print('hello')" > app.py && git add app.py && git commit -q -m "first commit"

step "create the ledger (idempotent)"
show docket init
show docket init

step "open a run: the effector pins main's commit as the base"
show docket run open --target main --goal "make the greeting configurable" --budget 2h --id demo
expect_fail docket run open --target no-such-branch --goal "doomed" --id doomed

step "plan a task, register a worker, lease its worktree"
show docket task plan demo --title "add a --name flag" --id t1
show docket worker register demo --role implementer --task t1 --id w1
show docket lease grant worktrees/w1 --worker w1 --generation 1 --ttl 10m
expect_fail docket lease grant worktrees/w1 --worker w1 --generation 1 --ttl 10m

step "relaunch the worker: generation 2 fences generation 1 and takes over the lease"
show docket worker relaunch w1
expect_fail docket lease renew worktrees/w1 --token 10 --ttl 10m
token=$(docket lease grant worktrees/w1 --worker w1 --generation 2 --ttl 10m --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
echo "fencing token of the new lease: $token (its ledger position)"
show docket lease renew worktrees/w1 --token "$token" --ttl 15m
show docket lease release worktrees/w1 --token "$token"

step "a lease that runs out: recorded as expired once its time has passed (on a pinned clock, no waiting)"
# DOCKET_NOW pins the clock only where DOCKET_TESTING=1 switches it on. t0 is later than every event so
# far (ledger time never runs backwards); later commands read the real clock again, and the ledger keeps
# their times from running back before t0 + 4 s.
t0=$(( $(date +%s) + 1 ))
after() { python3 -c 'import sys, time; print(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(sys.argv[1]))))' "$(( t0 + $1 ))"; }
show env DOCKET_TESTING=1 DOCKET_NOW="$(after 0)" docket lease grant worktrees/scratch --worker w1 --generation 2 --ttl 3s
expect_fail env DOCKET_TESTING=1 DOCKET_NOW="$(after 1)" docket lease expire worktrees/scratch
show env DOCKET_TESTING=1 DOCKET_NOW="$(after 4)" docket lease expire worktrees/scratch

step "pause and resume: paused time is not billed"
show docket run pause demo --reason "coffee"
show docket run resume demo

step "a crash: docket is killed after recording the intent, before pinning"
set +e; DOCKET_FAULT=run-open:after-intent docket run open --target main --goal "second run" --id crashed; echo "(killed: exit $?)"; set -e
show docket status crashed
show docket replay --apply
show docket status crashed

step "close the recovered run; every command speaks JSON for scripts"
show docket run abort crashed --reason "only here to show recovery"
docket status crashed --json | python3 -c 'import json,sys; run = json.load(sys.stdin)["run"]; print("status --json:", run["run_id"], run["status"], run["base_commit"][:12])'

step "launch an agent for a task: its own worktree, held at a gate until its identity is in the ledger"
show docket task plan demo --title "write the greeting" --id t2 --prompt "make app.py greet by name"
show docket worker launch demo --task t2 -- sh -c 'cat "$DOCKET_PROMPT_FILE"; echo; echo "print(1)" > greet.py'
show git worktree list

step "its exit pinned the worktree as a candidate commit; a check runs on exactly that commit, in its own execution"
cat >> docket.toml <<'TOML'

[checks.greets]
command = ["python3", "greet.py"]
timeout = "1m"
TOML
show docket candidate list demo
candidate=$(docket candidate list demo --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["candidates"][0]["binding_id"])')
show docket check run "${candidate:0:12}"
show docket status demo

step "the log, and the state as it was at position 6"
show docket log --run demo
show docket status demo --at 6

step "anchor the head, then verify the whole chain against it"
docket verify --json > "$work/anchor.json"
show docket verify --anchor "$work/anchor.json"

step "tamper with one byte of a stored event: verify names the position"
cp .git/docket/ledger.sqlite "$work/tampered.sqlite"
python3 - "$work/tampered.sqlite" <<'PY'
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
state = bytearray(conn.execute("SELECT state FROM stored_events WHERE rowid = 8").fetchone()[0])
state[20] ^= 1
conn.execute("UPDATE stored_events SET state = ? WHERE rowid = 8", (bytes(state),))
conn.commit()
PY
expect_fail docket verify --ledger "$work/tampered.sqlite"

step "finally: the real ledger verifies, and here is the status"
show docket verify
show docket status
