#!/usr/bin/env bash
# Development measurement of the chunk states beside the communication (--overlap 2; zeco/NOTES.md, "The chunk states
# beside the scan") on the GPUs present, in one call of a lent machine (at most 10 minutes): the build
# (scripts/gpu_session.sh), the GPU tests of the kernels and of the methods on as many ranks as GPUs, the operator at
# the paper's shapes (H=16, dk=dv=128, 16384 and 32768 tokens per GPU) for dp, zeco and lasp2 in order (0) and beside
# (2), three rounds alternating the orders, on P = 1, 2, 4, 8 up to the GPUs present, a timeline of each order at
# 16384 tokens, and last the kernel benchmark with what time is left (its "sp fwd" / "sp bwd" lines compare the
# orders' local schedules). Writes to $OUT: session.log, dev_operator.csv, dev_timeline.csv, bench.log; prints a
# summary (the mean over the rounds of each configuration's mean) at the end.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
t0=$(date +%s)
bash scripts/gpu_session.sh build || exit 1
source scripts/gpu_env.sh
B=build-gpu
gpus=$(nvidia-smi -L | wc -l)
log=$OUT/session.log
csv=$OUT/dev_operator.csv
MPI="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x SPB_GIT_SHA"
(cd $B && ctest -R "gla_cuda|methods.gpu.np$gpus\$" --output-on-failure --timeout 200) 2>&1 | tee -a "$log" \
  | grep -E "tests passed|Failed|\*\*\*|CudaStatesArriving.*(before|never|after)" | tail -30
run() {  # P L overlap [extra flags]
  local P=$1 L=$2 ov=$3
  shift 3
  $MPI -np "$P" $B/spbench operator --backend gpu -m dp,zeco,lasp2 -B 1 -H 16 --dk 128 --dv 128 -L "$L" -K 16 \
    --overlap "$ov" "$@" >> "$log" 2>&1 || echo "[dev_beside] P=$P L=$L overlap $ov failed (session.log)"
}
for P in 1 2 4 8; do
  [ "$P" -le "$gpus" ] || continue
  for round in 1 2 3; do
    for L in 16384 32768; do
      for ov in 0 2; do run "$P" "$L" "$ov" -w 5 -n 50 --no-resume --csv "$csv"; done
    done
  done
  for ov in 0 2; do run "$P" 16384 "$ov" -w 5 -n 10 --timeline-iters 10 --timeline "$OUT/dev_timeline.csv"; done
done
grep -E "wrong results" "$log" | sort | uniq -c
python3 - "$csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["pass"] == "fwd_bwd"]
t = collections.defaultdict(list)
for r in rows:
    t[(int(r["world_size"]), int(r["tokens_per_rank"]), r["method"], r["overlap"])].append(float(r["time_ms_mean"]))
print("P  tokens  method  overlap  rounds  mean of means (ms)  over dp (us)")
for (P, L, m, o), v in sorted(t.items()):
    dp = t[(P, L, "dp", "0")]
    mean = sum(v) / len(v)
    print(f"{P}  {L}  {m:6s}  {o}  {len(v)}  {mean:.4f}  {(mean - sum(dp) / len(dp)) * 1e3:+.1f}")
PY
left=$((560 - ($(date +%s) - t0)))
if [ "$left" -gt 30 ]; then
  echo "[dev_beside] kernel benchmark, ${left} s at most"
  timeout "$left" $B/kernels/gla/bench/bench_gla_cuda > "$OUT/bench.log" 2>&1
  grep -E "^device|sp (fwd|bwd)" "$OUT/bench.log"
fi
echo "[dev_beside] done in $(( $(date +%s) - t0 )) s"
