#!/usr/bin/env bash
# sim_run.sh ROOT smoke|cpu_check NP DIR: the simulated build (ROOT/build-sim/spbench) under smpirun.
#   smoke      NP simulated ranks of the DGX H100 platform at the paper's shapes, every pattern and every method, with
#              the GPU's stage times: every row simulated = 1 on its platform, every time positive, the collective's
#              times growing with the state, and the simulated clock alone (the same run twice gives the same times)
#   cpu_check  NP ranks of the same build running the arithmetic (--backend cpu, small shapes): every method's
#              outputs and gradients against the single-device run, as on every other backend ("wrong results: 0")
# Exit 77 (skipped) where build-sim/spbench or smpirun is missing.
set -u
root=$1 what=$2 np=$3 dir=$4
spb=$root/build-sim/spbench
[ -x "$spb" ] && command -v smpirun >/dev/null || { echo "SKIP: no $spb (scripts/sim.sh build) or no smpirun"; exit 77; }
source "$root/scripts/sim_lib.sh"
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAIL: $1"; exit 1; }
per=$((np < 8 ? np : 8))
case $what in
  smoke)
    for run in 1 2; do
      sim dgx-h100 "$PLAT/nvidia-h200-x4.calib" "$np" collective -b 256K -e 1M --block-elems 16384 \
        --ranks-per-node "$per" -w 1 -n 3 --csv "$dir/coll$run.csv" >"$dir/coll$run.log" 2>&1 ||
        { cat "$dir/coll$run.log"; fail "collective at $np simulated ranks"; }
      sim dgx-h100 "$PLAT/nvidia-h200-x4.calib" "$np" operator -m all -B 1 -H 16 --dk 128 --dv 128 -L 16384 -K 16 \
        --ranks-per-node "$per" -w 1 -n 2 --csv "$dir/op$run.csv" >"$dir/op$run.log" 2>&1 ||
        { cat "$dir/op$run.log"; fail "operator at $np simulated ranks"; }
    done
    # col FILE NAME: the column's number in FILE's header
    col() { awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) print i; exit }' "$1"; }
    for level in coll op; do
      f=$dir/${level}1.csv
      [ "$(wc -l <"$f")" -ge 2 ] || fail "$level: no rows"
      bad=$(awk -F, -v s="$(col "$f" simulated)" -v p="$(col "$f" platform)" -v w="$(col "$f" world_size)" \
        -v t="$(col "$f" time_ms_median)" -v np="$np" \
        'NR > 1 && ($s != 1 || $p != "dgx-h100" || $w != np || !($t > 0)) { print FILENAME ":" NR; exit }' "$f")
      [ -z "$bad" ] || fail "a row not simulated on dgx-h100 at $np ranks with a positive time: $bad"
      t1=$(cut -d, -f"$(col "$f" time_ms_median)" "$f") t2=$(cut -d, -f"$(col "$f" time_ms_median)" "$dir/${level}2.csv")
      [ "$t1" = "$t2" ] || fail "$level: the same simulation twice gave different times"
    done
    f=$dir/op1.csv
    for m in dp zeco lasp2 lasp1 ring ulysses; do
      cut -d, -f"$(col "$f" method)" "$f" | grep -qx "$m" || fail "no operator row of $m"
    done
    f=$dir/coll1.csv
    grow=$(awk -F, -v m="$(col "$f" method)" -v b="$(col "$f" bytes)" -v t="$(col "$f" time_ms_median)" \
      'NR > 1 && $m == "allgather" { x[$b] = $t } END { print (x[1048576] > x[262144]) ? "yes" : "no" }' "$f")
    [ "$grow" = yes ] || fail "the all-gather of 1 MiB is not slower than that of 256 KiB"
    echo "SIM_SMOKE_OK np $np: every row simulated, the same twice, every method, times growing with the state"
    ;;
  cpu_check)
    hosts dgx-h100 >"$dir/hosts"
    OMP_NUM_THREADS=1 smpirun -np "$np" -platform "$PLAT/dgx-h100.xml" -hostfile "$dir/hosts" \
      "${SIMFLAGS[@]}" "$spb" operator --backend cpu -m all -H 4 --dk 16 --dv 16 -L 128 -K 2 -w 0 -n 1 \
      >"$dir/check.log" 2>&1 || { cat "$dir/check.log"; fail "the simulated build's CPU ranks"; }
    grep -q "^# wrong results: 0" "$dir/check.log" || { cat "$dir/check.log"; fail "a method's result was wrong"; }
    echo "SIM_CPU_CHECK_OK: every method matches the single-device run on $np ranks of the simulated build"
    ;;
  *) fail "sim_run.sh: smoke or cpu_check, not $what" ;;
esac
