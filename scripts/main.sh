#!/usr/bin/env bash
# The README's main job: install what is missing, build, and run the default sweep on whatever this machine has.
#   no GPU:  every method on 1, 2 and 4 CPU ranks at small sizes, then the simulation at 4 and 16 ranks of the
#            paper's shapes on the DGX H100 platform (scripts/sweep_cpu.sh, scripts/sim_lib.sh)
#   GPUs:    the paper's operator settings on 1, 2, 4, ... GPUs (scripts/sweep_gpu.sh)
# Rows are appended to results/local/<machine>_<level>.csv, which git ignores, so that the main job changes no
# committed file (SPB_RESULTS_DIR=results writes rows to commit; scripts/common.sh: spb_results_csv). A rerun of the
# same commit measures nothing that is already there; a run of a new commit starts fresh files and keeps the older
# ones as results/local/<machine>_<level>.<their sha>.csv. The sweep's last line counts its configurations
# ("sweep: N configurations, N ok, N failed, N skipped"); its exit status is non-zero where one failed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_install_deps
spb_mpi_env
spb_build spbench
if nvidia-smi -L >/dev/null 2>&1; then :; else
  source "$SPB_ROOT/scripts/sim_lib.sh"
  sim_build  # the simulated build: the CPU sweep's last part runs it at 4 and 16 simulated ranks
fi
if nvidia-smi -L >/dev/null 2>&1 && [ "$(nvidia-smi -L | wc -l)" -ge 1 ] && [ -z "${SPB_FORCE_CPU:-}" ]; then
  exec bash "$SPB_ROOT/scripts/sweep_gpu.sh"
else
  exec bash "$SPB_ROOT/scripts/sweep_cpu.sh"
fi
