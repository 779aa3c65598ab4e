# What the scripts' fault tests share (sourced): a scratch folder, the sweep started in a process group of its own,
# and the checks. Usage of the drivers: bash DRIVER SPBENCH_DIR [ARGS].
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export SPB_BUILD=$1
TMP=$(mktemp -d)
SWEEP_PID=""
cleanup() {
  if [ -n "$SWEEP_PID" ] && kill -0 "$SWEEP_PID" 2>/dev/null; then kill -KILL -- "-$SWEEP_PID" 2>/dev/null || true; fi
  local p
  for p in $(pgrep -f -- "$TMP/" || true); do kill -KILL "$p" 2>/dev/null || true; done  # this test's own: they name its folder
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- the sweep's output:"; cat "$TMP/log" 2>/dev/null || true; exit 1; }

# start_sweep VAR=VALUE...: scripts/sweep_cpu.sh in the background, its output in $TMP/log. Job control makes it a
# process group of its own with SIGINT not ignored (a script's background job would have SIGINT ignored).
start_sweep() {
  set -m
  env "$@" bash "$ROOT/scripts/sweep_cpu.sh" >"$TMP/log" 2>&1 &
  SWEEP_PID=$!
  set +m
}

# wait_sweep SECONDS: waits for the sweep to end; SWEEP_RC its exit status, SWEEP_S the seconds it took.
wait_sweep() {
  local t0=$SECONDS
  while kill -0 "$SWEEP_PID" 2>/dev/null; do
    [ $((SECONDS - t0)) -le "$1" ] || fail "the sweep is still running $1 s later"
    sleep 0.1
  done
  SWEEP_RC=0
  wait "$SWEEP_PID" || SWEEP_RC=$?
  SWEEP_S=$((SECONDS - t0))
}

# csv_whole FILE: every line ends in '\n' and has the header's number of fields (commas inside quotes aside).
csv_whole() {
  [ -s "$1" ] || return 0
  [ "$(tail -c 1 "$1" | od -An -c | tr -d ' ')" = '\n' ] || fail "$1 ends in a half line: $(tail -c 200 "$1")"
  awk 'function fields(s,   n, q, i, c) {
         n = 1; q = 0
         for (i = 1; i <= length(s); i++) { c = substr(s, i, 1); if (c == "\"") q = !q; else if (c == "," && !q) n++ }
         return n }
       NR == 1 { want = fields($0); next }
       fields($0) != want { printf "line %d has %d fields, the header %d\n", NR, fields($0), want; bad = 1 }
       END { exit bad }' "$1" || fail "$1 holds lines that are not whole rows"
}

# no_process_left: none of this test's processes (mpirun and its ranks name $TMP in their arguments) is running.
no_process_left() {
  local left
  left=$(pgrep -a -f -- "$TMP/" || true)
  [ -z "$left" ] || fail "processes left after the sweep ended: $left"
}
