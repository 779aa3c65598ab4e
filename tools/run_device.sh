#!/usr/bin/env bash
# One call of a lent GPU machine for the CUDA GLA kernels: build the kernel test and the benchmark, run the
# stages named on the command line, logs and CSV to $OUT. From the repository root, with .deps/ (the header-only
# packages as .deb files) carried:
#   bash tools/run_device.sh test bench sanitize
# Falls back to a direct nvcc build of just these two programs when the project's CMake configure or build fails.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
NCCL_ROOT=${NCCL_ROOT:-$(python3 -c 'import nvidia.nccl, os; print(nvidia.nccl.__path__[0])' 2>/dev/null)}
export LD_LIBRARY_PATH=$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
stamp() { echo "[+$(($(date +%s) - t0))s] $*"; }
stamp "$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | head -1)"
J=$(nproc)

B=build-k
TEST=$B/tests/test_gla_cuda
BENCH=$B/kernels/gla/bench/bench_gla_cuda
mkdir -p build-deps
for f in .deps/*.deb; do [ -f "$f" ] && dpkg -x "$f" build-deps; done
# -include cstdint: some project sources rely on <cstdint> arriving transitively, which GCC 13 does not do.
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DNCCL_ROOT="$NCCL_ROOT" -DSPB_DEPS_PREFIX="$PWD/build-deps" \
  -DCMAKE_CXX_FLAGS="-include cstdint" >"$OUT/build.log" 2>&1 &&
  cmake --build $B -j "$J" --target test_gla_cuda bench_gla_cuda -- -k 0 >>"$OUT/build.log" 2>&1
if [ -x $TEST ] && [ -x $BENCH ]; then
  stamp "built with CMake"
else
  stamp "CMake build incomplete (build.log); direct build of what is missing"
  grep -E "error" "$OUT/build.log" | sort -u | head -8
  F=build-fb
  mkdir -p $F
  NV="nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I. -DSPB_HAVE_CUDA=1 -lineinfo"
  CX="g++ -std=c++17 -O2 -fopenmp -include cstdint -I. -I/usr/local/cuda/include -DSPB_HAVE_CUDA=1"
  objs=()
  for f in kernels/gla/cuda/gla_cuda.cu kernels/gla/cuda/gla_states.cu kernels/gla/cuda/gla_intra.cu \
    kernels/gla/cuda/gla_dqk.cu runtime/device_cuda.cu; do
    o=$F/$(echo "$f" | tr / _).o
    $NV -c "$f" -o "$o" >>"$OUT/build.log" 2>&1 &
    objs+=("$o")
  done
  for f in runtime/error.cpp runtime/device_cpu.cpp sp/inputs.cpp runtime/npy.cpp runtime/stats.cpp \
    kernels/gla/gla.cpp kernels/gla/cpu/gla_cpu.cpp kernels/gla/cpu/gla_reference.cpp; do
    o=$F/$(echo "$f" | tr / _).o
    $CX -c "$f" -o "$o" >>"$OUT/build.log" 2>&1 &
    objs+=("$o")
  done
  [ -x $TEST ] || $CX -c tests/kernels/gla/test_gla_cuda.cpp -o $F/test.o >>"$OUT/build.log" 2>&1 &
  [ -x $BENCH ] || $NV -DSPB_BENCH_CSV=0 -c kernels/gla/bench/bench_gla_cuda.cu -o $F/bench.o >>"$OUT/build.log" 2>&1 &
  wait
  L="-L/usr/local/cuda/lib64 -lcudart -lgomp -lpthread"
  if [ ! -x $TEST ]; then
    $NV "${objs[@]}" $F/test.o -lgtest_main -lgtest $L -o $F/test_gla_cuda >>"$OUT/build.log" 2>&1
    TEST=$F/test_gla_cuda
  fi
  if [ ! -x $BENCH ]; then
    $NV "${objs[@]}" $F/bench.o -lbenchmark -lcublas $L -o $F/bench_gla_cuda >>"$OUT/build.log" 2>&1
    BENCH=$F/bench_gla_cuda
  fi
  grep -E "error" "$OUT/build.log" | sort -u | head -20
  stamp "direct build done"
fi

for stage in "$@"; do
  case $stage in
  test)
    stamp "test"
    timeout 150 $TEST >"$OUT/test.log" 2>&1
    echo "test exit $?"
    grep -E "^\[ errors|FAILED|PASSED|Failure|Expected|Which is|which is" "$OUT/test.log" | head -80 ;;
  bench)
    stamp "bench"
    timeout 200 $BENCH --csv="$OUT/bench.csv" >"$OUT/bench.log" 2>&1
    echo "bench exit $?"
    grep -vE "^\s*$" "$OUT/bench.log" | tail -45 ;;
  ncu)
    stamp "ncu (one fwd_bwd of the first shape)"
    timeout 90 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats \
      --launch-skip 5 --launch-count 10 $BENCH --profile >"$OUT/ncu.log" 2>&1
    echo "ncu exit $?"
    grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Block Limit (Registers|Shared)" "$OUT/ncu.log" | head -90 ;;
  sanitize)
    stamp "compute-sanitizer"
    f='*B2T65H2_dk32_dv48_strong_h0_dht*:*B1T91H2_dk13*:*B1T100H2_dk48_dv64_extreme*:*B2T65H1_dk40_dv72_model_h0_dht_bk32*:CudaHelpers.*'
    timeout 70 compute-sanitizer --tool memcheck --error-exitcode 9 $TEST --gtest_filter="$f" >"$OUT/sanitize.log" 2>&1
    echo "memcheck exit $?"
    grep -E "ERROR SUMMARY|Invalid|out of bounds" "$OUT/sanitize.log" | head -10
    timeout 45 compute-sanitizer --tool racecheck --error-exitcode 9 $TEST \
      --gtest_filter='*B2T65H2_dk32_dv48_strong_h0_dht*' >>"$OUT/sanitize.log" 2>&1
    echo "racecheck exit $?"
    grep -E "ERROR SUMMARY|hazard|RACECHECK SUMMARY" "$OUT/sanitize.log" | head -10 ;;
  esac
done
stamp "done"
