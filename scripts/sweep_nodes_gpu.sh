#!/usr/bin/env bash
# Several nodes simulated on this host's GPUs (DESIGN §10): --ranks-per-node N splits the ranks into nodes of N, and
# --nodes-over-network gives each node its own NCCL host id, so that NCCL carries the traffic between nodes over its
# network transport (sockets here, not InfiniBand: the rows say nccl-socket) while each node's own ranks keep NVLink.
# For P = 2, 4, ... up to the GPUs present and every N below P that divides it: zeco's All-Scan as the chain over every
# rank (host), hierarchical (host-hier: each node's chain, a chain between the nodes) and log-depth (host-logdepth:
# recursive doubling between the nodes), and the chain pattern (one state a hop: at one rank per node, a hop over the
# network, to which the simulation's sockets link is fitted). States of 64 KiB..8 MiB, All-Scan blocks of 16384
# elements (the paper's) and the whole state, each in both timings (--timing). Rows go to the machine's collective
# CSV, beside the NVLink rows. Each spbench run is one configuration of the count on the last line (exit 1 where one
# failed; SIGINT or SIGTERM stops the sweep and its ranks at once, exit 130 or 143).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_gpu_sweep collective
run() {  # run P N ARGS...: spbench collective on P GPUs in nodes of N ranks, NCCL between them over the network
  local P=$1 N=$2
  shift 2
  spb_config "$P GPUs in nodes of $N: $*" "$csv" '^ |^# spbench|wrong results: [1-9]|error' \
    mpirun -np "$P" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x SPB_GIT_SHA "$SPB" collective \
    --backend gpu --ranks-per-node "$N" --nodes-over-network -b 64K -e 8M -f 2 -w 5 -n 50 --csv "$csv" "$@"
}
spb_sweep_begin
for P in "${worlds[@]}"; do
  [ "$P" -gt 1 ] || continue
  for N in 1 2 4; do
    [ "$N" -lt "$P" ] && [ $((P % N)) -eq 0 ] || continue
    spb_log "$P GPUs in $((P / N)) nodes of $N, NCCL between the nodes over its network"
    # Both timings: latency (the paper's) and back to back (the sockets link's fit and the hold-out's older rows).
    for t in latency back-to-back; do
      for v in host host-hier host-logdepth; do
        run "$P" "$N" -p allscan --allscan "$v" --block-elems 16384,0 --timing "$t"
      done
      run "$P" "$N" -p chain --timing "$t"
    done
  done
done
spb_log "rows in $csv"
spb_sweep_end
