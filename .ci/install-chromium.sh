#!/usr/bin/env bash
# Debian's Chromium, which the browser tests (test/browser) drive with
# playwright-core; without /usr/bin/chromium they are skipped, except in CI
# (CI=true), where they fail. Does nothing when it is already there.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi

echo "== apt-get install chromium"
"${as_root[@]}" apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
