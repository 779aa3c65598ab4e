# Shared by the README's two commands: install what is missing (Debian packages), configure and build.
# Sourced, not run.
set -euo pipefail
SPB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SPB_BUILD=${SPB_BUILD:-$SPB_ROOT/build}

spb_log() { printf '[spbench] %s\n' "$*"; }
source "$SPB_ROOT/scripts/machine.sh"

# The Debian packages of DESIGN §8 (and the toolchain), installed only where missing.
spb_install_deps() {
  local pkgs=(cmake ninja-build g++ git libopenmpi-dev openmpi-bin libgtest-dev libgmock-dev libbenchmark-dev
              libcli11-dev nlohmann-json3-dev libfmt-dev libfccp-dev gnuplot-nox)
  local missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if ! command -v apt-get >/dev/null; then
      spb_log "missing packages (${missing[*]}) and no apt-get: install them by hand"; return 1
    fi
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
    spb_log "installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# OpenMPI refuses root and more ranks than cores unless told; CI and containers are both.
spb_mpi_env() {
  if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  export OMPI_MCA_rmaps_base_oversubscribe=1
}

# spb_build [TARGET...]: everything by default.
spb_build() {
  local cuda_args=()
  if [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
    cuda_args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  fi
  spb_log "configuring $SPB_BUILD"
  cmake -S "$SPB_ROOT" -B "$SPB_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" ${SPB_CMAKE_ARGS:-} >/dev/null
  spb_log "building (this takes a few minutes on 2 cores)"
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$SPB_BUILD" -j "$(nproc)" "${targets[@]}"
}

# spb_results_csv MACHINE LEVEL SPBENCH: the path results/<MACHINE>_<LEVEL>.csv, the one file of that machine and level
# (a rerun of the same commit appends to it and skips the rows already there). Rows of another commit in it are
# superseded: the file moves to results/archive/<MACHINE>_<LEVEL>_<its sha>.csv, with a line in archive/README.md
# saying which commit superseded it, and the new run starts a fresh file.
spb_results_csv() {
  local machine=$1 level=$2 spbench=$3 dir=$SPB_ROOT/results
  local csv=$dir/${machine}_${level}.csv sha old
  sha=$("$spbench" --version | awk '{print $2}')
  if [ -s "$csv" ]; then
    old=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "git_sha") c = i; next }
                   c && $c != "" { print $c }' "$csv" | sort -u | grep -vxF "$sha" | head -1 || true)
    if [ -n "$old" ]; then
      mkdir -p "$dir/archive"
      mv "$csv" "$dir/archive/${machine}_${level}_${old}.csv"
      printf '| `%s_%s_%s.csv` | superseded by a run of %s on %s |\n' "$machine" "$level" "$old" "$sha" \
        "$(date -u +%Y-%m-%d)" >> "$dir/archive/README.md"
      spb_log "results/${machine}_${level}.csv held rows of $old: moved to results/archive/ (this run is $sha)" >&2
    fi
  fi
  mkdir -p "$dir"
  echo "$csv"
}

# spb_gpu_sweep LEVEL: what a sweep on this node's GPUs shares: the environment (no NVLink multicast), SPB (the
# binary), gpus, machine (SPB_MACHINE, else nvidia-<model>-x<GPUs>), csv (SPB_CSV, else spb_results_csv's)
# and worlds (1, 2, 4, 8 up to the GPUs present; SPB_WORLDS, e.g. "2 4", picks some of them).
spb_gpu_sweep() {
  spb_mpi_env
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # never NVLink multicast on shared machines
  SPB=$SPB_BUILD/spbench
  gpus=$(nvidia-smi -L | wc -l)
  machine=$(spb_gpu_machine)
  csv=${SPB_CSV:-$(spb_results_csv "$machine" "$1" "$SPB")}
  mkdir -p "$(dirname "$csv")"
  worlds=(); for P in ${SPB_WORLDS:-1 2 4 8}; do if [ "$P" -le "$gpus" ]; then worlds+=("$P"); fi; done
}
