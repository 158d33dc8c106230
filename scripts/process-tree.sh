# Shell helpers the CI scripts share to find and stop what they started (sourced, not run).

# Every process below $1, found through parent ids.
descendants() {
  ps -eo pid=,ppid= | awk -v root="$1" '
    { parent[$1] = $2 }
    END {
      found[root] = 1
      do { grew = 0; for (p in parent) if (!(p in found) && (parent[p] in found)) { found[p] = 1; grew = 1 } } while (grew)
      for (p in found) if (p != root) print p
    }'
}

# Stops the process group led by $1 if it still runs: SIGTERM, then SIGKILL 5 s later.
stop_group() {
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill -TERM -- "-$1" 2>/dev/null || true
    sleep 5
    kill -KILL -- "-$1" 2>/dev/null || true
  fi
}
