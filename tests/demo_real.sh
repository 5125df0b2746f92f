#!/usr/bin/env bash
# `make demo-real`: `docket go` with the real aider, offline: aider 0.86.2 (installed into the agent cache on first
# use) edits through a scripted model server on 127.0.0.1, as docs/agents.md configures it. No network, no API key.
set -euo pipefail

docket_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/docket-demo-real.XXXXXX")
server_pid=
cleanup() { [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
unset DOCKET_LEDGER DOCKET_FAULT DOCKET_NOW DOCKET_TESTING
export PYTHONPATH="$docket_root${PYTHONPATH:+:$PYTHONPATH}"
export OPENAI_API_KEY=sk-docket-demo-fake-key-0123456789  # the only credential aider's block lets through: fake

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
expect() {  # expect WHAT ACTUAL WANTED
    [ "$2" = "$3" ] || { printf 'demo-real: unexpected %s: %q, wanted %q\n' "$1" "$2" "$3" >&2; exit 1; }
}

step "aider 0.86.2, installed once into the agent cache (pip, its own venv)"
python "$docket_root/tests/agents/real_clis.py" --install aider
aider=$(python -c 'from tests.agents.real_clis import AIDER, cache_dir; print(AIDER.executable(cache_dir()))')

step "the scripted model server on 127.0.0.1: each task's prompt gets one file, whole"
python "$docket_root/tests/agents/aider_world.py" script > "$work/script.json"
python "$docket_root/examples/model_server.py" --script "$work/script.json" --log "$work/requests.jsonl" \
    > "$work/port" &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(head -n 1 "$work/port")"
echo "serving at $url"

step "a repository whose docket.toml is docs/agents.md's aider block, pointed at the server"
python "$docket_root/tests/agents/aider_world.py" repo "$work/repo" "$url" "$aider"
cd "$work/repo"
show cat docket.toml
show cat tasks.toml
show docket init
# the aider block lets its API key through (env_allow): docket honours that only for a docket.toml its user trusts,
# recorded outside the repository (here the demo's own configuration folder, not yours)
export XDG_CONFIG_HOME="$work/config"
show docket config trust
mkdir ../keys
show docket key generate --out ../keys/demo

step "docket go: two aiders at once, each result checked (python3 check.py), merged into main, sealed, signed"
show docket go --goal "greet and say goodbye" --tasks tasks.toml --target main --parallel 2 --key ../keys/demo.key \
    --id demo

step "main moved: one merge per task, aider's files in it"
show git log --oneline --graph main
show python3 check.py
expect "check on main" "$(python3 check.py | tr '\n' ' ')" "greet: ok farewell: ok "

step "what aider printed (its log), and what it reported (tokens) in the ledger"
show docket worker logs demo.greet
show docket status demo

step "the server saw two requests, each with the fake key and nothing else"
python3 - "$work/requests.jsonl" "$OPENAI_API_KEY" <<'PY'
import json, sys
requests = [json.loads(line) for line in open(sys.argv[1])]
for r in requests:
    print(r["method"], r["path"], "key:", "the fake one" if r["api_key"] == sys.argv[2] else r["api_key"], "->", r["reply"])
assert [r["api_key"] for r in requests] == [sys.argv[2]] * 2, requests
PY

step "the receipt, verified offline with the public key alone"
mkdir ../offline && cp .git/docket/receipts/demo.intoto.jsonl ../keys/demo.pub ../offline/ && cd ../offline
show docket verify-receipt demo.intoto.jsonl --key demo.pub
