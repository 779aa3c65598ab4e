#!/usr/bin/env bash
# One call of a lent GPU machine (where nothing can be installed): build there with the header-only packages carried
# as .deb files in .deps/ (apt-get download libcli11-dev libfccp-dev nlohmann-json3-dev), then run the stages named
# on the command line; logs and CSVs go to $OUT.
#   stages: test (GPU ctest), bench (kernel benchmark), collective, operator, timeline, model (with the checks
#   against PyTorch and fla), fla (spbench beside PyTorch + fla), model-profile, model-schedules, nodes, all;
#   and, not in all: faults (a rank stopped and a rank killed on two GPUs, tests/harness/rank_fault.sh), stages (the
#   GPU time of every kernel stage, what the simulated build replays), three (every level on 3 GPUs), two-nodes
#   (every level on 2 simulated nodes of 2 GPUs, NCCL over sockets between them), model-sweep (the GLA-1B sweep alone),
#   model-stages (the GPU time of every kernel call of a GLA-1B step)
# Every command of a stage (and every sweep script) is one configuration of scripts/common.sh's spb_config: the last
# line counts them, the exit status is non-zero where one failed, and SIGINT or SIGTERM stops the session and the
# running command's ranks at once (exit 130 or 143).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh
set +e  # a failed step costs only itself: spb_config counts it
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
LOG=$OUT/session.log  # one log: a call brings back at most 8 files
SPB_SWEEP_LOG=$LOG    # every command's whole output goes there too
# No NVLink multicast, OpenMPI as root, NCCL from its Python wheel (NCCL_ROOT), the commit sha from .deps/git_sha.
source scripts/gpu_env.sh
# SPB_PREBUILT=DIR: binaries built elsewhere from the same commit (DIR/spbench, DIR/kernels/gla/bench/bench_gla_cuda),
# used as they are, so that a call spends no time building; the stages that need the test binaries then skip.
B=${SPB_PREBUILT:-build-gpu}
t0=$(date +%s)
stamp() { echo "[gpu_session +$(( $(date +%s) - t0 ))s] $*"; }

stamp "machine: $(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
nvidia-smi topo -m >> "$LOG" 2>&1 || true
mkdir -p build-deps && for f in .deps/*.deb; do dpkg -x "$f" build-deps; done
if [ -n "${SPB_PREBUILT:-}" ]; then
  [ -x $B/spbench ] || { echo "gpu_session: SPB_PREBUILT=$B has no spbench" >&2; exit 1; }
  stamp "prebuilt binaries in $B"
else
  if [ ! -x $B/spbench ]; then
    cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DNCCL_ROOT="$NCCL_ROOT" -DSPB_DEPS_PREFIX="$PWD/build-deps" \
      >> "$LOG" 2>&1 || { tail -30 "$LOG"; exit 1; }
  fi
  cmake --build $B -j "$(nproc)" >> "$LOG" 2>&1 || { grep -E "error" -A3 "$LOG" | head -60; exit 1; }
  stamp "built"
fi
gpus=$(nvidia-smi -L | wc -l)
machine=$(spb_gpu_machine)
MPI=(mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x SPB_GIT_SHA)
shown="^ |wrong|error"
spb_sweep_begin
# sweep LEVEL SCRIPT: scripts/SCRIPT over this build, its rows in $OUT/<machine>_<LEVEL>.csv
sweep() {
  spb_config "scripts/$2" "" "^\[|^ |^sweep:|wrong|error" \
    env SPB_BUILD="$(realpath "$B")" SPB_CSV="$OUT/${machine}_$1.csv" bash "scripts/$2"
}
gpu_ctest() { (cd $B && ctest "$@"); }
# gpu_tests LABEL REGEX: the GPU tests matching REGEX, one configuration; said and not counted where $B has no test
# binaries (a SPB_PREBUILT folder).
gpu_tests() {
  if [ ! -f $B/CTestTestfile.cmake ]; then stamp "$1: no test binaries in $B, not run"; return; fi
  spb_config "$1" "" "tests passed|tests skipped|Failed|Not Run|\*\*\*|loss:" \
    gpu_ctest -R "$2" --output-on-failure --timeout 300
}

for stage in "${@:-all}"; do
  case $stage in
  test|all)
    stamp "ctest (GPU tests)"
    gpu_tests "ctest: the GPU tests" "gla_cuda|device_cuda|gpu|nccl" ;;&
  bench|all)
    if [ -x $B/kernels/gla/bench/bench_gla_cuda ]; then
      stamp "kernel benchmark"
      spb_config "bench_gla_cuda" "$OUT/${machine}_kernel.csv" "^[A-Za-z]|^-" \
        env SPB_CSV="$OUT/${machine}_kernel.csv" timeout 200 $B/kernels/gla/bench/bench_gla_cuda
    fi ;;&
  collective|all)
    stamp "collective sweep"
    for P in 2 4; do
      [ "$P" -le "$gpus" ] || continue
      probe=""; [ "$P" -eq 2 ] && probe=--probe
      coll=$OUT/${machine}_collective.csv
      # Every pattern in both timings: latency (each call alone after a barrier, the paper's Table 2) and back to
      # back (a throughput; the simulation's calibration fits those rows).
      for t in latency back-to-back; do
        spb_config "collective, every pattern, $P GPUs, $t" "$coll" "$shown" "${MPI[@]}" -np $P $B/spbench \
          collective --backend gpu -b 64K -e 32M -f 2 --block-elems 16384 --timing $t $probe --csv "$coll"
        probe=""
      done
      for proto in host device-flag; do
        spb_config "collective allscan $proto over block sizes, $P GPUs" "$coll" "$shown" "${MPI[@]}" -np $P \
          $B/spbench collective --backend gpu -p allscan -b 1M -e 2M --block-elems 1024,4096,16384,65536,262144 \
          --allscan $proto --timing back-to-back --csv "$coll"
      done
      # The default protocol and LASP-2's all-gather with an event after every 10 calls (nccl-tests' loop timing):
      # what the per-call event itself costs.
      spb_config "collective, an event every 10 calls, $P GPUs" "$coll" "$shown" "${MPI[@]}" -np $P $B/spbench \
        collective --backend gpu -p allscan,allgather -b 256K -e 8M -f 2 --timing back-to-back --calls-per-event 10 \
        --csv "$coll"
      # The other device protocols over the state sizes (the packet ones ignore the block size), in both timings.
      for proto in device-flag device-ll; do
        for t in latency back-to-back; do
          spb_config "collective allscan $proto, $P GPUs, $t" "$coll" "$shown" "${MPI[@]}" -np $P $B/spbench \
            collective --backend gpu -p allscan -b 64K -e 32M -f 2 --block-elems 16384 --allscan $proto --timing $t \
            --csv "$coll"
        done
      done
    done ;;&
  operator|all)
    stamp "operator sweep"
    sweep operator sweep_gpu.sh ;;&
  model|all)
    stamp "model level: GPU tests, the PyTorch reference, GLA-1B sweep"
    gpu_tests "ctest: the model level" "^model"
    spb_config "the PyTorch reference" "" "passed|failed|FAIL|skipped|error" \
      bash tests/model/check_against_torch.sh $B/spbench "$OUT/torch"
    spb_config "fla's own GLAForCausalLM" "" "^grad|worst|passed|FAIL|skipped|==" \
      bash tests/model/check_against_fla.sh $B/spbench "$OUT/fla_check"
    sweep model sweep_model_gpu.sh ;;&
  fla|all)
    # PyTorch + fla beside spbench on this machine's first GPU (fla's source in .fla/, its Triton cache in
    # .triton/triton when carried: baselines/pytorch/README.md).
    stamp "GLA-1B: spbench beside PyTorch + fla, one GPU"
    export PYTHONPATH=$PWD/.fla${PYTHONPATH:+:$PYTHONPATH} TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$PWD/.triton/triton} \
      TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/.triton/inductor}
    # fla autotunes its kernels in the first process of a shape and keeps every candidate loaded there (about 3.6 GiB
    # at GLA-1B's shapes, which the driver's used memory counts): one step per shape and precision in a process of its
    # own fills the cache first, so that each measured process loads only the kernels chosen.
    for cfg in ${FLA_CONFIGS:-32:16384 4:16384}; do
      for precision in ${FLA_PRECISIONS:-bf16 fp32-autocast-bf16 bf16-fp32-master}; do
        spb_config "fla's kernels autotuned, ${cfg%%:*} heads, ${cfg##*:} tokens, $precision" "" "first step|error" \
          python3 baselines/pytorch/fla_baseline.py --heads "${cfg%%:*}" --seq "${cfg##*:}" --precision "$precision" \
          --warmup 0 --steps 1
      done
    done
    spb_config "spbench beside PyTorch + fla" "" "^\[beside\]|^  |^ +dp|FAIL|error" \
      bash baselines/pytorch/run_beside_spbench.sh $B/spbench "$OUT" "$machine" ;;&
  model-profile|all)
    stamp "model level: where a GLA-1B step's time goes (16384 tokens, 32 and 4 heads)"
    for H in 32 4; do
      spb_config "model profile, $H heads" "" "^" \
        "${MPI[@]}" -np 1 $B/spbench model --backend gpu -m dp -H $H -L 16384 -w 3 -n 5 --profile 5 --log-every 0 -c 0
    done ;;&
  model-schedules|all)
    stamp "model level at P > 1: dp and zeco with each gradient schedule (16384 tokens, 32 heads)"
    for args in --no-grad-overlap --shard-optimizer; do
      SPB_WORLDS="2 4 8" SPB_MODEL_LENGTHS=16384 SPB_MODEL_HEADS=32 SPB_MODEL_METHODS=dp,zeco SPB_MODEL_ARGS=$args \
        sweep model sweep_model_gpu.sh
    done ;;&
  nodes|all)
    stamp "nodes simulated on this host, NCCL between them over its network"
    sweep collective sweep_nodes_gpu.sh ;;&
  stages)
    # Every method's stage calls at the paper's operator shapes on 1, 2 and 4 GPUs (sim/stage_table.h), and the
    # single-device GLA that ulysses runs on each rank at 8 and 16 GPUs (16 / P heads over P x 16384 tokens).
    stamp "stage times"
    stage_csv=$OUT/${machine}_stages.csv
    for P in 1 2 4; do
      [ "$P" -le "$gpus" ] || continue
      for L in 16384 32768; do
        spb_config "stage times, every method on $P GPUs, -L $L" "" "$shown" "${MPI[@]}" -np $P $B/spbench operator \
          --backend gpu -m all -B 1 -H 16 --dk 128 --dv 128 -L $L -K 16 -w 5 -n 20 --stage-times "$stage_csv"
      done
    done
    for P in 8 16; do
      spb_config "stage times, ulysses' GLA at $P GPUs" "" "$shown" "${MPI[@]}" -np 1 $B/spbench operator --backend gpu \
        -m dp -B 1 -H $((16 / P)) --dk 128 --dv 128 -L $((16384 * P)) -w 5 -n 20 --stage-times "$stage_csv"
    done ;;
  model-stages)
    # The GPU time of every kernel call of a GLA-1B step (the model's and the SP method's GLA stages, by shape) at the
    # model rows' configurations on 4 GPUs: what a simulated model step replays (sim/model_stage_table.h). Each
    # rank's shapes are those of every P at these tokens per GPU.
    stamp "model stage times"
    [ "$gpus" -ge 4 ] || { stamp "model-stages: needs 4 GPUs, this machine has $gpus"; continue; }
    for cfg in "all 32 16384 4" "dp,zeco 4 16384 32" "dp,zeco 32 32768 4"; do
      read -r m H L K <<<"$cfg"
      spb_config "model stage times, $m on 4 GPUs, $H heads, $L tokens per GPU" "" "$shown" "${MPI[@]}" -np 4 \
        $B/spbench model --backend gpu -m "$m" -H "$H" -L "$L" -K "$K" -w 2 -n 10 --log-every 0 \
        --stage-times "$OUT/${machine}_model_stages.csv"
    done ;;
  three)
    # Three GPUs at every level: between the P = 2 that calibrates the simulation and the P = 4 it is held out on.
    # ulysses cannot run there (16 and 32 heads do not split over 3 ranks): `-m all` leaves it out and says so.
    # SPB_THREE_LEVELS picks levels (default: collective operator model).
    levels=" ${SPB_THREE_LEVELS:-collective operator model} "
    stamp "three GPUs:$levels"
    coll=$OUT/${machine}_collective.csv op=$OUT/${machine}_operator.csv
    if [[ $levels == *" collective "* ]]; then
      # alltoall splits the state over the ranks: no power of two splits over 3.
      spb_config "collective, every pattern but alltoall, 3 GPUs" "$coll" "$shown" "${MPI[@]}" -np 3 $B/spbench \
        collective --backend gpu -p allscan,allgather,chain,ring -b 64K -e 32M -f 2 --block-elems 16384 --csv "$coll"
      for proto in device-flag device-ll host; do
        spb_config "collective allscan $proto, 3 GPUs" "$coll" "$shown" "${MPI[@]}" -np 3 $B/spbench collective \
          --backend gpu -p allscan -b 64K -e 32M -f 2 --block-elems 16384 --allscan $proto --csv "$coll"
      done
    fi
    if [[ $levels == *" operator "* ]]; then
      for L in 16384 32768; do
        spb_config "every method on 3 GPUs, -L $L" "$op" "$shown" "${MPI[@]}" -np 3 $B/spbench operator \
          --backend gpu -m all -B 1 -H 16 --dk 128 --dv 128 -L $L -K 16 -w 5 -n 50 --csv "$op"
      done
    fi
    if [[ $levels == *" model "* ]]; then
      SPB_WORLDS=3 SPB_MODEL_LENGTHS=16384 SPB_MODEL_HEADS=32 SPB_MODEL_METHODS=dp,zeco,lasp2 \
        sweep model sweep_model_gpu.sh
    fi ;;
  two-nodes)
    # Two nodes of two GPUs on this host, NCCL over sockets between them (DESIGN §10): the collective sweep of
    # sweep_nodes_gpu.sh, every method at the operator level, dp, zeco and lasp2 at the model level (whose gradient
    # all-reduce over sockets takes over a second a step: 2 warm-up steps and 10 timed).
    stamp "two nodes of two GPUs over sockets: collective, operator, model"
    [ "$gpus" -ge 4 ] || { stamp "two-nodes: needs 4 GPUs, this machine has $gpus"; continue; }
    sweep collective sweep_nodes_gpu.sh
    nodes=(--ranks-per-node 2 --nodes-over-network)
    spb_config "every method on 2 nodes x 2 GPUs, -L 16384" "$OUT/${machine}_operator.csv" "$shown" "${MPI[@]}" \
      -np 4 $B/spbench operator --backend gpu -m all -B 1 -H 16 --dk 128 --dv 128 -L 16384 -K 16 -w 5 -n 50 \
      "${nodes[@]}" --csv "$OUT/${machine}_operator.csv"
    spb_config "GLA-1B on 2 nodes x 2 GPUs" "$OUT/${machine}_model.csv" "$shown|step [0-9]+/" "${MPI[@]}" -np 4 \
      $B/spbench model --backend gpu -m dp,zeco,lasp2 -H 32 -L 16384 -K 4 -w 2 -n 10 "${nodes[@]}" \
      --csv "$OUT/${machine}_model.csv" ;;
  faults)
    # A hung rank and a dead one on GPUs 0 and 1: under zeco's device All-Scan, under NCCL (lasp2), in the model's
    # step. Each case's last line gives the seconds from the signal to the end of the job (rank_fault.sh); a hang
    # inside NCCL gets the watchdog's line with the NCCL operation named.
    # SPB_FAULT_CASES picks cases by name (default: all).
    stamp "faults: a rank stopped and a rank killed, two GPUs, SPB_TIMEOUT_S=10"
    fault_op=(operator --backend gpu -H 16 --dk 128 --dv 128 -L 16384 -w 5 -n 3000 -c 0)
    fault_model=(model --backend gpu --layers 2 -H 32 -L 16384 -w 2 -n 150 -c 0)
    for sig in STOP KILL; do
      for case in "zeco-device|${fault_op[*]} -m dp,zeco --allscan device" "lasp2-nccl|${fault_op[*]} -m dp,lasp2" \
                  "model-zeco|${fault_model[*]} -m dp,zeco"; do
        name=${case%%|*}
        [[ " ${SPB_FAULT_CASES:-$name-$sig} " == *" $name-$sig "* ]] || continue
        csv=$OUT/fault_${name}_${sig}.csv
        # shellcheck disable=SC2086  # the case's arguments are words
        spb_config "fault: SIG$sig to a rank, $name" "" "^ok:|^FAIL|^spbench: error|watchdog" \
          env SPB_TIMEOUT_S=10 SPB_SPIN_TIMEOUT_S=5 CUDA_VISIBLE_DEVICES=0,1 bash tests/harness/rank_fault.sh \
          --signal "$sig" "$csv" -- "${MPI[@]}" -x SPB_TIMEOUT_S -x SPB_SPIN_TIMEOUT_S -x CUDA_VISIBLE_DEVICES -np 2 \
          $B/spbench ${case#*|} --csv "$csv"
        rm -f "$csv"
      done
    done
    # The NCCL communicator's own fault cases (tests/runtime/test_communicator_nccl.cpp, disabled in ctest because
    # they end the process): a peer that never arrives on first contact (the host blocks in NCCL) and on the GPU.
    t=$B/tests/test_communicator_nccl
    if [[ -x $t ]]; then
      for case in FirstContact:nccl-first-contact OnTheGpu:nccl-on-gpu; do
        [[ " ${SPB_FAULT_CASES:-${case#*:}} " == *" ${case#*:} "* ]] || continue
        spb_config "fault: NCCL peer missing, ${case#*:}" "" "^spbench: error|^ok:|^FAIL" bash -c '
          out=$("$@" 2>&1); rc=$?; echo "$out" | grep -E "^spbench: error|\[fault\]"
          if [ $rc -ne 0 ] && echo "$out" | grep -qE "^spbench: error: rank 1 waited [0-9]+ s in NCCL recv"; then
            echo "ok: exit $rc, the watchdog line above"; else echo "FAIL: exit $rc"; echo "$out" | tail -20; exit 1; fi
        ' _ env SPB_TIMEOUT_S=5 CUDA_VISIBLE_DEVICES=0,1 "${MPI[@]}" -x SPB_TIMEOUT_S -x CUDA_VISIBLE_DEVICES -np 2 \
          "$t" --gtest_also_run_disabled_tests --gtest_filter="*MissingPeer${case%%:*}"
      done
    fi ;;
  model-sweep)
    # The GLA-1B sweep alone (no tests, no reference checks): SPB_WORLDS, SPB_MODEL_LENGTHS, SPB_MODEL_HEADS and
    # SPB_MODEL_METHODS pick its configurations (scripts/sweep_model_gpu.sh).
    stamp "model sweep: worlds ${SPB_WORLDS:-all}, ${SPB_MODEL_LENGTHS:-16384 32768} tokens, ${SPB_MODEL_HEADS:-32 4} heads"
    sweep model sweep_model_gpu.sh ;;
  timeline|all)
    stamp "timelines"
    for overlap in 0 1 2; do
      spb_config "timeline, --overlap $overlap" "" "$shown" "${MPI[@]}" -np "$gpus" $B/spbench operator --backend gpu \
        -m zeco,lasp2,ring,dp -B 1 -H 16 --dk 128 --dv 128 -L 16384 -K 16 --overlap $overlap -w 5 -n 10 \
        --timeline-iters 10 --timeline "$OUT/${machine}_timeline.csv"
    done ;;
  esac
done
stamp "done"
spb_sweep_end
