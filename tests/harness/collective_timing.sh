#!/usr/bin/env bash
# collective_timing.sh CSV MPIRUN... SPBENCH: spbench collective's two timings on CPU ranks (DESIGN §10). The default,
# --timing latency, writes rows with timing=latency whose time (the max over ranks) is at least the mean over ranks;
# a rerun skips them, and so does --barrier-each (the older name of --timing latency). --timing back-to-back is
# still there and is another configuration (the timing is part of the resume key): it measures, timing=back_to_back,
# and its rerun is skipped.
set -u
csv=$1; shift
cmd=("$@")
rm -f "$csv"
fail() { echo "FAIL: $1"; exit 1; }
run() { timeout 60 "${cmd[@]}" collective --backend cpu -p chain,allscan -b 6K -e 12K --dv 64 -w 1 -n 3 --csv "$csv" \
          "$@" 2>&1; }
# The values of column NAME of the rows whose timing is TIMING.
col() {
  awk -F, -v name="$1" -v timing="$2" '
    NR == 1 { for (i = 1; i <= NF; i++) { if ($i == name) c = i; if ($i == "timing") t = i }; next }
    $t == timing { print $c }' "$csv"
}
rows() { grep -vc '^level,' "$csv"; }
out=$(run) || fail "the default run failed: $out"
[ "$(rows)" -eq 4 ] || fail "the default run wrote $(rows) rows, not 4 (2 patterns x 2 sizes)"
[ "$(col timing latency | wc -l)" -eq 4 ] || fail "the default run's rows are not timing=latency"
paste -d, <(col time_ms_mean latency) <(col time_ms_mean_over_ranks latency) |
  awk -F, '$2 == "" || $1 + 0 < $2 + 0 { bad = 1 } END { exit bad }' ||
  fail "a latency row without time_ms_mean_over_ranks, or with a mean over ranks above the max over ranks"
for again in "" "--timing latency" "--barrier-each"; do
  # shellcheck disable=SC2086
  out=$(run $again) || fail "rerun '$again' failed: $out"
  [ "$(printf '%s\n' "$out" | grep -c 'skipped')" -eq 4 ] || fail "rerun '$again' measured the latency rows"
done
[ "$(rows)" -eq 4 ] || fail "the reruns added rows"
out=$(run --timing back-to-back) || fail "--timing back-to-back failed: $out"
printf '%s\n' "$out" | grep -q 'skipped' && fail "--timing back-to-back was skipped: the timing is not in the key"
[ "$(col timing back_to_back | wc -l)" -eq 4 ] || fail "--timing back-to-back wrote no 4 rows of timing=back_to_back"
out=$(run --timing back-to-back) || fail "the back-to-back rerun failed: $out"
[ "$(printf '%s\n' "$out" | grep -c 'skipped')" -eq 4 ] || fail "the back-to-back rerun measured again"
[ "$(rows)" -eq 8 ] || fail "$(rows) rows at the end, not 8"
echo "COLLECTIVE_TIMING_OK"
