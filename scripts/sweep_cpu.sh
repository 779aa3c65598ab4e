#!/usr/bin/env bash
# The default sweep on CPU ranks: every registered method at P = 1, 2, 4 and two lengths per rank, small shapes,
# the paper's protocol (5 warm-up, mean of 50); then a tiny GLA language model trained with every method on the same
# 512-token sequences at P = 1, 2, 4 (its rows' losses are equal across methods and world sizes: the SP equivalence).
# Progress on stdout, one configuration at a time; rows in results/local/ (scripts/common.sh: spb_results_csv), the
# last line counts the configurations: "sweep: N configurations, N ok, N failed, N skipped" (exit 1 where one failed;
# SIGINT or SIGTERM stops the sweep and its ranks at once, exit 130 or 143).
# Environment (all optional): SPB_CSV and SPB_MODEL_CSV (the two files), SPB_MACHINE (their prefix, default
# cpu-<cores>core), SPB_CPU_LEVELS (default "operator model sim"; sim: the simulated build's smoke sweep,
# scripts/sim_lib.sh, rows in results/local/sim/), SPB_CPU_WORLDS (the world sizes, default "1 2 4"),
# SPB_CPU_LENGTHS (the operator's tokens per rank, default "256 1024").
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_mpi_env
SPB=$SPB_BUILD/spbench
machine=${SPB_MACHINE:-cpu-$(nproc)core}
levels=" ${SPB_CPU_LEVELS:-operator model sim} "
worlds=(${SPB_CPU_WORLDS:-1 2 4})
filter='^ |skipped|wrong results: [1-9]|error'
spb_sweep_begin
if [[ $levels == *" operator "* ]]; then
  csv=${SPB_CSV:-$(spb_results_csv "$machine" operator "$SPB")}
  configs=()  # one process per configuration runs every method over the same inputs (-m all)
  for P in "${worlds[@]}"; do for L in ${SPB_CPU_LENGTHS:-256 1024}; do configs+=("$P $L"); done; done
  i=0
  for c in "${configs[@]}"; do
    read -r P L <<<"$c"
    i=$((i + 1))
    spb_config "[$i/${#configs[@]}] every method on $P CPU ranks, $L tokens per rank" "$csv" "$filter" \
      mpirun -np "$P" --bind-to none "$SPB" operator --backend cpu -m all -B 1 -H 4 --dk 32 --dv 32 -L "$L" -K 4 \
      -w 5 -n 50 --csv "$csv"
  done
  spb_log "rows in $csv"
fi
if [[ $levels == *" model "* ]]; then
  model_csv=${SPB_MODEL_CSV:-$(spb_results_csv "$machine" model "$SPB")}
  for P in "${worlds[@]}"; do
    spb_config "[model] every method on $P CPU ranks: a tiny GLA LM (4 heads, hidden 64, 2 layers), 512 tokens" \
      "$model_csv" "$filter" \
      mpirun -np "$P" --bind-to none "$SPB" model --backend cpu -m all --vocab 256 --hidden 64 --layers 2 --heads 4 \
      --mlp 128 -B 2 -T 512 -K 2 -w 5 -n 20 --log-every 0 --csv "$model_csv"
  done
  spb_log "rows in $model_csv"
fi
if [[ $levels == *" sim "* ]]; then
  source "$SPB_ROOT/scripts/sim_lib.sh"
  sim_smoke
fi
spb_sweep_end
