#!/usr/bin/env bash
# check_against_fla.sh SPBENCH OUTDIR: trains GLA models with `spbench model --backend gpu` on one GPU, on real text
# (bytes of the repository's own sources), dumps each, and checks each dump against fla's own GLAForCausalLM
# (tests/model/fla_reference.py; tests/model/README.md says what is compared and why the bars are what they are).
# The bars are calibrated: fla_reference.py trains fla's model twice from the dump's initial parameters, in fp32 (the
# reference) and under bf16 autocast (fla's own bf16 error), and spbench's errors against the fp32 run must stay
# within twice fla's own (at least 2e-2 for a gradient, 1e-2 for the losses).
# Two shapes, both with hidden 2048 and 4 blocks: 32 heads (dk 32, dv 64, the paper's) and 4 heads (dk 256, dv 512,
# GLA's public 1B); T = 1000 tokens, a length that is not a multiple of the 64-token chunk.
# FLA_REF_PRECISION=fp32 or autocast instead trains fla once and holds spbench to fixed bars against that run
# (default calibrated; fla_reference.py says how the bars differ).
# Needs a GPU, python3 with torch, and fla's source on PYTHONPATH (FLA_SRC, default .fla/ at the repository root).
# FLA_CHECK_HEADS picks the shapes (default "32 4").
# fla's model runs with its fused_recurrent GLA kernel (FLA_ATTN_MODE, default fused_recurrent): at fla bc3b101 its
# chunk kernel's dk and dg disagree with an fp64 recurrence by O(1) at this shape
# (results/logs/dev/fla_chunk_gla_dk_dg_nvidia-h200.log); tests/model/fla_kernel_probe.py measures both kernels first
# and the check stops if the one it uses is wrong.
# Exit 0: every check passed; 77: skipped (no GPU, no torch or no fla); other: a run or a check failed.
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 SPBENCH OUTDIR" >&2; exit 2; fi
spbench=$1; outdir=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export PYTHONPATH=${FLA_SRC:-$root/.fla}${PYTHONPATH:+:$PYTHONPATH}

if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "skipped: no python3 torch with a GPU"; exit 77
fi
if ! python3 -c 'import fla' 2>/dev/null; then echo "skipped: fla is not importable (PYTHONPATH=$PYTHONPATH)"; exit 77; fi

attn_mode=${FLA_ATTN_MODE:-fused_recurrent}
echo "== fla's GLA kernels against fp64 (the check uses $attn_mode)"
rc=0
python3 "$here/fla_kernel_probe.py" --require "$attn_mode" || rc=$?
if [ "$rc" -ne 0 ]; then echo "FAIL: fla's $attn_mode kernel disagrees with fp64 (fla_kernel_probe exit $rc)"; exit 1; fi

mkdir -p "$outdir"
text=$outdir/text.bin
find "$root" -path "$root/.*" -prune -o -path "$root/build*" -prune -o -path "$root/results" -prune -o \
  -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.md' -o -name '*.cu' \) -print | LC_ALL=C sort | xargs cat > "$text"
# shellcheck source-path=SCRIPTDIR source=run_then_check.sh  # check_item, check_run, check_ref: its callbacks
source "$here/run_then_check.sh"
check_item() {
  dump=$outdir/dump_fla_H$1
  run_words="spbench model --backend gpu, $1 heads"; run_failed="spbench model, $1 heads"
  ref_words="fla's GLAForCausalLM"; ref_failed="$1 heads"; ref_name=fla_reference
}
check_run() {
  "${mpirun[@]}" "$spbench" model --backend gpu -m dp --vocab 512 --hidden 2048 --layers 4 --heads "$1" \
    --expand-k 0.5 --expand-v 1 --mlp 5632 -T 1000 -B 1 --steps 20 -w 0 --lr 3e-4 --seed 11 \
    --data "$text" --log-every 0 --dump "$2"
}
check_ref() {
  python3 "$here/fla_reference.py" "$2" --precision "${FLA_REF_PRECISION:-calibrated}" --attn-mode "$attn_mode"
}

# shellcheck disable=SC2086  # one item per head count
run_then_check ${FLA_CHECK_HEADS:-32 4}
if [ "$status" -eq 0 ]; then echo "fla check: both shapes passed"; fi
exit "$status"
