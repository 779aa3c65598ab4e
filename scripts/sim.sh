#!/usr/bin/env bash
# The simulation (DESIGN §10): spbench's own levels and methods, built with SimGrid's smpicxx (build-sim/) and run by
# smpirun on a platform file, their compute the GPU's stage times (results/<kind>_stages.csv), their communication
# MPI on the platform's links after each transport's cost per call and per byte (sim/platforms/<platform>.calib).
#   scripts/sim.sh build        install libsimgrid-dev, configure and build build-sim/spbench
#   scripts/sim.sh calibrate    fit the lent 4-GPU host's transport costs at P = 2 (sim/platforms/nvidia-h200-x4.calib)
#   scripts/sim.sh holdout      P = 2, 3, 4 on that host and 2 nodes x 2 GPUs over sockets, at the collective,
#                               operator and model levels: rows to compare with the measured ones (results/sim/)
#   scripts/sim.sh predict      the paper's Tables 2 to 6 at 8..256 GPUs on the DGX H100 cluster (results/sim/)
#   scripts/sim.sh predict-gdn  Gated DeltaNet's operator level at 8..256 GPUs on the DGX H100 cluster, every method
#                               (results/sim/dgx-h100_operator_gdn.csv), from GDN's stage table of one H200
#                               results/nvidia-h200_gdn_stages.csv (sim_lib.sh's sim_predict_gdn has its commands)
#   scripts/sim.sh holdout-gdn  Gated DeltaNet's methods at P = 2 and 4 on the 4-GPU host, beside which fla's context
#                               parallel is to run (results/sim/nvidia-h200-x4_operator_gdn.csv)
#   scripts/sim.sh long         GLA-1B at 65536 tokens per GPU (--recompute=blocks) at 8..256 GPUs on the DGX H100
#                               cluster, dp, zeco, lasp2, lasp1: 512K- to 16M-token sequences
#                               (results/sim/dgx-h100_model_long.csv), from results/nvidia-h200_model_stages.csv
#   scripts/sim.sh smoke        a small sweep at 4 and 16 simulated ranks (the main job and the tests run it)
#   scripts/sim.sh all          build, calibrate, holdout, predict, holdout-gdn, predict-gdn
# SPB_SIM_DIR (default results/sim) is where rows go; every run is one configuration of the sweep's count.
source "$(dirname "${BASH_SOURCE[0]}")/sim_lib.sh"
spb_sweep_begin
for step in "${@:-all}"; do
  case $step in
    build | all) sim_build ;;&
    calibrate | all) sim_calibrate ;;&
    holdout | all) sim_holdout ;;&
    predict | all) sim_predict ;;&
    smoke) sim_smoke ;;
    long) sim_predict_long ;;
    holdout-gdn | all) sim_holdout_gdn ;;&
    predict-gdn | all) sim_predict_gdn ;;&
    build | calibrate | holdout | predict | holdout-gdn | predict-gdn | all) ;;
    *) spb_log "sim.sh: unknown step $step (build, calibrate, holdout, predict, holdout-gdn, predict-gdn, long, smoke," \
         "all)"; exit 2 ;;
  esac
done
spb_sweep_end
