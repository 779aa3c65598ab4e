#!/usr/bin/env bash
# fault_case.sh [options] -- COMMAND...: one fault-injection case (tests/harness/fault_tests.cmake).
#   --rc N           the exit status the command must end with (default 2)
#   --error REGEX    it must print exactly one "spbench: error:" line, matching REGEX (with --rc 2, required)
#   --csv FILE       afterwards FILE, where it exists, must be whole: every line has the header's field count and the
#                    file ends in a newline (may be given more than once)
#   --setup CMD      run CMD (sh -c) before the command; a setup that exits 77 skips the case
#   --cleanup CMD    run CMD (sh -c) afterwards, whatever happened
#   --output REGEX   the output must also match REGEX (grep -E)
# The command runs under `timeout 30`: a case that hangs fails.
set -u
rc_want=2 regex="" setup="" cleanup="" output_re=""
csvs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --rc) rc_want=$2; shift 2 ;;
    --error) regex=$2; shift 2 ;;
    --csv) csvs+=("$2"); shift 2 ;;
    --setup) setup=$2; shift 2 ;;
    --cleanup) cleanup=$2; shift 2 ;;
    --output) output_re=$2; shift 2 ;;
    *) echo "fault_case.sh: unknown option $1"; exit 1 ;;
  esac
done
shift
[ -n "$cleanup" ] && trap 'sh -c "$cleanup"' EXIT
if [ -n "$setup" ]; then
  sh -c "$setup"; s=$?
  [ "$s" -eq 77 ] && { echo "SKIP: the setup cannot run here"; exit 77; }
  [ "$s" -eq 0 ] || { echo "FAIL: the setup failed ($s)"; exit 1; }
fi
start=$(date +%s)
out=$(timeout 30 "$@" 2>&1); rc=$?
took=$(( $(date +%s) - start ))
fail() { printf 'FAIL: %s\n--- output (exit %d, %d s) ---\n%s\n' "$1" "$rc" "$took" "$out"; exit 1; }
[ "$rc" -eq 124 ] && fail "the command hung (30 s)"
[ "$rc" -eq "$rc_want" ] || fail "exit status $rc, expected $rc_want"
printf '%s' "$out" | grep -qiE 'core dumped|segmentation fault|internal error' && fail "crashed"
lines=$(printf '%s\n' "$out" | grep -c '^spbench: error:')
if [ -n "$regex" ]; then
  [ "$lines" -eq 1 ] || fail "expected exactly one 'spbench: error:' line, got $lines"
  printf '%s\n' "$out" | grep -m1 '^spbench: error:' | grep -qE -- "$regex" || fail "the error does not match: $regex"
elif [ "$rc_want" -eq 0 ]; then
  [ "$lines" -eq 0 ] || fail "an error line in a run that should succeed"
fi
[ -z "$output_re" ] || printf '%s\n' "$out" | grep -qE -- "$output_re" || fail "the output does not match: $output_re"
for f in ${csvs[@]+"${csvs[@]}"}; do
  [ -f "$f" ] || continue
  if [ -s "$f" ] && [ "$(tail -c1 "$f" | od -An -c | tr -d ' ')" != '\n' ]; then fail "$f ends without a newline"; fi
  bad=$(awk -F, 'NR == 1 { n = NF } NF != n { print FILENAME ":" NR ": " NF " fields, the header has " n; exit }' "$f")
  [ -z "$bad" ] || fail "$bad"
done
printf 'ok (exit %d, %d s): %s\n' "$rc" "$took" "$(printf '%s\n' "$out" | grep -m1 '^spbench: error:')"
