#!/usr/bin/env bash
# A new user's first run, from a fresh clone inside a folder that only its
# owner can enter (mktemp -d makes it 0700, as root's home folder is): run as
# root, the embedded Postgres must still start as its unprivileged user.
#
#   npm install          leaves `git status` clean (the lockfile is in step with package.json)
#   npm start            answers 200 on /healthz, runs a noop job to succeeded,
#                        and a Ctrl-C (SIGINT to its process group) stops every process it started
#   a vitest file        its test setup starts the embedded Postgres from the same folder
set -euo pipefail
# shellcheck source=scripts/process-tree.sh
source "$(dirname "${BASH_SOURCE[0]}")/process-tree.sh"
cd "$(dirname "$0")/.."
source_repo=$PWD
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false
unset DATABASE_URL PORT POSTGRES_PORT PROXY_PORT ADMIN_TOKEN DRAIN_EVERY_SECONDS

work=$(mktemp -d)
checkout=$work/skiplock
log=$work/npm-start.log
leader=
data_dir=

fail() {
  echo "test-root-start: $*" >&2
  [ -f "$log" ] && sed 's/^/  npm start: /' "$log" >&2
  exit 1
}

cleanup() {
  stop_group "$leader"
  # The data folder npm start moved out of the closed folder belongs to this clone only.
  case $data_dir in /*/skiplock-data-*/postgres) rm -rf "$(dirname "$data_dir")" ;; esac
  rm -rf "$work"
}
trap cleanup EXIT


echo "== fresh clone in $work ($(stat -c %a "$work"), as $(id -un))"
git clone --quiet "$source_repo" "$checkout"
git -C "$checkout" checkout --quiet --detach "$(git -C "$source_repo" rev-parse HEAD)"
cd "$checkout"

echo "== npm install leaves git status clean"
npm install --no-audit --no-fund --prefer-offline >/dev/null 2>&1 || fail "npm install failed"
dirty=$(git status --porcelain)
[ -z "$dirty" ] || fail "npm install changed the clone: $dirty"

echo "== npm start"
setsid npm start >"$log" 2>&1 &
leader=$!
for _ in $(seq 1 180); do
  grep -q 'Ctrl-C stops everything' "$log" && break
  kill -0 "$leader" 2>/dev/null || fail "npm start exited before it was up"
  sleep 1
done
grep -q 'Ctrl-C stops everything' "$log" || fail "npm start was not up within 180 s"
api=$(sed -n 's/^  API  *\(http[^ ]*\)$/\1/p' "$log")
data_dir=$(sed -n 's/^  database .* data in \([^ ]*\).*$/\1/p' "$log")
echo "up at $api, data in $data_dir"
if [ "$(id -u)" = 0 ] && ! grep -q 'the postgres user cannot enter' "$log"; then
  fail "as root in a closed folder, the banner should say where the data went and why"
fi

status=$(curl -s -o /dev/null -w '%{http_code}' "$api/healthz")
[ "$status" = 200 ] || fail "GET /healthz answered $status"

key=$(cat .data/admin-token)
json_field() { node -e 'let s="";process.stdin.on("data",(c)=>s+=c).on("end",()=>console.log(JSON.parse(s)[process.argv[1]]))' "$1"; }
id=$(curl -sf -X POST -H "authorization: Bearer $key" -H 'content-type: application/json' -d '{}' "$api/v1/queues/noop/jobs" | json_field id) ||
  fail "enqueueing a noop job failed"
job_status=
for _ in $(seq 1 12); do
  job_status=$(curl -sf -H "authorization: Bearer $key" "$api/v1/jobs/$id?wait=5" | json_field status)
  [ "$job_status" = succeeded ] && break
done
[ "$job_status" = succeeded ] || fail "noop job $id is $job_status, not succeeded"
echo "noop job $id succeeded"

echo "== Ctrl-C"
started=$(descendants "$leader")
kill -INT -- "-$leader"
for _ in $(seq 1 60); do kill -0 "$leader" 2>/dev/null || break; sleep 1; done
kill -0 "$leader" 2>/dev/null && fail "npm start still runs 60 s after SIGINT"
wait "$leader" || fail "npm start exited with code $? after SIGINT"
leader=
tail -n 1 "$log" | grep -qx 'stopped' || fail "npm start did not end with 'stopped'"
sleep 3 # tsx's esbuild helper ends a moment after it sees its parent gone
left=""
for pid in $started; do
  if kill -0 "$pid" 2>/dev/null; then left="$left $pid:$(ps -o comm= -p "$pid")"; fi
done
[ -z "$left" ] || fail "processes left after Ctrl-C:$left"
echo "stopped; none of its $(echo "$started" | wc -w) processes left"

echo "== the test setup's embedded Postgres from the same folder (test/engine/health.test.ts)"
NO_COLOR=1 npx vitest run test/engine/health.test.ts >"$work/vitest.log" 2>&1 || { cat "$work/vitest.log" >&2; fail "vitest failed"; }
grep -E 'Tests +[0-9]+ passed' "$work/vitest.log" || fail "vitest passed no test"
