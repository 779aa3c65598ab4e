#!/usr/bin/env bash
# The README's main job: install what is missing, build, and run the default sweep on whatever this machine has.
#   no GPU:  every method on 1, 2 and 4 CPU ranks at small sizes (scripts/sweep_cpu.sh)
#   GPUs:    the paper's operator settings on 1, 2, 4, ... GPUs (scripts/sweep_gpu.sh)
# Rows are appended to results/<machine>_<level>.csv (scripts/common.sh: spb_results_csv); a rerun of the same commit
# skips the rows already there, a run of a new commit moves the older rows to results/archive/.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_install_deps
spb_mpi_env
spb_build spbench
if nvidia-smi -L >/dev/null 2>&1 && [ "$(nvidia-smi -L | wc -l)" -ge 1 ] && [ -z "${SPB_FORCE_CPU:-}" ]; then
  exec bash "$SPB_ROOT/scripts/sweep_gpu.sh"
else
  exec bash "$SPB_ROOT/scripts/sweep_cpu.sh"
fi
