#!/usr/bin/env bash
# run_beside_spbench.sh SPBENCH OUTDIR MACHINE: GLA-1B training steps on this machine's first GPU, spbench and
# PyTorch + fla one after the other on the same GPU, each configuration a process of its own.
#   spbench:  `spbench model -m dp` at P = 1 (5 warm-up steps, the mean of 100)  -> OUTDIR/MACHINE_model.csv
#   fla:      fla_baseline.py in each precision of FLA_PRECISIONS and compile mode of FLA_COMPILE
#                                                                               -> OUTDIR/MACHINE_model_fla.csv
# Knobs (environment): FLA_CONFIGS, the "heads:tokens" pairs (default "32:16384 4:16384"); FLA_PRECISIONS (default
# "bf16 fp32-autocast-bf16 bf16-fp32-master"); FLA_COMPILE (default "none block"; "model" compiles the whole model); SPB_MODEL_ARGS, more flags for spbench (e.g.
# --recompute=elementwise, or --recompute=blocks beside FLA_ARGS=--checkpoint); FLA_ARGS, more flags for
# fla_baseline.py; DEADLINE, seconds since the epoch after which no new configuration starts (a lent
# machine's call has a hard limit). fla's source must be importable (PYTHONPATH); TRITON_CACHE_DIR keeps its
# compiled kernels and autotune choices between calls (the first compile and autotune takes minutes).
# Exit status: the number of configurations that failed (0: all measured or skipped as already there).
set -uo pipefail
if [ $# -ne 3 ]; then echo "usage: $0 SPBENCH OUTDIR MACHINE" >&2; exit 2; fi
spbench=$1; outdir=$2; machine=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$outdir"
model_csv=$outdir/${machine}_model.csv
fla_csv=$outdir/${machine}_model_fla.csv
deadline=${DEADLINE:-0}
failed=0 ran=0

trap 'echo "run_beside_spbench: stopped by a signal"; exit 130' INT TERM

time_left() { [ "$deadline" -eq 0 ] || [ "$(date +%s)" -lt "$deadline" ]; }
# one LABEL CMD...: runs a configuration unless the deadline has passed, and counts it.
one() {
  local label=$1; shift
  if ! time_left; then echo "[beside] skipped (deadline): $label"; return; fi
  echo "[beside] $label"
  ran=$((ran + 1))
  if [ "$deadline" -gt 0 ]; then
    timeout $((deadline - $(date +%s))) "$@"
  else
    "$@"
  fi
  local rc=$?
  if [ $rc -ne 0 ]; then echo "[beside] FAILED (exit $rc): $label"; failed=$((failed + 1)); fi
}

mpirun=(mpirun -np 1 --bind-to none)
if [ "$(id -u)" -eq 0 ]; then mpirun+=(--allow-run-as-root); fi
for cfg in ${FLA_CONFIGS:-32:16384 4:16384}; do
  heads=${cfg%%:*} tokens=${cfg##*:}
  # shellcheck disable=SC2086  # SPB_MODEL_ARGS is split into words on purpose
  one "spbench dp, $heads heads, $tokens tokens" "${mpirun[@]}" "$spbench" model --backend gpu -m dp -H "$heads" \
    -L "$tokens" --log-every 0 --csv "$model_csv" ${SPB_MODEL_ARGS:-}
  for compile in ${FLA_COMPILE:-none block}; do
    for precision in ${FLA_PRECISIONS:-bf16 fp32-autocast-bf16 bf16-fp32-master}; do
      # shellcheck disable=SC2086  # FLA_ARGS too
      one "fla, $heads heads, $tokens tokens, $precision, compile $compile ${FLA_ARGS:-}" python3 "$here/fla_baseline.py" \
        --heads "$heads" --seq "$tokens" --precision "$precision" --compile "$compile" --csv "$fla_csv" ${FLA_ARGS:-}
    done
  done
done
echo "[beside] $ran configurations run, $failed failed"
exit "$failed"
