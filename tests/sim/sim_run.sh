#!/usr/bin/env bash
# sim_run.sh ROOT smoke|cpu_check|network|model|timing|gdn|rank_error NP DIR: the simulated build
# (ROOT/build-sim/spbench) under smpirun.
#   smoke      NP simulated ranks of the DGX H100 platform at the paper's shapes, every pattern and every method, with
#              the GPU's stage times: every row simulated = 1 on its platform, every time positive, the collective's
#              times growing with the state, and the simulated clock alone (the same run twice gives the same times)
#   cpu_check  NP ranks of the same build running the arithmetic (--backend cpu, small shapes): every method's
#              outputs and gradients against the single-device run, as on every other backend ("wrong results: 0")
#   network    NP simulated ranks (16: two DGX H100 nodes) all-gather 8 MiB a rank: NCCL's rings cross the nodes on
#              every GPU's NIC, so the busbw passes two NICs' rate (one NIC is 50 GB/s); and an all-gather of 4 GiB on
#              two ranks of the lent host (past SMPI's 2 GiB message) runs
#   model      GLA-1B (32 heads, 16384 tokens per GPU) on NP simulated ranks of the lent 4-GPU host, dp and zeco, one
#              step each, replaying the model stage table: every row simulated = 1 on its platform, and each method's
#              step within 0.9-1.5x the sum of its recorded kernel calls (the table's time per call x calls per step)
#   timing     the chain pattern (2 MiB) on NP and 2 NP simulated ranks of the DGX H100 platform in both timings of
#              `spbench collective --timing`: latency rows say so and grow with the ranks (each call alone, the P - 1
#              hops in turn), and are no faster than the back-to-back rows, whose calls overlap
#   gdn        Gated DeltaNet's stage table recorded on one CPU rank of the same build (--backend cpu --attention gdn
#              --stage-times, every GDN method, as one H200 records it), then replayed on NP simulated ranks of DGX H100
#              nodes (--backend sim --attention gdn, --allscan as its default): a row of each pass of dp, zeco, lasp2
#              and lasp1, attention gdn, simulated on dgx-h100, a positive time, zeco's scan the host chain over NCCL;
#              and at a length the table has no row of, the run fails naming the stage and the recording command
#   rank_error a stage only some ranks' work needs is missing from the table (zeco's rail-logdepth All-Scan over NP
#              nodes of one GPU, where the ranks that compose maps need vec_add, without it or its stand-in
#              state_fold): the job ends with exit 2 and one line naming the rank, no deadlock
# Exit 77 (skipped) where build-sim/spbench (SPB_SIM_BUILD/spbench where set) or smpirun is missing.
set -u
root=$1 what=$2 np=$3 dir=$4
spb=${SPB_SIM_BUILD:-$root/build-sim}/spbench
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
  network)
    col() { awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) print i; exit }' "$1"; }
    sim dgx-h100 "$PLAT/nvidia-h200-x4.calib" "$np" collective -p allgather -b 8M -e 8M --ranks-per-node 8 -w 1 -n 2 \
      --csv "$dir/nodes.csv" >"$dir/nodes.log" 2>&1 || { cat "$dir/nodes.log"; fail "all-gather at $np ranks"; }
    f=$dir/nodes.csv
    bw=$(awk -F, -v b="$(col "$f" busbw_GBps)" 'NR == 2 { print $b }' "$f")
    awk -v bw="$bw" 'BEGIN { exit !(bw > 100) }' ||
      fail "the all-gather over $((np / 8)) nodes moved $bw GB/s busbw, not past two NICs' 100 GB/s"
    sim nvidia-h200-x4 "$PLAT/nvidia-h200-x4.calib" 2 collective -p allgather -b 2G -e 2G -w 0 -n 1 \
      --csv "$dir/big.csv" >"$dir/big.log" 2>&1 || { cat "$dir/big.log"; fail "an all-gather of 4 GiB on 2 ranks"; }
    [ "$(wc -l <"$dir/big.csv")" -eq 2 ] || fail "no row of the all-gather of 4 GiB"
    echo "SIM_NETWORK_OK np $np: the all-gather across nodes at $bw GB/s busbw, one of 4 GiB simulated"
    ;;
  model)
    sim nvidia-h200-x4 "$PLAT/nvidia-h200-x4.calib" "$np" model -m dp,zeco -H 32 -L 16384 -K 4 -w 0 -n 1 \
      --log-every 0 --csv "$dir/model.csv" >"$dir/model.log" 2>&1 || { cat "$dir/model.log"; fail "model at $np"; }
    cat "$dir/model.log"
    f=$dir/model.csv
    col() { awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) print i; exit }' "$1"; }
    [ "$(wc -l <"$f")" -eq 3 ] || fail "not one row for each of dp and zeco"
    for m in dp zeco; do
      # The table's kernel time of one step of m (its rows at 32 heads and 16384 tokens per GPU).
      sum=$(awk -F, -v m="$(col "$MODEL_STAGES" method)" -v h="$(col "$MODEL_STAGES" heads)" \
        -v l="$(col "$MODEL_STAGES" tokens_per_rank)" -v t="$(col "$MODEL_STAGES" time_ms_median)" \
        -v c="$(col "$MODEL_STAGES" calls_per_iter)" -v want="$m" \
        'NR > 1 && $m == want && $h == 32 && $l == 16384 { s += $t * $c } END { print s + 0 }' "$MODEL_STAGES")
      ok=$(awk -F, -v m="$(col "$f" method)" -v s="$(col "$f" simulated)" -v p="$(col "$f" platform)" \
        -v t="$(col "$f" time_ms_median)" -v want="$m" -v sum="$sum" \
        'NR > 1 && $m == want { print ($s == 1 && $p == "nvidia-h200-x4" && sum > 0 && $t >= 0.9 * sum &&
                                      $t <= 1.5 * sum) ? "yes" : "no: " $t " ms against " sum " ms" }' "$f")
      [ "$ok" = yes ] || fail "$m: not simulated on nvidia-h200-x4 with a step of 0.9-1.5x its kernels' ($ok)"
    done
    echo "SIM_MODEL_OK np $np: dp and zeco simulated, each step within 0.9-1.5x its recorded kernel calls"
    ;;
  timing)
    for P in "$np" $((2 * np)); do
      for t in latency back-to-back; do
        sim dgx-h100 "$PLAT/nvidia-h200-x4.calib" "$P" collective -p chain -b 2M -e 2M --ranks-per-node "$per" -w 1 \
          -n 3 --timing "$t" --csv "$dir/chain.csv" >"$dir/chain_${P}_$t.log" 2>&1 ||
          { cat "$dir/chain_${P}_$t.log"; fail "the chain at $P simulated ranks, --timing $t"; }
      done
    done
    f=$dir/chain.csv
    col() { awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) print i; exit }' "$1"; }
    # "P timing mean median" per row
    rows=$(awk -F, -v w="$(col "$f" world_size)" -v g="$(col "$f" timing)" -v a="$(col "$f" time_ms_mean)" \
      -v m="$(col "$f" time_ms_median)" 'NR > 1 { print $w, $g, $a, $m }' "$f")
    [ "$(printf '%s\n' "$rows" | wc -l)" -eq 4 ] || fail "not 4 rows (2 world sizes x 2 timings): $rows"
    ok=$(printf '%s\n' "$rows" | awk -v small="$np" '
      { t[$1 " " $2] = $3; med[$1 " " $2] = $4 }
      END { big = 2 * small
            print (t[small " latency"] > 0 && t[big " latency"] > 1.5 * t[small " latency"] &&
                   t[small " latency"] >= med[small " back_to_back"] &&
                   t[big " latency"] >= med[big " back_to_back"]) ? "yes" : "no" }')
    [ "$ok" = yes ] || fail "latency rows not growing with the ranks or faster than back to back: $rows"
    echo "SIM_TIMING_OK: the chain's latency grows from $np to $((2 * np)) ranks, back to back it overlaps: $rows" |
      tr '\n' ';'
    echo
    ;;
  gdn)
    hosts dgx-h100 >"$dir/hosts"
    shape=(-B 1 -H 2 --dk 16 --dv 16 -K 2)
    OMP_NUM_THREADS=1 smpirun -np 1 -platform "$PLAT/dgx-h100.xml" -hostfile "$dir/hosts" "${SIMFLAGS[@]}" \
      "$spb" operator --backend cpu --attention gdn -m dp,zeco,lasp2,lasp1 "${shape[@]}" -L 128 -w 1 -n 2 \
      --stage-times "$dir/gdn_stages.csv" >"$dir/record.log" 2>&1 || { cat "$dir/record.log"; fail "recording"; }
    grep -q "^# wrong results: 0" "$dir/record.log" || { cat "$dir/record.log"; fail "a recorded method was wrong"; }
    col() { awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) print i; exit }' "$1"; }
    f=$dir/gdn_stages.csv
    for stage in gdn_forward gdn_backward gdn_rank_map gdn_initial_dstate gdn_dense_apply copy_4d; do
      cut -d, -f"$(col "$f" stage)" "$f" | grep -qx "$stage" || fail "no stage row of $stage in $f"
    done
    SIM_STAGES=$f sim dgx-h100 "$PLAT/nvidia-h200-x4.calib" "$np" operator --attention gdn -m dp,zeco,lasp2,lasp1 \
      "${shape[@]}" -L 128 --ranks-per-node "$per" -w 1 -n 2 --csv "$dir/op.csv" >"$dir/op.log" 2>&1 ||
      { cat "$dir/op.log"; fail "the GDN replay at $np simulated ranks"; }
    f=$dir/op.csv
    rows=$(awk -F, -v m="$(col "$f" method)" -v a="$(col "$f" attention)" -v s="$(col "$f" simulated)" \
      -v p="$(col "$f" platform)" -v w="$(col "$f" world_size)" -v t="$(col "$f" time_ms_median)" \
      -v b="$(col "$f" backend)" -v np="$np" \
      'NR > 1 && $a == "gdn" && $s == 1 && $p == "dgx-h100" && $w == np && $t > 0 && ($m != "zeco" || $b == "nccl") {
         n[$m]++ } END { print n["dp"] + 0, n["zeco"] + 0, n["lasp2"] + 0, n["lasp1"] + 0 }' "$f")
    [ "$rows" = "2 2 2 2" ] || { cat "$f"; fail "not both passes of dp, zeco, lasp2, lasp1 (gdn, simulated): $rows"; }
    SIM_STAGES=$dir/gdn_stages.csv sim dgx-h100 "$PLAT/nvidia-h200-x4.calib" "$np" operator --attention gdn -m dp \
      "${shape[@]}" -L 256 --ranks-per-node "$per" -w 1 -n 2 >"$dir/missing.log" 2>&1 &&
      fail "a length the GDN table has no row of ran"
    grep -q "has no time for gdn_forward at B1 T256 H2 dk16 dv16.*--attention gdn --stage-times" "$dir/missing.log" ||
      { cat "$dir/missing.log"; fail "the missing key's error does not name the stage, the key and the command"; }
    echo "SIM_GDN_OK np $np: a GDN stage table recorded on one CPU rank replays dp, zeco, lasp2 and lasp1; a missing" \
      "key fails by name"
    ;;
  rank_error)
    f=$dir/no_fold.csv
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "stage") c = i } NR == 1 || ($c != "state_fold" && $c != "vec_add")' \
      "$STAGES" >"$f"
    SIM_STAGES=$f sim dgx-h100 "$PLAT/nvidia-h200-x4.calib" "$np" operator -m zeco --allscan rail-logdepth -B 1 -H 16 \
      --dk 128 --dv 128 -L 16384 -K 16 --ranks-per-node 1 -w 1 -n 1 >"$dir/op.log" 2>&1 && rc=0 || rc=$?
    [ "$rc" = 2 ] || { cat "$dir/op.log"; fail "a stage some ranks lack ended with exit $rc, not 2"; }
    named=$(grep -c "^spbench: error: rank [1-9][0-9]*: the stage table $f has no row of state_fold" "$dir/op.log" || :)
    lines=$(grep -c "^spbench: error" "$dir/op.log" || :)
    [ "$named" = 1 ] && [ "$lines" = 1 ] ||
      { cat "$dir/op.log"; fail "not one error line naming the rank that lacks the stage"; }
    ! grep -q "Deadlock" "$dir/op.log" || { cat "$dir/op.log"; fail "the simulation deadlocked"; }
    echo "SIM_RANK_ERROR_OK np $np: $(grep "^spbench: error" "$dir/op.log" | cut -d: -f2-3), exit 2, no deadlock"
    ;;
  *) fail "sim_run.sh: smoke, cpu_check, network, model, timing, gdn or rank_error, not $what" ;;
esac
