# The simulation's functions (DESIGN §10), shared by scripts/sim.sh and the main job's sweep (scripts/sweep_cpu.sh):
# the simulated build (build-sim/, smpicxx), the platforms' hostfiles, one simulated run, the calibration, the
# hold-out, the predictions and the smoke sweep. Sourced, not run; scripts/sim.sh says what each step does.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SIM_BUILD=${SPB_SIM_BUILD:-$SPB_ROOT/build-sim}
SIM_DIR=${SPB_SIM_DIR:-$SPB_ROOT/results/sim}
[[ $SIM_DIR == /* ]] || SIM_DIR=$SPB_ROOT/$SIM_DIR
PLAT=$SPB_ROOT/sim/platforms
STAGES=$SPB_ROOT/results/nvidia-h200-x4_stages.csv
# The model level's: the GLA-1B step's kernel calls and its GLA stages at the model's shapes (spbench model
# --stage-times on 4 GPUs).
MODEL_STAGES=$SPB_ROOT/results/nvidia-h200-x4_model_stages.csv
# Long contexts: the GLA-1B step's kernel calls and GLA stages at 65536 tokens with --recompute=blocks, every
# scan method at P = 1 on one H200 (results/README.md has the command).
LONG_MODEL_STAGES=$SPB_ROOT/results/nvidia-h200_model_stages.csv
# Gated DeltaNet's (DESIGN §12): its stages and the GLA stages its methods call (copy_4d), every GDN method at P = 1 on
# one H200 (sim_predict_gdn says the command).
GDN_STAGES=$SPB_ROOT/results/nvidia-h200_gdn_stages.csv
# The network model without SMPI's Ethernet-fitted correction factors (CM02), no reverse-path traffic; the host code
# between MPI calls costs no simulated time (only the stage times do); sends up to 64 KiB eager (the device
# All-Scan's blocks stream without a handshake), larger ones a rendezvous (SimGrid 3.32 walks its list of eager sends
# at every completion, quadratic in the sends in flight); SMPI's ring all-gather, pairwise all-to-all and ring sums
# for the host's own small collectives and --backend cpu's MPI communicator (SimComm moves NCCL's collectives as
# point-to-point messages, sim/sim_comm.cpp); MPI_Test costs nothing;
# shared memory mapped in 256 MiB blocks (1 MiB ones exceed the kernel's map count past 64 ranks of the paper's
# shapes).
SIMFLAGS=(--cfg=smpi/host-speed:1Gf --cfg=network/model:CM02 --cfg=network/crosstraffic:0
          --cfg=smpi/simulate-computation:no --cfg=smpi/send-is-detached-thresh:65537
          --cfg=smpi/async-small-thresh:65537 --cfg=smpi/allgather:ring --cfg=smpi/alltoall:pair
          --cfg=smpi/allreduce:lr --cfg=smpi/test:0 --cfg=smpi/shared-malloc-blocksize:268435456
          --log=root.thres:warning --log=smpi_coll.thres:error)

sim_build() {
  spb_install_deps
  spb_log "configuring $SIM_BUILD (smpicxx)"
  CXX=smpicxx cmake -S "$SPB_ROOT" -B "$SIM_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPB_SIM=ON >/dev/null
  cmake --build "$SIM_BUILD" -j "$(nproc)" --target spbench
}

# hosts PLATFORM: the platform's hosts in rank order, one a line.
hosts() {
  case $1 in
    dgx-h100) bash "$SPB_ROOT/scripts/sim_platform_dgx.sh" --hostfile 32 ;;
    *) local i; for i in 0 1 2 3; do echo "gpu-$i"; done ;;
  esac
}

# sim PLATFORM CALIB NP LEVEL ARGS...: the simulated spbench on NP ranks of PLATFORM (the model level replays the
# model's stage table, or SIM_MODEL_STAGES where a caller sets it: the long contexts'; the others the GLA stages', or
# SIM_STAGES where a caller sets it: Gated DeltaNet's).
sim() {
  local platform=$1 calib=$2 np=$3 hostfile stages=${SIM_STAGES:-$STAGES}
  shift 3
  [ "$1" = model ] && stages=${SIM_MODEL_STAGES:-$MODEL_STAGES}
  hostfile=$(mktemp)
  hosts "$platform" >"$hostfile"
  (cd "$(mktemp -d)" && smpirun -np "$np" -platform "$PLAT/$platform.xml" -hostfile "$hostfile" "${SIMFLAGS[@]}" \
    "$SIM_BUILD/spbench" "$@" --backend sim --sim-stages "$stages" --sim-calibration "$calib" \
    --sim-platform "$platform")
  local rc=$?
  rm -f "$hostfile"
  return $rc
}

# P = 2 on the 4-GPU host, what the calibration compares: the four collective patterns it fits and dp's operator.
# The collective rows it fits are timed back to back (sim/calibration.cpp), as the measured ones it fits them to.
calibration_runs() {
  local calib=$1 coll=$2 op=$3
  rm -f "$coll" "$op"
  sim nvidia-h200-x4 "$calib" 2 collective -p chain,ring,allgather,alltoall -b 64K -e 32M -f 2 -w 2 -n 10 \
    --timing back-to-back --csv "$coll"
  sim nvidia-h200-x4 "$calib" 2 collective -p allscan --allscan device-ll16 -b 64K -e 32M -f 2 --block-elems 16384 \
    -w 2 -n 10 --timing back-to-back --csv "$coll"
  sim nvidia-h200-x4 "$calib" 2 operator -m dp -B 1 -H 16 --dk 128 --dv 128 -L 16384 -K 16 -w 2 -n 5 --csv "$op"
  sim nvidia-h200-x4 "$calib" 2 operator -m dp -B 1 -H 16 --dk 128 --dv 128 -L 32768 -K 16 -w 2 -n 5 --csv "$op"
}

sim_calibrate() {
  local tmp out=$PLAT/nvidia-h200-x4.calib
  tmp=$(mktemp -d)
  cat >"$tmp/c0.calib" <<EOF
gpu = NVIDIA H200
gpu_copy_bytes_per_s = 4.3e12
stage_offset_s = 0
nccl_p2p_call_s = 0
nccl_p2p_byte_s = 0
nccl_group_call_s = 0
nccl_group_byte_s = 0
nccl_allgather_call_s = 0
nccl_allgather_byte_s = 0
nccl_alltoall_call_s = 0
nccl_alltoall_byte_s = 0
nccl_allreduce_call_s = 0
nccl_allreduce_byte_s = 0
device_call_s = 0
device_block_s = 0
EOF
  local i
  for i in 1 2 3; do
    spb_log "calibration pass $i: P = 2 simulated with $tmp/c$((i - 1)).calib"
    calibration_runs "$tmp/c$((i - 1)).calib" "$tmp/coll$i.csv" "$tmp/op$i.csv" >/dev/null
    "$SPB_ROOT/build/spbench" sim-calibrate --measured-collective "$SPB_ROOT/results/nvidia-h200-x4_collective.csv" \
      --measured-operator "$SPB_ROOT/results/nvidia-h200-x4_operator.csv" --simulated-collective "$tmp/coll$i.csv" \
      --simulated-operator "$tmp/op$i.csv" --stages "$STAGES" --calibration "$tmp/c$((i - 1)).calib" \
      --out "$tmp/c$i.calib"
  done
  # Sources named by their place in the repository, not the temporary files the passes ran in.
  sed -e "s|$tmp/c2.calib|the second pass's constants|; s|$tmp/coll3.csv|the third pass's simulated P = 2 rows|" \
      -e "s|$tmp/op3.csv|its dp rows|; s|$SPB_ROOT/||g" "$tmp/c3.calib" >"$out"
  rm -rf "$tmp"
  spb_log "wrote $out"
}

# run LABEL CSV PLATFORM NP ARGS...: one simulated configuration of the sweep (rows appended to CSV).
run() {
  local label=$1 csv=$2 platform=$3 np=$4
  shift 4
  spb_config "$label" "$csv" '^ |error|Deadlock' sim "$platform" "$PLAT/${calib_of[$platform]}" "$np" "$@" \
    --csv "$csv"
}
declare -A calib_of=([nvidia-h200-x4]=nvidia-h200-x4.calib [nvidia-h200-x4-sockets]=nvidia-h200-x4.calib
                     [dgx-h100]=nvidia-h200-x4.calib)

# The collective level in both timings (harness/NOTES.md): each is held out against the measured rows of its own.
sim_holdout() {
  local coll=$SIM_DIR/nvidia-h200-x4_collective.csv op=$SIM_DIR/nvidia-h200-x4_operator.csv P L t
  local model=$SIM_DIR/nvidia-h200-x4_model.csv
  mkdir -p "$SIM_DIR"
  for P in 2 3 4; do
    local pats=chain,allgather,ring,alltoall; [ "$P" -eq 3 ] && pats=chain,allgather,ring
    for t in latency back-to-back; do
      run "collective, P = $P, NCCL patterns, $t" "$coll" nvidia-h200-x4 "$P" collective -p "$pats" -b 64K -e 32M \
        -f 2 -w 2 -n 10 --timing "$t"
      for scan in device-ll16 host; do
        run "collective, P = $P, allscan $scan, $t" "$coll" nvidia-h200-x4 "$P" collective -p allscan \
          --allscan "$scan" -b 64K -e 32M -f 2 --block-elems 16384 -w 2 -n 10 --timing "$t"
      done
    done
    for L in 16384 32768; do
      run "operator, P = $P, every method, L = $L" "$op" nvidia-h200-x4 "$P" operator -m all -B 1 -H 16 --dk 128 \
        --dv 128 -L "$L" -K 16 --allscan device -w 2 -n 5
    done
  done
  if [ -f "$PLAT/nvidia-h200-x4-sockets.xml" ]; then
    for t in latency back-to-back; do
      for scan in host host-hier host-logdepth; do
        run "collective, 2 nodes x 2 over sockets, allscan $scan, $t" "$coll" nvidia-h200-x4-sockets 4 collective \
          -p allscan --allscan "$scan" -b 64K -e 8M -f 2 --block-elems 16384,0 --ranks-per-node 2 -w 2 -n 10 \
          --timing "$t"
      done
      run "collective, 2 nodes x 2 over sockets, chain, $t" "$coll" nvidia-h200-x4-sockets 4 collective -p chain \
        -b 64K -e 8M -f 2 --ranks-per-node 2 -w 2 -n 10 --timing "$t"
    done
    run "operator, 2 nodes x 2 over sockets, every method" "$op" nvidia-h200-x4-sockets 4 operator -m all -B 1 -H 16 \
      --dk 128 --dv 128 -L 16384 -K 16 --ranks-per-node 2 -w 2 -n 5
    # The measured zeco rows over sockets ran host-hier (auto's choice then); auto's rail-logdepth has none yet.
    run "operator, 2 nodes x 2 over sockets, zeco host-hier" "$op" nvidia-h200-x4-sockets 4 operator -m zeco \
      --allscan host-hier -B 1 -H 16 --dk 128 --dv 128 -L 16384 -K 16 --ranks-per-node 2 -w 2 -n 5
  fi
  sim_holdout_model "$model"
}

# GLA-1B at the measured model rows' configurations (scripts/gpu_session.sh: three, model-sweep, two-nodes): P = 3
# and 4 at 16384 tokens per GPU and 32 heads, the other methods of P = 4 there, 4 heads and 32768 tokens at P = 4,
# and two nodes of two over sockets. zeco's blocks hold 16384 elements (-K 4 at 32 heads, 32 at 4).
sim_holdout_model() {
  local model=$1 P
  for P in 3 4; do
    run "model, P = $P, dp, zeco, lasp2, 32 heads, L = 16384" "$model" nvidia-h200-x4 "$P" model -m dp,zeco,lasp2 \
      -H 32 -L 16384 -K 4 -w 1 -n 2 --log-every 0
  done
  run "model, P = 4, lasp1, ring, ulysses, 32 heads, L = 16384" "$model" nvidia-h200-x4 4 model \
    -m lasp1,ring,ulysses -H 32 -L 16384 -K 4 -w 1 -n 2 --log-every 0
  run "model, P = 4, dp, zeco, 4 heads, L = 16384" "$model" nvidia-h200-x4 4 model -m dp,zeco -H 4 -L 16384 -K 32 \
    -w 1 -n 2 --log-every 0
  run "model, P = 4, dp, zeco, 32 heads, L = 32768" "$model" nvidia-h200-x4 4 model -m dp,zeco -H 32 -L 32768 -K 4 \
    -w 1 -n 2 --log-every 0
  if [ -f "$PLAT/nvidia-h200-x4-sockets.xml" ]; then
    run "model, 2 nodes x 2 over sockets, dp, zeco, lasp2" "$model" nvidia-h200-x4-sockets 4 model \
      -m dp,zeco,lasp2 -H 32 -L 16384 -K 4 --ranks-per-node 2 -w 1 -n 2 --log-every 0
    run "model, 2 nodes x 2 over sockets, zeco host-hier" "$model" nvidia-h200-x4-sockets 4 model -m zeco \
      --allscan host-hier -H 32 -L 16384 -K 4 --ranks-per-node 2 -w 1 -n 2 --log-every 0
  fi
}

# operator_methods P L: the methods of the operator sweeps at P GPUs and L tokens per GPU: every one, ulysses only
# where its single-device shapes were recorded (16 heads over at most 16 ranks, at 16384 tokens per GPU).
operator_methods() {
  local methods=dp,zeco,lasp2,lasp1,ring
  [ "$1" -le 16 ] && [ "$2" -eq 16384 ] && methods=$methods,ulysses
  echo "$methods"
}

# The paper's settings (report/paper/README.md): Table 2, 32 heads of 128 x 128 fp32 (2 MiB) in All-Scan blocks of
# 16384 elements; Tables 3 and 4, 16 heads of 128 x 128, 16384 and 32768 tokens per GPU, K = 16 (blocks of 16384
# elements). SPB_SIM_WORLDS and SPB_SIM_LENGTHS pick some of them.
# Table 2 in both timings: latency is the paper's; back-to-back, a throughput, beside it.
sim_predict() {
  local coll=$SIM_DIR/dgx-h100_collective.csv op=$SIM_DIR/dgx-h100_operator.csv P t
  mkdir -p "$SIM_DIR"
  for P in ${SPB_SIM_WORLDS:-8 16 32 64 128 256}; do
    for t in latency back-to-back; do
      run "collective, $P GPUs of DGX H100 nodes, $t" "$coll" dgx-h100 "$P" collective -b 2M -e 2M \
        --block-elems 16384 --ranks-per-node 8 -w 2 -n 10 --timing "$t"
    done
    if [ "$P" -gt 8 ]; then  # auto is rail-logdepth across nodes; the rail chain and host-hier beside it
      local scan
      for scan in rail host-hier; do
        run "collective, $P GPUs of DGX H100 nodes, allscan $scan" "$coll" dgx-h100 "$P" collective -p allscan \
          --allscan "$scan" -b 2M -e 2M --block-elems 16384 --ranks-per-node 8 -w 2 -n 10
      done
    fi
    local L
    for L in ${SPB_SIM_LENGTHS:-16384 32768}; do
      run "operator, $P GPUs of DGX H100 nodes, $L tokens per GPU" "$op" dgx-h100 "$P" operator \
        -m "$(operator_methods "$P" "$L")" -B 1 -H 16 --dk 128 --dv 128 -L "$L" -K 16 --ranks-per-node 8 -w 1 -n 3
    done
    sim_predict_model "$P"
  done
}

# Gated DeltaNet's methods where a lent 4-GPU host would run them beside fla's context parallel (16 heads of 128 x 128,
# 16384 tokens per GPU, P = 2 and 4, every method, K = 16): rows to set against that run's when it comes, replaying
# the GDN stage table of one H200 (sim_predict_gdn says how it is recorded) on the 4-GPU host's platform.
sim_holdout_gdn() {
  local op=$SIM_DIR/nvidia-h200-x4_operator_gdn.csv P SIM_STAGES=$GDN_STAGES
  mkdir -p "$SIM_DIR"
  for P in 2 4; do
    run "operator, Gated DeltaNet, P = $P, every method, L = 16384" "$op" nvidia-h200-x4 "$P" operator \
      --attention gdn -m all --allscan host -B 1 -H 16 --dk 128 --dv 128 -L 16384 -K 16 -w 1 -n 3
  done
}

# Gated DeltaNet's operator level at the paper's operator shape: 16 heads of 128 x 128, 16384 and 32768 tokens per
# GPU, every method (zeco: the host chain in K = 16 column blocks, GDN's dense map having no device or rail All-Scan,
# zeco/method_zeco.cpp; ulysses as for GLA, at most 16 ranks and 16384 tokens), on P GPUs of DGX H100 nodes,
# replaying GDN's own stage table. Its rows go to a file of their own: dgx-h100_operator.csv was written before the
# `attention` column and so takes gla rows alone (runtime/csv.cpp, late_columns). The table is recorded on one H200
# (-K 16 as here, so that zeco's column-block keys are the ones replayed; ulysses' single-device shapes at 8 and 16
# GPUs, H / P heads of P x 16384 tokens, by dp):
#   spbench operator --backend gpu --attention gdn -m all -B 1 -H 16 --dk 128 --dv 128 -K 16 \
#     -L <16384|32768> -w 5 -n 20 --stage-times results/nvidia-h200_gdn_stages.csv
#   spbench operator --backend gpu --attention gdn -m dp -B 1 -H <2|1> --dk 128 --dv 128 -K 16 -L <131072|262144> \
#     -w 5 -n 20 --stage-times results/nvidia-h200_gdn_stages.csv
# SPB_SIM_WORLDS and SPB_SIM_LENGTHS pick some of the settings, as for sim_predict.
sim_predict_gdn() {
  local op=$SIM_DIR/dgx-h100_operator_gdn.csv P L SIM_STAGES=$GDN_STAGES
  if [ ! -s "$GDN_STAGES" ]; then  # one failed configuration: the sweep ends non-zero, saying why
    spb_log "no $GDN_STAGES: record Gated DeltaNet's stage table on one H200 first (the command: sim_lib.sh)"
    SPB_N_FAILED=$((SPB_N_FAILED + 1))
    return 0
  fi
  mkdir -p "$SIM_DIR"
  for P in ${SPB_SIM_WORLDS:-8 16 32 64 128 256}; do
    for L in ${SPB_SIM_LENGTHS:-16384 32768}; do
      run "operator, Gated DeltaNet, $P GPUs of DGX H100 nodes, $L tokens per GPU" "$op" dgx-h100 "$P" operator \
        --attention gdn -m "$(operator_methods "$P" "$L")" --allscan host -B 1 -H 16 --dk 128 --dv 128 -L "$L" -K 16 \
        --ranks-per-node 8 -w 1 -n 3
    done
  done
}

# The paper's Tables 5 and 6 (report/paper/README.md): GLA-1B (32 heads, 20 layers, hidden 2048) at 16384 and 32768
# tokens per GPU, dp, zeco, lasp2 and lasp1, zeco's blocks of 16384 elements; on P GPUs of DGX H100 nodes.
sim_predict_model() {
  local P=$1 L
  for L in ${SPB_SIM_LENGTHS:-16384 32768}; do
    run "model, $P GPUs of DGX H100 nodes, $L tokens per GPU" "$SIM_DIR/dgx-h100_model.csv" dgx-h100 "$P" model \
      -m dp,zeco,lasp2,lasp1 -H 32 -L "$L" -K 4 --ranks-per-node 8 -w 1 -n 2 --log-every 0
  done
}

# Long contexts: GLA-1B (32 heads, 20 layers, hidden 2048) at 65536 tokens per GPU with
# --recompute=blocks, dp, zeco, lasp2 and lasp1, on P GPUs of DGX H100 nodes: sequences of 512K (8 GPUs) to 16M tokens
# (256), replaying the table of one H200 at that length (LONG_MODEL_STAGES; zeco's one block of 65536 elements, -K 1,
# as recorded). Rows to their own file, dgx-h100_model_long.csv, apart from Tables 5 and 6's. A method a run a
# configuration, so that one which fails keeps the others' rows; one warm-up step and one timed (a simulated step
# repeats to the microsecond, and 256 ranks of this step take minutes of wall time a step on 2 cores).
# SPB_SIM_WORLDS picks some of the GPU counts.
sim_predict_long() {
  local csv=$SIM_DIR/dgx-h100_model_long.csv P m SIM_MODEL_STAGES=$LONG_MODEL_STAGES
  mkdir -p "$SIM_DIR"
  for P in ${SPB_SIM_WORLDS:-8 16 32 64 128 256}; do
    for m in dp zeco lasp2 lasp1; do
      run "model, $P GPUs of DGX H100 nodes, 65536 tokens per GPU, blocks remade, $m" "$csv" dgx-h100 "$P" model \
        -m "$m" -H 32 -L 65536 -K 1 --recompute=blocks --ranks-per-node 8 -w 1 -n 1 --log-every 0
    done
  done
}

# A small sweep (the main job's last part, the tests): 4 and 16 simulated ranks of the DGX H100 platform at the paper's
# shapes, every pattern and method; rows in results/local/sim/ (smoke rows are never committed), resumed on a rerun.
sim_smoke() {
  local dir=$SPB_ROOT/results/local/sim P
  mkdir -p "$dir"
  for P in 4 16; do
    local per=$((P < 8 ? P : 8))  # the platform's nodes hold 8 GPUs; 4 ranks fill half of one
    run "[sim] collective, $P simulated ranks of DGX H100 nodes" "$dir/smoke_collective.csv" dgx-h100 "$P" \
      collective -b 1M -e 2M --block-elems 16384 --ranks-per-node "$per" -w 1 -n 3
    run "[sim] every method, $P simulated ranks of DGX H100 nodes" "$dir/smoke_operator.csv" dgx-h100 "$P" \
      operator -m all -B 1 -H 16 --dk 128 --dv 128 -L 16384 -K 16 --ranks-per-node "$per" -w 1 -n 2
  done
}
