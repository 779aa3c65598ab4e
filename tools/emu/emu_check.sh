#!/usr/bin/env bash
# Builds the CUDA GLA kernels for the CPU emulation (cuda_emu.h) and runs emu_check: a desk check of the kernels'
# logic on a machine without a GPU. Usage: tools/emu/emu_check.sh [quick|states|arriving|intra|gates|dqk] (from the
# repository root): no argument runs every check, quick all but the slowest composites, a name that part alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${EMU_OUT:-$root/build-emu}
mkdir -p "$out/src"
cd "$root"
for f in gla_cuda gla_states gla_intra gla_dqk gla_boundary gla_boundary_kernel gla_states_spans; do
  # Launches become emu::launch calls, dynamic shared memory a pointer into the emulated block's buffer.
  python3 - "kernels/gla/cuda/$f.cu" "$out/src/$f.cpp" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r'([A-Za-z_][A-Za-z_0-9]*(?:<[^<>;]*>)?)<<<([^>]*)>>>\(', r'::emu::launch(\1, \2, ', s)
s = re.sub(r'extern __shared__ __align__\(16\) unsigned char (\w+)\[\];', r'unsigned char* \1 = ::emu::shared_mem();', s)
s = re.sub(r'extern __shared__ float (\w+)\[\];', r'float* \1 = reinterpret_cast<float*>(::emu::shared_mem());', s)
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
for f in runtime/error.cpp runtime/device_cpu.cpp sp/inputs.cpp runtime/npy.cpp runtime/stats.cpp kernels/gla/gla.cpp \
         kernels/gla/cpu/gla_cpu.cpp kernels/gla/cpu/gla_reference.cpp tools/emu/emu_check.cpp; do
  o="$out/$(basename "$f" .cpp).host.o"
  $CXX $flags -c "$f" -o "$o" &
  objs+=("$o")
done
for job in $(jobs -p); do wait "$job" || { echo "emu_check: a compile failed" >&2; exit 1; }; done
$CXX -pthread "${objs[@]}" -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64 -o "$out/emu_check"
"$out/emu_check" "$@"
