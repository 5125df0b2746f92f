#!/bin/sh
# A scripted agent for the crash tests: appends "<generation> <pid>" to the marker file $1 (kept outside the
# worktree, so it outlives every generation), then runs for $2 seconds (default 0) or, given $3, until the file
# $3 exists (at most $2 seconds). Exits 0.
marker=$1
seconds=${2:-0}
until_file=$3
echo "$DOCKET_GENERATION $$" >> "$marker"
if [ -z "$until_file" ]; then
    exec sleep "$seconds"
fi
ticks=$((seconds * 20))
while [ ! -e "$until_file" ] && [ "$ticks" -gt 0 ]; do
    sleep 0.05
    ticks=$((ticks - 1))
done
