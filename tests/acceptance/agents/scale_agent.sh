#!/bin/sh
# A fast, well-behaved agent for the scale-out test (a shell, so a session costs little CPU).
# It keeps the chaos agent's lock records (agents/chaos_agent.py): an exclusive lock per agent
# slot and per run, held while it lives, any lock already taken is written to violations.log,
# and every start is appended to starts.log as "<run_id> <agent_id> <pid>".
set -u
PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"
exec 8>"$CHAOS_DIR/locks/agent-$OFFICE_AGENT_ID.lock"
flock -n 8 || echo "agent-$OFFICE_AGENT_ID.lock $$" >>"$CHAOS_DIR/violations.log"
exec 9>"$CHAOS_DIR/locks/run-$OFFICE_RUN_ID.lock"
flock -n 9 || echo "run-$OFFICE_RUN_ID.lock $$" >>"$CHAOS_DIR/violations.log"
echo "$OFFICE_RUN_ID $OFFICE_AGENT_ID $$" >>"$CHAOS_DIR/starts.log"
cat >/dev/null
sleep "${SCALE_SESSION_S:-0}"  # a session's length (no CPU), as a real agent takes a while
echo '{"status": "ok", "summary": "done"}'
