#!/usr/bin/env bash
# The paper's operator sweep on this node's GPUs (Tables 3 and 4): H=16, dk=dv=128, B=1, bf16, 16384 and 32768
# tokens per GPU, every method, P = 1, 2, 4, ... up to the GPUs present; one process per GPU. Rows in results/local/
# (scripts/common.sh: spb_results_csv, spb_gpu_sweep); the last line counts the configurations (exit 1 where one
# failed; SIGINT or SIGTERM stops the sweep and its ranks at once, exit 130 or 143).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_gpu_sweep operator
# Weak scaling (Tables 3 and 4): fixed tokens per GPU. Strong scaling: a 65536-token sequence on 1, 2, 4, ... GPUs.
# One process per configuration runs every method over the same inputs and reference (-m all).
configs=()
for L in 16384 32768; do for P in "${worlds[@]}"; do configs+=("all $P -L $L"); done; done
for P in "${worlds[@]}"; do configs+=("all $P -T 65536"); done
spb_sweep_begin
i=0
for c in "${configs[@]}"; do
  read -r m P flag tokens <<<"$c"
  i=$((i + 1))
  spb_config "[$i/${#configs[@]}] every method on $P GPUs, $flag $tokens" "$csv" '^ |skipped|wrong results: [1-9]|error' \
    mpirun -np "$P" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x SPB_GIT_SHA "$SPB" operator --backend gpu \
    -m "$m" -B 1 -H 16 --dk 128 --dv 128 "$flag" "$tokens" -K 16 -w 5 -n 50 --csv "$csv"
done
spb_log "rows in $csv"
spb_sweep_end
