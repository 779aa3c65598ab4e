#!/usr/bin/env bash
# The README's test command: install what is missing, build, run every test (GPU tests skip themselves without GPUs).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_install_deps
spb_mpi_env
spb_build
cd "$SPB_BUILD"
ctest --output-on-failure -j "$(nproc)" --timeout 600
