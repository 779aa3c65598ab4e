# The paper's sweeps across nodes (Tables 2-6), shared by mpirun_hostfile.sh and slurm_sbatch.sh. Sourced: each
# launcher defines spb_launch P ARGS... (run `spbench ARGS` as P ranks, GPUS_PER_NODE consecutive ranks per node, one
# per GPU) and calls spb_cluster_sweep. Every configuration is one launch, so a failed one costs only itself; the
# last line counts them ("sweep: N configurations, N ok, N failed, N skipped", scripts/common.sh: spb_config), the
# exit status is non-zero where one failed, and SIGINT or SIGTERM (scancel sends it) stops the sweep and the running
# launch's ranks at once (exit 130 or 143), keeping the rows written so far.
#
# Environment (all optional):
#   SPB              the spbench binary (default build/spbench; the same path on every node)
#   GPUS_PER_NODE    ranks per node (default 8)
#   SPB_WORLDS       the world sizes (default: 8 16 32 64 128 256, those that fit on NODES x GPUS_PER_NODE)
#   SPB_LEVELS       what to sweep (default: "collective operator model")
#   SPB_MACHINE      the results files' prefix (default: <NODES>x<GPUS_PER_NODE>x<the GPU's last word>)
#   SPB_RESULTS      where the CSVs go (default: results/)
#   SPB_DRY_RUN=1    print each command instead of running it
# Every rank gets NCCL_NVLS_ENABLE (0 unless set: no NVLink multicast, as on the machines the results so far come
# from), LD_LIBRARY_PATH (where NCCL is), OMP_NUM_THREADS, every NCCL_* and UCX_* variable of this shell
# (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ... where the cluster needs them) and spbench's own (SPB_ALLSCAN_*,
# SPB_SPIN_TIMEOUT_S, SPB_GIT_SHA, SPB_RANKS_PER_NODE).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"  # SPB_ROOT, and the sweep's spb_config
SPB=${SPB:-$SPB_ROOT/build/spbench}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

spb_log() { printf '[spbench cluster] %s\n' "$*"; }

# The names of the variables every rank needs (see above).
spb_rank_env_names() {
  echo NCCL_NVLS_ENABLE
  [ -n "${LD_LIBRARY_PATH:-}" ] && echo LD_LIBRARY_PATH
  [ -n "${OMP_NUM_THREADS:-}" ] && echo OMP_NUM_THREADS
  compgen -e | grep -E '^(NCCL_|UCX_|SPB_ALLSCAN_)|^(SPB_TIMEOUT_S|SPB_SPIN_TIMEOUT_S|SPB_GIT_SHA|SPB_RANKS_PER_NODE)$' |
    grep -vx NCCL_NVLS_ENABLE || true
}

# spb_run COMMAND...: run it, or print it with SPB_DRY_RUN=1.
spb_run() {
  if [ -n "${SPB_DRY_RUN:-}" ]; then printf '%q ' "$@"; printf '\n'; else "$@"; fi
}

# spb_cluster_config LABEL CSV P ARGS...: spb_launch P ARGS... as one counted configuration (a dry run writes no rows
# and counts as ok).
spb_cluster_config() {
  local label=$1 csv=$2
  shift 2
  [ -z "${SPB_DRY_RUN:-}" ] || csv=""
  spb_config "$label" "$csv" '^' spb_launch "$@"  # every line of the launch on the console
}

# spb_cluster_sweep: needs NODES and spb_launch.
spb_cluster_sweep() {
  : "${NODES:?NODES: the number of nodes}"
  local total=$((NODES * GPUS_PER_NODE)) gpu P worlds=()
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | awk '{print $NF}') || true
  local machine=${SPB_MACHINE:-${NODES}x${GPUS_PER_NODE}x${gpu:-GPU}} dir=${SPB_RESULTS:-$SPB_ROOT/results}
  local coll=$dir/${machine}_collective.csv op=$dir/${machine}_operator.csv model=$dir/${machine}_model.csv
  local levels=" ${SPB_LEVELS:-collective operator model} "
  mkdir -p "$dir"
  for P in ${SPB_WORLDS:-8 16 32 64 128 256}; do [ "$P" -le "$total" ] && worlds+=("$P"); done
  [ ${#worlds[@]} -gt 0 ] || { spb_log "no world size fits on $NODES x $GPUS_PER_NODE GPUs"; return 1; }
  spb_log "$NODES nodes x $GPUS_PER_NODE GPUs, worlds ${worlds[*]}, levels${levels% }: rows in $dir/${machine}_*.csv"
  local shape=(--backend gpu -B 1 -H 16 --dk 128 --dv 128 -K 16)
  spb_sweep_begin
  for P in "${worlds[@]}"; do
    if [[ $levels == *" collective "* ]]; then
      # Table 2 (a 2 MiB state per rank, blocks of 16384; timed as latency, spbench collective's default and the
      # paper's timing) inside a sweep of 64 KiB..32 MiB, three block sizes (a block's cost apart from the bytes): the
      # chain, and the node-aware All-Scans across nodes (the rail scans first: auto's) or the device protocol (auto)
      # inside one; then the LASP-1 chain and LASP-2's all-gather.
      local scans=(host auto)
      [ "$P" -gt "$GPUS_PER_NODE" ] && scans=(host rail-logdepth rail host-hier host-logdepth)
      for scan in "${scans[@]}"; do
        spb_cluster_config "collective allscan $scan on $P GPUs" "$coll" "$P" collective --backend gpu -p allscan \
          --allscan "$scan" -b 64K -e 32M --block-elems 1024,16384,0 --csv "$coll"
      done
      spb_cluster_config "collective chain,allgather on $P GPUs" "$coll" "$P" collective --backend gpu \
        -p chain,allgather -b 64K -e 32M --csv "$coll"
    fi
    if [[ $levels == *" operator "* ]]; then
      # Tables 3 and 4: every method at 16384 and 32768 tokens per GPU (zeco's All-Scan: auto, rail-logdepth across
      # nodes), then zeco with the rail chain between the nodes.
      for L in 16384 32768; do
        spb_cluster_config "operator -m all on $P GPUs, $L tokens per GPU" "$op" "$P" operator -m all "${shape[@]}" \
          -L "$L" --csv "$op"
        if [ "$P" -gt "$GPUS_PER_NODE" ]; then
          spb_cluster_config "operator zeco rail on $P GPUs, $L tokens per GPU" "$op" "$P" operator \
            -m zeco --allscan rail "${shape[@]}" -L "$L" --csv "$op"
        fi
      done
    fi
    if [[ $levels == *" model "* ]]; then
      # Tables 5 and 6: GLA-1B with the paper's 32 heads, every method (`all` leaves out ulysses where P does not
      # divide the heads), 16384 and 32768 tokens per GPU, 5 warm-up steps and the mean of 100. A configuration that
      # does not fit a GPU's memory runs again with --recompute=elementwise, then with --recompute=states+elementwise
      # (the least memory), and counts as skipped if it still does not fit.
      for L in 16384 32768; do
        local run=(model --backend gpu -m all -H 32 -L "$L" -K 4 -w 5 -n 100 --log-every 25 --csv "$model")
        local recompute rc before
        spb_log "model on $P GPUs, $L tokens per GPU"
        before=$(spb_rows "$model")
        for recompute in "" --recompute=elementwise --recompute=states+elementwise; do
          rc=0
          spb_attempt '^' spb_launch "$P" "${run[@]}" $recompute || rc=$?
          grep -q "try --recompute" "$SPB_CONFIG_LOG" || break
        done
        if grep -q "the model needs about" "$SPB_CONFIG_LOG"; then
          SPB_N_SKIPPED=$((SPB_N_SKIPPED + 1))
          spb_log "skipped: model on $P GPUs, $L tokens per GPU does not fit even with --recompute=states+elementwise"
        else
          spb_tally "$rc" "$([ -n "${SPB_DRY_RUN:-}" ] || echo "$model")" "$before"
        fi
      done
    fi
  done
  spb_log "done: rows in $dir/${machine}_*.csv (copy them into results/ and run spbench report)"
  spb_sweep_end
}
