#!/usr/bin/env bash
# The examples as a user gets them: `npm pack` this package, install the
# tarball (and each example's other dependencies, from the registry) into a
# copy of each example outside this repository, then type-check them, import
# every entry point from plain Node, dry-run the Worker's deploy and run the
# examples' own tests against a real Postgres.
#
# Postgres: EXAMPLES_POSTGRES_URL (an admin URL), default the local server at
# 127.0.0.1:5432 (with a password, which Hyperdrive requires even where the
# server trusts local logins). Each example gets a database of its own, dropped at the end.
set -euo pipefail
# shellcheck source=scripts/pack-tarball.sh
source "$(dirname "${BASH_SOURCE[0]}")/pack-tarball.sh"
cd "$(dirname "$0")/.."
root=$PWD
admin_url=${EXAMPLES_POSTGRES_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false

work=$(mktemp -d)
# Named here, not where they are made: database_for runs in a command
# substitution, a subshell, whose changes to this list would be lost.
database_name() { echo "skiplock_example_$1_$$"; }
databases=("$(database_name worker)" "$(database_name node)")
sql() { node -e "
  const { Client } = require('pg');
  const c = new Client({ connectionString: process.argv[1] });
  c.connect().then(() => c.query(process.argv[2])).then(() => c.end(), (e) => { console.error(e.message); process.exit(1); });
" "$admin_url" "$1"; }
cleanup() {
  for db in "${databases[@]}"; do sql "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true; done
  rm -rf "$work"
}
trap cleanup EXIT

if ! sql 'SELECT 1'; then
  echo "test-examples: no Postgres answers at $admin_url: start one or set EXAMPLES_POSTGRES_URL" >&2
  exit 1
fi

echo "== npm pack"
pack_into "$work"
tarball=$(ls "$work"/skiplock-*.tgz)
echo "packed $(basename "$tarball"): $(tar -tzf "$tarball" | wc -l) files"
if tar -tzf "$tarball" | grep -vE '^package/(dist/|migrations/|README.md$|LICENSE$|package.json$)'; then
  echo "test-examples: the tarball holds files outside dist, migrations, README and LICENSE (above)" >&2
  exit 1
fi

database_for() {
  local name
  name=$(database_name "$1")
  sql "CREATE DATABASE $name"
  node -e "const u = new URL(process.argv[1]); u.pathname = '/' + process.argv[2]; console.log(u.href)" "$admin_url" "$name"
}

for example in worker node; do
  echo "== examples/$example: install the tarball"
  mkdir "$work/$example"
  (cd "$root/examples/$example" && git ls-files --cached --others --exclude-standard | tar -cf - -T -) | tar -xf - -C "$work/$example"
  cd "$work/$example"
  npm install --no-audit --no-fund --loglevel=error "$tarball"
done

echo "== every entry point from plain Node, no loader"
cd "$work/node"
for entry in skiplock skiplock/worker skiplock/drain skiplock/node-worker skiplock/client skiplock/pg; do
  node --input-type=module -e "const m = await import('$entry'); if (Object.keys(m).length === 0) throw new Error('$entry exports nothing'); console.log('$entry:', Object.keys(m).length, 'exports');"
done
npx skiplock help >/dev/null

echo "== examples/worker: wrangler types, typecheck, deploy --dry-run, tests in workerd"
cd "$work/worker"
npm run --silent types
npm run --silent typecheck
npm run --silent deploy:dry-run
EXAMPLE_DATABASE_URL=$(database_for worker) npm test

echo "== examples/node: typecheck, tests"
cd "$work/node"
npm run --silent typecheck
EXAMPLE_DATABASE_URL=$(database_for node) npm test
echo "== examples: all passed"
