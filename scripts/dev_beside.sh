#!/usr/bin/env bash
# Development measurement of the chunk states beside the communication (--overlap 2; zeco/NOTES.md, session 13) on
# the GPUs present, in one call of a lent machine: the build, the GPU tests and the kernel benchmark
# (scripts/gpu_session.sh test bench), then the operator at the paper's shapes (H=16, dk=dv=128, 16384 and 32768
# tokens per GPU) for dp, zeco and lasp2 in order and beside, three rounds alternating the orders, on P = 1, 2, 4, ...
# up to the GPUs present, then a timeline of each order at 16384 tokens. Writes to $OUT: session.log, the kernel CSV,
# dev_operator.csv, dev_timeline.csv; prints a summary (mean over the rounds of each row's mean) last.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
bash scripts/gpu_session.sh test bench || exit 1
source scripts/gpu_env.sh
B=build-gpu
gpus=$(nvidia-smi -L | wc -l)
csv=$OUT/dev_operator.csv
MPI="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x SPB_GIT_SHA"
run() {  # P L overlap [extra flags]
  local P=$1 L=$2 ov=$3
  shift 3
  $MPI -np "$P" $B/spbench operator --backend gpu -m dp,zeco,lasp2 -B 1 -H 16 --dk 128 --dv 128 -L "$L" -K 16 \
    --overlap "$ov" "$@" 2>&1 | tee -a "$OUT/session.log" | grep -E "wrong results: [1-9]|error"
}
for P in 1 2 4 8; do
  [ "$P" -le "$gpus" ] || continue
  for round in 1 2 3; do
    for L in 16384 32768; do
      for ov in 0 2; do
        echo "[dev_beside] P=$P L=$L overlap $ov round $round"
        run "$P" "$L" "$ov" -w 5 -n 50 --no-resume --csv "$csv"
      done
    done
  done
  for ov in 0 2; do
    run "$P" 16384 "$ov" -w 5 -n 10 --timeline-iters 10 --timeline "$OUT/dev_timeline.csv"
  done
done
python3 - "$csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["pass"] == "fwd_bwd"]
t = collections.defaultdict(list)
for r in rows:
    t[(int(r["world_size"]), int(r["tokens_per_rank"]), r["method"], r["overlap"])].append(float(r["time_ms_mean"]))
print("P  tokens  method  overlap  rounds  mean of means (ms)  over dp (us)")
for (P, L, m, o), v in sorted(t.items()):
    dp = t.get((P, L, "dp", o)) or t.get((P, L, "dp", "0"))
    mean = sum(v) / len(v)
    over = (mean - sum(dp) / len(dp)) * 1e3 if dp else float("nan")
    print(f"{P}  {L}  {m:6s}  {o}  {len(v)}  {mean:.4f}  {over:+.1f}")
PY
