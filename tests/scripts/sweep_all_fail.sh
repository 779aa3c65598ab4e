# scripts/sweep_cpu.sh at np 2 where every configuration fails (tokens per rank that spbench refuses): the sweep goes
# through every configuration, exits non-zero, and its last line counts each as failed.
source "$(dirname "$0")/lib.sh"
lengths=(0 1099511627776)
start_sweep SPB_CSV="$TMP/op.csv" SPB_CPU_LEVELS=operator SPB_CPU_WORLDS=2 SPB_CPU_LENGTHS="${lengths[*]}"
wait_sweep 30
echo "the sweep exited $SWEEP_RC after $SWEEP_S s"
[ "$SWEEP_RC" -ne 0 ] || fail "the sweep exited 0 with every configuration failing"
no_process_left
csv_whole "$TMP/op.csv"
last=$(tail -1 "$TMP/log")
n=${#lengths[@]}
[ "$last" = "sweep: $n configurations, 0 ok, $n failed, 0 skipped" ] || fail "the last line is not the count: $last"
echo "ok: $last"
