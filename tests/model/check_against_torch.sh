#!/usr/bin/env bash
# check_against_torch.sh SPBENCH OUTDIR: trains the small GLA model with `spbench model` on P = 1 (GPU and CPU
# backends), dumps it, and checks each dump against the independent PyTorch reference (tests/model/README.md).
# Exit 0: all checks passed (or skipped: no torch in python3); non-zero: a run or a check failed.
set -euo pipefail

# The spbench model command (everything but the backend and the dump folder); adjust here if the flags change.
MODEL_ARGS="model -m dp --vocab 512 --hidden 128 --layers 2 --heads 2 --expand-k 0.5 --expand-v 1 --mlp 256
            -T 256 -B 2 --steps 20 -w 0 --lr 1e-3 --seed 7"
BACKENDS=${BACKENDS:-"gpu cpu"}

if [ $# -ne 2 ]; then echo "usage: $0 SPBENCH OUTDIR" >&2; exit 2; fi
spbench=$1; outdir=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if ! python3 -c 'import torch' 2>/dev/null; then echo "skipped: no python3 torch"; exit 0; fi
ref_device=cpu
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  ref_device=cuda
fi

mpirun=(mpirun -np 1)
if [ "$(id -u)" -eq 0 ]; then mpirun+=(--allow-run-as-root); fi

mkdir -p "$outdir"
status=0
for backend in $BACKENDS; do
  dump=$outdir/dump_$backend
  rm -rf "$dump"
  echo "== spbench model --backend $backend -> $dump"
  # shellcheck disable=SC2086  # MODEL_ARGS is split into words on purpose
  if ! "${mpirun[@]}" "$spbench" $MODEL_ARGS --backend "$backend" --dump "$dump"; then
    echo "FAIL: spbench model --backend $backend"; status=1; continue
  fi
  echo "== torch reference ($ref_device) vs $dump"
  rc=0
  python3 "$here/torch_reference.py" "$dump" --device "$ref_device" || rc=$?
  if [ "$rc" -ne 0 ]; then echo "FAIL: $backend dump (torch_reference exit $rc)"; status=1; fi
done
if [ "$status" -eq 0 ]; then echo "all model checks passed ($BACKENDS)"; fi
exit "$status"
