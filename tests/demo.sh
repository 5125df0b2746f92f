#!/usr/bin/env bash
# `make demo`: `docket go` for real in a throwaway repository, the scripted agent of examples/ in place of a model.
set -euo pipefail

docket_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/docket-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
repo="$work/repo"
# docket's data folder (the agents' workspaces, the checks' executions) is the demo's own too, so the user's
# (~/.local/share/docket) never holds the data of a repository the demo deleted, even when the demo stops half-way
export XDG_DATA_HOME="$work/data"
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com
unset DOCKET_LEDGER DOCKET_FAULT DOCKET_NOW DOCKET_TESTING

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
quoted() {  # the command as one would type it
    local arg line='$'
    for arg; do
        if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then line+=" $arg"; else line+=" '${arg//\'/\'\\\'\'}'"; fi
    done
    printf '%s\n' "$line"
}
show() { quoted "$@"; "$@"; }
expect_fail() {  # a command that must be refused: show its one-line error and exit code
    quoted "$@"
    set +e; "$@"; code=$?; set -e
    [ "$code" -ne 0 ] || { echo "expected a refusal"; exit 1; }
    echo "(exit $code)"
}
expect() {  # expect WHAT ACTUAL WANTED: stop the demo when something is not as it should be
    [ "$2" = "$3" ] || { printf 'demo: unexpected %s: %q, wanted %q\n' "$1" "$2" "$3" >&2; exit 1; }
}

step "a throwaway git repository in $work: a tiny Python program on main"
git init -q -b main "$repo" && cd "$repo"
printf 'def greet(name):\n    return "Hello, " + name\n' > greet.py
printf 'from greet import greet\n\nprint(greet("world"))\n' > app.py
# docket.toml: the scripted agent's block of docs/agents.md, with this checkout's path in it, and a check
# that catches a wrong greeting.
agent_block=$(awk '/<!-- agent: scripted -->/ {found = 1; next} found && /^```toml/ {inside = 1; next}
                   inside && /^```/ {exit} inside' "$docket_root/docs/agents.md")
[ -n "$agent_block" ] || { echo "demo: no scripted agent block in docs/agents.md" >&2; exit 1; }
cat > docket.toml <<TOML
agent = "scripted"

${agent_block//\/path\/to\/docket/"$docket_root"}

[checks.greets]
command = ["python3", "-c", "from greet import greet; assert greet('Ada') == 'Hello, Ada', greet('Ada')"]
timeout = "1m"
TOML
show cat docket.toml
git add -A && git commit -q -m "a tiny greeter"

step "create the ledger, and a key to sign the run's receipt with"
show docket init
mkdir ../keys
show docket key generate --out ../keys/demo

step "three tasks for the agent: 'default' gets it wrong once, 'cli' starts from the work of 'default'"
cat > ../tasks.toml <<'TOML'
[[tasks]]
id = "default"
title = "greet the world by default"
prompt = """
Give greet's name the default "world".
first attempt: write greet.py: def greet(name="world"):\\n    return "Helo, " + name
write greet.py: def greet(name="world"):\\n    return "Hello, " + name
"""

[[tasks]]
id = "farewell"
title = "a farewell"
prompt = """
Write farewell.py with a function farewell(name).
write farewell.py: def farewell(name):\\n    return "Goodbye, " + name
"""

[[tasks]]
id = "cli"
title = "greet the name given on the command line"
depends_on = ["default"]
prompt = """
Let app.py greet the name it is given, else the default.
write app.py: import sys\\n\\nfrom greet import greet\\n\\nprint(greet(*sys.argv[1:2]))
"""
TOML
show cat ../tasks.toml

step "docket go: an agent per task in parallel, each result checked, the failed one relaunched with the failure, \
then all merged into main and the receipt sealed and signed"
show docket go --goal "greet by name" --tasks ../tasks.toml --target main --parallel 3 --key ../keys/demo.key --id demo

step "main moved, and its clean checkout with it: one merge per task"
show git log --oneline --graph main
show git status --short
show ls
expect "files on main" "$(git ls-tree --name-only main | tr '\n' ' ')" "app.py docket.toml farewell.py greet.py "
expect "checkout" "$(git status --porcelain)" ""  # before the program runs (and writes its __pycache__)
show python3 app.py
show python3 app.py Ada
expect "greeting" "$(python3 app.py Ada)" "Hello, Ada"
expect "failed generations" "$(docket log --run demo --type TaskFeedbackRecorded --json \
    | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["events"]))')" 1

step "the receipt, verified offline: it needs only the exported file and the public key, no ledger, no repository"
delivered=$(git rev-parse main) first=$(git rev-list --max-parents=0 main)
mkdir ../offline && cp .git/docket/receipts/demo.intoto.jsonl ../keys/demo.pub ../offline/ && cd ../offline
show ls
show docket verify-receipt demo.intoto.jsonl --key demo.pub
# a forged copy claims the run delivered main's first commit: its signature no longer matches
python3 - demo.intoto.jsonl "$delivered" "$first" > forged.intoto.jsonl <<'PY'
import base64, json, sys
bundle, delivered, claimed = sys.argv[1:]
for line in open(bundle):
    envelope = json.loads(line)
    payload = base64.b64decode(envelope["payload"]).replace(delivered.encode(), claimed.encode())
    envelope["payload"] = base64.b64encode(payload).decode()
    print(json.dumps(envelope))
PY
expect_fail docket verify-receipt forged.intoto.jsonl --key demo.pub
cd "$repo"

step "the finished run, as the ledger tells it"
show docket status demo

step "a crash: docket go killed at a named point (after pinning a candidate, before checking it), then resumed"
echo '$ DOCKET_FAULT=go:after-pin docket go --goal "a README" --task "write README.md: # greet" --target main --id crashed | tail -n 3'
exec 3>&2  # docket's errors still show; bash's own "Killed" notice does not
set +e
{ DOCKET_FAULT=go:after-pin docket go --goal "a README" --task "write README.md: # greet" --target main --id crashed \
    2>&3 | tail -n 3; } 2>/dev/null
killed=${PIPESTATUS[0]}
set -e
echo "(killed: exit $killed)"
expect "exit of the crashed docket go" "$killed" 137
show docket status crashed
show docket go --resume crashed
expect "README on main" "$(git show main:README.md | head -n 1)" "# greet"
expect "checkout" "$(git status --porcelain --untracked-files=no)" ""  # moved with main; the __pycache__ app.py wrote stays

step "tamper with one byte of a stored event, in a copy of the ledger: verify names the position"
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

step "docket gc: what the finished runs leave (workspaces, candidate refs, executions kept for reuse) goes once \
main holds their work; the ledger keeps the record"
show docket gc --apply
expect "workspaces left" "$(find "$XDG_DATA_HOME/docket/workspaces" -mindepth 3 -maxdepth 3 | wc -l | tr -d ' ')" 0

step "finally: the real ledger verifies, and here is the status"
show docket verify
show docket status
