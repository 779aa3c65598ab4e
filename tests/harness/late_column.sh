#!/usr/bin/env bash
# late_column.sh CSV MPIRUN... SPBENCH: a results file written before the `attention` column (runtime/csv.h,
# late_columns) still takes GLA's rows, resumes them, and refuses Gated DeltaNet's with one error naming the column.
set -u
csv=$1; shift
cmd=("$@")
args=(operator --backend cpu -L 64 -H 2 --dk 8 --dv 8 -w 0 -n 1)
fail() { echo "FAIL: $1"; exit 1; }
rm -f "$csv"
timeout 60 "${cmd[@]}" "${args[@]}" -m dp --csv "$csv" > /dev/null 2>&1 || fail "the GLA run failed"
# The same file as an older spbench wrote it: no attention column.
awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "attention") c = i }
  { out = ""; for (i = 1; i <= NF; i++) if (i != c) out = out (out == "" && i == 1 ? "" : (i == 1 ? "" : OFS)) $i; print out }' \
  "$csv" > "$csv.old" && mv "$csv.old" "$csv"
grep -q attention "$csv" && fail "the column is still there"
out=$(timeout 60 "${cmd[@]}" "${args[@]}" -m dp --csv "$csv" 2>&1) || fail "the GLA rerun failed: $out"
printf '%s\n' "$out" | grep -q "skipped" || fail "the GLA rerun measured again: $out"
out=$(timeout 60 "${cmd[@]}" "${args[@]}" -m lasp1 --csv "$csv" 2>&1) || fail "a new GLA row was refused: $out"
[ "$(grep -vc '^level,' "$csv")" -eq 4 ] || fail "expected 4 GLA rows"
out=$(timeout 60 "${cmd[@]}" "${args[@]}" -m dp --attention gdn --csv "$csv" 2>&1) && fail "a GDN row went into the old file"
printf '%s\n' "$out" | grep -q "written before the \`attention\` column" || fail "the error does not name the column: $out"
[ "$(grep -vc '^level,' "$csv")" -eq 4 ] || fail "the refused run wrote rows"
echo LATE_COLUMN_OK
