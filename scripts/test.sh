#!/usr/bin/env bash
# The README's test command: install what is missing, build (the simulated build too), run every test (GPU tests skip
# themselves without GPUs).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_install_deps
spb_mpi_env
spb_build
source "$SPB_ROOT/scripts/sim_lib.sh"
sim_build  # build-sim/spbench: the sim.* tests run it under smpirun
cd "$SPB_BUILD"
ctest --output-on-failure -j "$(nproc)" --timeout 600
