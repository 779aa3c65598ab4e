#!/usr/bin/env bash
# The default sweep on CPU ranks: every registered method at P = 1, 2, 4 and two lengths per rank, small shapes,
# the paper's protocol (5 warm-up, mean of 50); then a tiny GLA language model trained with every method on the same
# 512-token sequences at P = 1, 2, 4 (its rows' losses are equal across methods and world sizes: the SP equivalence).
# Progress on stdout; rows in results/.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_mpi_env
SPB=$SPB_BUILD/spbench
machine=${SPB_MACHINE:-cpu-$(nproc)core}
csv=${SPB_CSV:-$(spb_results_csv "$machine" operator "$SPB")}
configs=()  # one process per configuration runs every method over the same inputs (-m all)
for P in 1 2 4; do for L in 256 1024; do configs+=("all $P $L"); done; done
i=0
for c in "${configs[@]}"; do
  read -r m P L <<<"$c"
  i=$((i + 1))
  spb_log "[$i/${#configs[@]}] every method on $P CPU ranks, $L tokens per rank"
  mpirun -np "$P" --bind-to none "$SPB" operator --backend cpu -m "$m" -B 1 -H 4 --dk 32 --dv 32 -L "$L" -K 4 \
    -w 5 -n 50 --csv "$csv" | grep -E '^ |skipped|wrong results: [1-9]' || true
done
model_csv=${SPB_MODEL_CSV:-$(spb_results_csv "$machine" model "$SPB")}
for P in 1 2 4; do
  spb_log "[model] every method on $P CPU ranks: a tiny GLA LM (4 heads, hidden 64, 2 layers), 512 tokens"
  mpirun -np "$P" --bind-to none "$SPB" model --backend cpu -m all --vocab 256 --hidden 64 --layers 2 --heads 4 \
    --mlp 128 -B 2 -T 512 -K 2 -w 5 -n 20 --log-every 0 --csv "$model_csv" | grep -E '^ |skipped|wrong results: [1-9]' || true
done
spb_log "rows in $csv and $model_csv"
