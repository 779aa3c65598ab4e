#!/usr/bin/env bash
# The paper's sweeps (Tables 2-6) on N nodes x 8 GPUs with Open MPI and a hostfile: one line per node, `NAME slots=8`
# (hosts.example). Run from a node that reaches the others by ssh, with the repository built at the same path on
# every node (a shared filesystem):
#   HOSTFILE=hosts scripts/cluster/mpirun_hostfile.sh                # every world size from 8 to NODES x 8
#   HOSTFILE=hosts SPB_WORLDS="16 32" SPB_LEVELS=operator scripts/cluster/mpirun_hostfile.sh
# NODES defaults to the hostfile's lines; scripts/cluster/common.sh lists the other settings and what every rank
# gets. Ranks fill one node before the next (--map-by ppr:8:node), so node n holds ranks [8n, 8n + 8): the layout
# spbench's node-aware All-Scans expect (each row's nodes and ranks_per_node columns record it). Open MPI ends the
# job when one rank exits non-zero (a rank whose watchdog found a hang exits 2), the stopped ranks included.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
HOSTFILE=${HOSTFILE:?HOSTFILE: a file of node names, one per line, with slots=$GPUS_PER_NODE}
NODES=${NODES:-$(grep -cvE '^[[:space:]]*(#|$)' "$HOSTFILE")}

spb_launch() {
  local P=$1 envs=() v
  shift
  for v in $(spb_rank_env_names); do envs+=(-x "$v"); done
  spb_run mpirun -np "$P" --hostfile "$HOSTFILE" --map-by "ppr:$GPUS_PER_NODE:node" --bind-to none "${envs[@]}" \
    "$SPB" "$@"
}

spb_cluster_sweep
