#!/usr/bin/env bash
#SBATCH --job-name=spbench
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --output=spbench-%j.log
# The paper's sweeps (Tables 2-6) on N nodes x 8 GPUs under Slurm, from the repository root (built at the same path
# on every node):
#   sbatch --nodes=4 scripts/cluster/slurm_sbatch.sh                  # 8, 16 and 32 GPUs
#   sbatch --nodes=32 --time=12:00:00 scripts/cluster/slurm_sbatch.sh  # up to 256 GPUs
#   SPB_WORLDS=16 SPB_LEVELS=collective sbatch --nodes=2 scripts/cluster/slurm_sbatch.sh
# Each configuration is one srun inside the allocation: ceil(P / 8) nodes, 8 tasks per node filled in order
# (--distribution=block), so node n holds ranks [8n, 8n + 8). Every task must see all of its node's GPUs (spbench
# takes the GPU of its node-local rank): no --gpus-per-task, and no --gpu-bind that hides the others. Open MPI must
# have been built with Slurm's PMI: SPB_SRUN_MPI (default pmix) is srun's --mpi. scripts/cluster/common.sh lists
# the other settings and what every rank gets (srun passes the whole environment). --kill-on-bad-exit ends a step
# when one task fails: a rank whose watchdog found a hang (SPB_TIMEOUT_S) exits 2, and srun then ends the stopped one.
cd "${SLURM_SUBMIT_DIR:-$(dirname "${BASH_SOURCE[0]}")/../..}"
source scripts/cluster/common.sh
NODES=${NODES:-${SLURM_JOB_NUM_NODES:-1}}

spb_launch() {
  local P=$1
  shift
  local per=$((P < GPUS_PER_NODE ? P : GPUS_PER_NODE))
  spb_run srun --nodes=$(((P + GPUS_PER_NODE - 1) / GPUS_PER_NODE)) --ntasks="$P" --ntasks-per-node="$per" \
    --gpus-per-node="$GPUS_PER_NODE" --distribution=block:block --cpu-bind=none --mpi="${SPB_SRUN_MPI:-pmix}" \
    --kill-on-bad-exit=1 --export=ALL "$SPB" "$@"
}

spb_cluster_sweep
