# A signal (INT or TERM, the second argument) to scripts/sweep_cpu.sh at np 2 once its first row is in the CSV: the
# sweep exits non-zero within 30 s, leaves no spbench or mpirun process, its last line counts the configuration it
# stopped as failed, and the CSV is whole and still holds every row written before the signal.
source "$(dirname "$0")/lib.sh"
sig=$2
csv=$TMP/op.csv
start_sweep SPB_CSV="$csv" SPB_CPU_LEVELS=operator SPB_CPU_WORLDS=2 SPB_CPU_LENGTHS="256 1024 4096 16384"
for _ in $(seq 300); do
  [ "$(cat "$csv" 2>/dev/null | wc -l)" -lt 2 ] || break
  kill -0 "$SWEEP_PID" 2>/dev/null || fail "the sweep ended before the signal"
  sleep 0.1
done
[ "$(wc -l <"$csv")" -ge 2 ] || fail "no row in $csv after 30 s"
before=$TMP/before.csv
head -n "$(wc -l <"$csv")" "$csv" >"$before"  # the whole lines written so far
kill -0 "$SWEEP_PID" 2>/dev/null || fail "the sweep ended before the signal"
kill -"$sig" "$SWEEP_PID"
wait_sweep 30
echo "SIG$sig: the sweep exited $SWEEP_RC after $SWEEP_S s; $(($(wc -l <"$csv") - 1)) rows in the CSV"
[ "$SWEEP_RC" -ne 0 ] || fail "the sweep exited 0 after SIG$sig"
no_process_left
csv_whole "$csv"
cmp -s -n "$(stat -c %s "$before")" "$before" "$csv" || fail "rows written before the signal are lost"
last=$(tail -1 "$TMP/log")
[[ $last =~ ^sweep:\ [0-9]+\ configurations,\ [0-9]+\ ok,\ [1-9][0-9]*\ failed,\ [0-9]+\ skipped$ ]] ||
  fail "the last line does not count the stopped configuration as failed: $last"
echo "ok: $last"
