#!/usr/bin/env bash
# The simulated network against published measurements (DESIGN §10; a hold-out: no constant of the platform or the
# calibration comes from these figures): `spbench collective -p allgather` and `-p allreduce` on the DGX H100
# platform, 1 node of 8 GPUs, 2 nodes and 4 nodes (8, 16, 32 ranks, --ranks-per-node 8), nccl-tests' sizes from
# 1 MiB to 1 GiB (the all-gather's gathered bytes, the all-reduce's buffer), beside the published nccl-tests busbw of
# the same size, nodes and collective (sim/platforms/published-nccl-h100.csv) and the ratio simulated / published.
#   scripts/sim_network_check.sh            simulate (rows in $SPB_SIM_DIR/dgx-h100_network_check.csv, resumed) and
#                                           print the table
#   scripts/sim_network_check.sh --table    print the table of the rows already there
# Needs the simulated build (scripts/sim.sh build) and build-sim/spbench. The calls are timed back to back
# (`--timing back-to-back`, not the collective level's default latency), as nccl-tests times its loop. The all-gather pattern gathers each rank's state and its decay (1/128 more bytes
# than the state), so its gathered size is 1/128 above the published size it stands beside; busbw counts its own.
source "$(dirname "${BASH_SOURCE[0]}")/sim_lib.sh"
PUBLISHED=$PLAT/published-nccl-h100.csv
CSV=$SIM_DIR/dgx-h100_network_check.csv
MIN_TOTAL=$((1 << 20)) MAX_TOTAL=$((1 << 30))

simulate() {
  mkdir -p "$SIM_DIR"
  local P
  for P in 8 16 32; do
    # nccl-tests' all-gather size is the gathered output: P pieces of size / P
    run "network check: all-gather, $((P / 8)) node(s) x 8 GPUs" "$CSV" dgx-h100 "$P" collective -p allgather \
      -b $((MIN_TOTAL / P)) -e $((MAX_TOTAL / P)) -f 2 --ranks-per-node 8 -w 2 -n 10 --timing back-to-back
    run "network check: all-reduce, $((P / 8)) node(s) x 8 GPUs" "$CSV" dgx-h100 "$P" collective -p allreduce \
      -b "$MIN_TOTAL" -e "$MAX_TOTAL" -f 2 --ranks-per-node 8 -w 2 -n 10 --timing back-to-back
  done
}

# The simulated rows beside the published ones: collective, nodes, ranks, nccl-tests size, simulated busbw, and each
# published figure of that collective, nodes and size with its ratio (its source's file in the last column).
table() {
  awk -F, -v min="$MIN_TOTAL" '
    FNR == 1 && FILENAME != pub { for (i = 1; i <= NF; i++) c[$i] = i; next }
    FILENAME == pub {
      if ($0 ~ /^#/ || $1 == "source_repo") next
      n = ++npub; pn[n] = $4; pc[n] = $6; pb[n] = $7; pv[n] = $8; ps[n] = $1 ":" $2; next
    }
    $c["platform"] != "dgx-h100" { next }
    {
      m = $c["method"]; P = $c["world_size"]; b = $c["bytes"]
      size = m == "allgather" ? b * P : b  # the published size this row stands beside
      if (size < min) next
      key = m SUBSEP $c["nodes"] SUBSEP P SUBSEP size
      if (!(key in sim)) order[++nrow] = key
      sim[key] = $c["busbw_GBps"]
    }
    END {
      printf "%-10s %5s %5s %11s %10s %10s %7s  %s\n", "collective", "nodes", "ranks", "size", "simulated", "published",
             "ratio", "published by"
      for (r = 1; r <= nrow; r++) {
        split(order[r], k, SUBSEP)
        found = 0
        for (n = 1; n <= npub; n++) {
          pm = pc[n] == "all_gather" ? "allgather" : "allreduce"
          if (pm != k[1] || pn[n] != k[2] || pb[n] != k[4]) continue
          found = 1
          label = pc[n] == "all_reduce_ring" ? " (ring)" : ""
          printf "%-10s %5d %5d %11d %10.1f %10.1f %7.2f  %s%s\n", k[1], k[2], k[3], k[4], sim[order[r]], pv[n],
                 sim[order[r]] / pv[n], ps[n], label
        }
        if (!found) printf "%-10s %5d %5d %11d %10.1f %10s %7s\n", k[1], k[2], k[3], k[4], sim[order[r]], "-", "-"
      }
    }' pub="$PUBLISHED" "$PUBLISHED" "$CSV"
}

case ${1:-} in
  --table) table ;;
  "")
    spb_sweep_begin
    simulate
    spb_sweep_end
    table
    ;;
  *) echo "usage: $0 [--table]" >&2; exit 2 ;;
esac
