# scripts/sweep_cpu.sh run twice into the same results folder (SPB_RESULTS_DIR, one git does not track): the second
# run measures nothing (every configuration counted as skipped, the CSV unchanged). Then, with the file's rows made
# rows of another commit, a third run keeps that file as <machine>_operator.<its sha>.csv and starts a fresh one.
source "$(dirname "$0")/lib.sh"
results=$TMP/results
run() {  # run LENGTHS
  start_sweep SPB_RESULTS_DIR="$results" SPB_MACHINE=fault SPB_CPU_LEVELS=operator SPB_CPU_WORLDS=1 \
    SPB_CPU_LENGTHS="$1"
  wait_sweep 90
}
csv=$results/fault_operator.csv
run 64
[ "$SWEEP_RC" -eq 0 ] || fail "the first run exited $SWEEP_RC"
cp "$csv" "$TMP/first.csv"
[ "$(wc -l <"$csv")" -ge 2 ] || fail "the first run wrote no row"
run 64
[ "$SWEEP_RC" -eq 0 ] || fail "the second run exited $SWEEP_RC"
last=$(tail -1 "$TMP/log")
[ "$last" = "sweep: 1 configurations, 0 ok, 0 failed, 1 skipped" ] || fail "the second run measured: $last"
cmp -s "$csv" "$TMP/first.csv" || fail "the second run changed $csv"
grep -q "already in" "$TMP/log" || fail "spbench did not say the rows were already there"

# The same rows, as another commit's (the sha column rewritten in this scratch copy).
sha=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "git_sha") c = i; next } { print $c; exit }' "$csv")
other=0000000other
sed "s/,$sha,/,$other,/" "$TMP/first.csv" >"$csv"
run 0  # a configuration spbench refuses: the file is superseded before it runs
[ -f "$results/fault_operator.$other.csv" ] || fail "the superseded file was not kept as fault_operator.$other.csv"
cmp -s "$results/fault_operator.$other.csv" <(sed "s/,$sha,/,$other,/" "$TMP/first.csv") ||
  fail "the kept file differs from the superseded one"
[ ! -s "$csv" ] || [ "$(grep -c "$other" "$csv")" -eq 0 ] || fail "the new file still holds the other commit's rows"
echo "ok: resumed, then kept the superseded file"
