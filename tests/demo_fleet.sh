#!/usr/bin/env bash
# `make demo-fleet`: two machines on one run, shown on this one. Two clones ("alpha" and "beta", each its own host id
# and data folder) of one bare remote, one PostgreSQL ledger (a throwaway cluster on a local port), a supervisor on
# each. alpha drives a run while beta stands by; then alpha is killed mid-run and beta takes the run over once
# alpha's lease expires, and delivers it. Needs PostgreSQL's server programs (Debian: apt-get install postgresql).
set -euo pipefail

docket_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${DOCKET_PYTHON:-python3}
cluster=("$python" "$docket_root/tests/postgres_cluster.py")
if ! missing=$("${cluster[@]}" available); then
    echo "demo-fleet: PostgreSQL: $missing (Debian: apt-get install postgresql)" >&2
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/docket-fleet.XXXXXX")
chmod 755 "$work"  # as root, the cluster's server runs as the postgres user, which must reach its folder
supervisor=""
cleanup() {
    [ -z "$supervisor" ] || kill -TERM "$supervisor" 2>/dev/null || true
    [ -z "$supervisor" ] || wait "$supervisor" 2>/dev/null || true
    "${cluster[@]}" stop "$work/pg" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com
unset DOCKET_LEDGER DOCKET_FAULT DOCKET_NOW DOCKET_TESTING DOCKET_DATABASE_URL DOCKET_HOST

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '%s$ %s\n' "${where:+[$where] }" "$*"; "$@"; }
expect() {  # expect WHAT ACTUAL WANTED
    [ "$2" = "$3" ] || { printf 'demo-fleet: unexpected %s: %q, wanted %q\n' "$1" "$2" "$3" >&2; exit 1; }
}
on() {  # on HOST COMMAND...: run it in that host's clone, as that host
    local host=$1; shift
    (cd "$work/$host" && where=$host DOCKET_HOST=$host XDG_DATA_HOME="$work/$host-data" show "$@")
}
count() {  # count TYPE [RUN]: events of that type in the shared ledger
    (cd "$work/alpha" && docket log ${2:+--run "$2"} --type "$1" --json) \
        | "$python" -c 'import json, sys; print(len(json.load(sys.stdin)["events"]))'
}

step "one PostgreSQL ledger for both machines: a throwaway cluster in $work/pg"
DOCKET_DATABASE_URL=$("${cluster[@]}" start "$work/pg")
export DOCKET_DATABASE_URL
echo "DOCKET_DATABASE_URL=$DOCKET_DATABASE_URL"

step "one bare remote, with a tiny program and docket.toml ([git] remote = \"origin\"), cloned by alpha and beta"
agent_block=$(awk '/<!-- agent: scripted -->/ {found = 1; next} found && /^```toml/ {inside = 1; next}
                   inside && /^```/ {exit} inside' "$docket_root/docs/agents.md")
git init -q -b main "$work/seed"
cd "$work/seed"
printf 'def greet(name):\n    return "Hello, " + name\n' > greet.py
cat > docket.toml <<TOML
agent = "scripted"

${agent_block//\/path\/to\/docket/"$docket_root"}

[checks.greets]
command = ["python3", "-c", "from greet import greet; assert greet('Ada') == 'Hello, Ada'"]
timeout = "1m"

[git]
remote = "origin"
TOML
git add -A && git commit -q -m "a tiny greeter"
git clone -q --bare "$work/seed" "$work/remote.git"
for host in alpha beta; do git clone -q "$work/remote.git" "$work/$host"; done
cat > "$work/tasks.toml" <<'TOML'
[[tasks]]
id = "default"
title = "greet the world by default"
prompt = """
sleep: 4
write greet.py: def greet(name="world"):\\n    return "Hello, " + name
"""

[[tasks]]
id = "farewell"
title = "a farewell"
prompt = 'write farewell.py: def farewell(name):\n    return "Goodbye, " + name'
TOML
cat > "$work/later.toml" <<'TOML'
[[tasks]]
id = "shout"
title = "shout"
prompt = 'write shout.py: def shout(name):\n    return name.upper()'
TOML

step "alpha starts the ledger; beta joins it (it takes the ledger's repository id)"
on alpha docket init
on beta docket init --join

step "beta supervises whatever runs come, standing by while another host drives them"
(cd "$work/beta" && DOCKET_HOST=beta XDG_DATA_HOME="$work/beta-data" \
    exec docket supervise --follow > "$work/beta.log" 2>&1) &
supervisor=$!
echo "[beta]$ docket supervise --follow &    (pid $supervisor, output in beta.log)"

step "alpha runs two tasks; the candidates and the target live on the remote"
on alpha docket go --goal "greet by default, and say goodbye" --tasks "$work/tasks.toml" --target main --id first
show git -C "$work/remote.git" log --oneline main
expect "files on the remote's main" "$(git -C "$work/remote.git" ls-tree --name-only main | tr '\n' ' ')" \
    "docket.toml farewell.py greet.py "
show git -C "$work/remote.git" for-each-ref --format='%(refname)' refs/docket/candidates/first
echo "beta's supervisor said:"
sed 's/^/  /' "$work/beta.log"
grep -q "standing by: driver/first" "$work/beta.log" || { echo "demo-fleet: beta did not stand by" >&2; exit 1; }
on beta docket status first

step "alpha's supervisor is killed mid-run (the task's merge recorded, not yet verified); beta cannot look at alpha's processes, so it takes the run over when \
alpha's lease expires (a minute), integrates from the remote and seals the receipt"
said=$(wc -l < "$work/beta.log")
echo "[alpha]$ DOCKET_FAULT=integrate:after-step docket go --goal shout --tasks later.toml --target main --id second"
set +e
(cd "$work/alpha" && DOCKET_HOST=alpha XDG_DATA_HOME="$work/alpha-data" DOCKET_FAULT=integrate:after-step \
    docket go --goal shout --tasks "$work/later.toml" --target main --id second) 2>/dev/null
killed=$?
set -e
echo "(killed: exit $killed)"
expect "exit of alpha's docket go" "$killed" 137
for _ in $(seq 1 240); do
    [ "$(count ReceiptSealed second)" = 1 ] && break
    sleep 1
done
expect "receipts of the second run" "$(count ReceiptSealed second)" 1
echo "beta's supervisor said:"
tail -n +"$((said + 1))" "$work/beta.log" | sed 's/^/  /'
show git -C "$work/remote.git" log --oneline main
expect "shout.py on the remote's main" "$(git -C "$work/remote.git" show main:shout.py | head -n 1)" \
    "def shout(name):"
on beta docket status second

step "the one ledger verifies from either clone"
on alpha docket verify
on beta docket verify
