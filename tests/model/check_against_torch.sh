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

# shellcheck source-path=SCRIPTDIR source=run_then_check.sh  # check_item, check_run, check_ref: its callbacks
source "$here/run_then_check.sh"
check_item() {
  dump=$outdir/dump_$1
  run_words="spbench model --backend $1"; run_failed="spbench model --backend $1"
  ref_words="torch reference ($ref_device)"; ref_failed="$1 dump"; ref_name=torch_reference
}
check_run() {
  # shellcheck disable=SC2086  # MODEL_ARGS is split into words on purpose
  "${mpirun[@]}" "$spbench" $MODEL_ARGS --backend "$1" --dump "$2"
}
check_ref() { python3 "$here/torch_reference.py" "$2" --device "$ref_device"; }

mkdir -p "$outdir"
# shellcheck disable=SC2086  # one item per backend
run_then_check $BACKENDS
if [ "$status" -eq 0 ]; then echo "all model checks passed ($BACKENDS)"; fi
exit "$status"
