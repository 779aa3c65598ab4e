#!/usr/bin/env bash
# Builds the CUDA Gated DeltaNet kernels (kernels/gdn/cuda/) for the CPU emulation (cuda_emu.h) and runs
# emu_gdn_check: a desk check of their logic against the fp64 token loop on a machine without a GPU. Usage:
# tools/emu/emu_gdn_check.sh [quick|long] (from anywhere): quick runs the small shapes only, long one sequence of 16
# chunks alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${EMU_OUT:-$root/build-emu-gdn}
mkdir -p "$out/src"
cd "$root"
for f in gdn_cuda gdn_forward gdn_backward gdn_dense; do
  # The rewrite of emu_check.sh: launches become emu::launch calls, dynamic shared memory the emulated block's buffer.
  python3 - "kernels/gdn/cuda/$f.cu" "$out/src/$f.cpp" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r'([A-Za-z_][A-Za-z_0-9]*(?:<[^<>;]*>)?)<<<([^>]*)>>>\(', r'::emu::launch(\1, \2, ', s)
s = re.sub(r'extern __shared__ __align__\(16\) unsigned char (\w+)\[\];', r'unsigned char* \1 = ::emu::shared_mem();', s)
s = s.replace('cudaFuncSetAttribute(', '::emu::func_set_attribute(').replace('SPB_CUDA_LAUNCH()', '(void)0')
open(sys.argv[2], 'w').write(s)
PY
done
CXX=${CXX:-g++}
flags="-std=c++17 -O2 -pthread -I$root -I/usr/local/cuda/include -w"
objs=()
for f in "$out"/src/*.cpp; do
  o="$out/$(basename "$f" .cpp).o"
  $CXX $flags -include tools/emu/cuda_emu.h -c "$f" -o "$o" &
  objs+=("$o")
done
for f in runtime/error.cpp kernels/gdn/cpu/gdn_reference.cpp tools/emu/emu_gdn_check.cpp; do
  o="$out/$(basename "$f" .cpp).host.o"
  $CXX $flags -c "$f" -o "$o" &
  objs+=("$o")
done
for job in $(jobs -p); do wait "$job" || { echo "emu_gdn_check: a compile failed" >&2; exit 1; }; done
$CXX -pthread "${objs[@]}" -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64 -o "$out/emu_gdn_check"
"$out/emu_gdn_check" "$@"
