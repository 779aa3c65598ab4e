# Shared by the README's two commands and the sweeps: install what is missing (Debian packages), configure and build,
# where rows go, and how a sweep runs and counts its configurations. Sourced, not run.
set -euo pipefail
SPB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SPB_BUILD=${SPB_BUILD:-$SPB_ROOT/build}

spb_log() { printf '[spbench] %s\n' "$*"; }
source "$SPB_ROOT/scripts/machine.sh"

# The Debian packages of DESIGN §8 (and the toolchain; SimGrid for the simulated build), installed only where missing.
spb_install_deps() {
  local pkgs=(cmake ninja-build g++ git libopenmpi-dev openmpi-bin libgtest-dev libgmock-dev libbenchmark-dev
              libcli11-dev nlohmann-json3-dev libfmt-dev libfccp-dev gnuplot-nox libsimgrid-dev)
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

# spb_results_csv MACHINE LEVEL SPBENCH: the CSV of this machine and level, <MACHINE>_<LEVEL>.csv in SPB_RESULTS_DIR
# (default results/local/, which git ignores, so that the main job never changes a committed file; a relative path is
# taken from the repository's root, and SPB_RESULTS_DIR=results writes rows to commit). A rerun of the same commit
# appends to it, and spbench skips the rows already there. A file that holds rows of another commit is superseded and
# the new run starts a fresh file: one that git tracks is simply replaced (git keeps the old rows), any other is
# renamed <MACHINE>_<LEVEL>.<its sha>.csv beside it, so that no local row is lost.
spb_results_csv() {
  local machine=$1 level=$2 spbench=$3 dir=${SPB_RESULTS_DIR:-results/local}
  [[ $dir == /* ]] || dir=$SPB_ROOT/$dir
  local csv=$dir/${machine}_${level}.csv sha old kept n=1
  sha=$("$spbench" --version | awk '{print $2}')
  if [ -s "$csv" ]; then
    old=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "git_sha") c = i; next }
                   c && $c != "" { print $c }' "$csv" | sort -u | grep -vxF "$sha" | head -1 || true)
    if [ -n "$old" ]; then
      if git -C "$SPB_ROOT" ls-files --error-unmatch -- "$csv" >/dev/null 2>&1; then
        rm -f "$csv"
        spb_log "$csv held rows of $old: this run ($sha) starts it afresh (git keeps the old rows)" >&2
      else
        kept=$dir/${machine}_${level}.$old.csv
        while [ -e "$kept" ]; do n=$((n + 1)); kept=$dir/${machine}_${level}.$old.$n.csv; done
        mv "$csv" "$kept"
        spb_log "$csv held rows of $old: kept as $kept; this run ($sha) starts a fresh file" >&2
      fi
    fi
  fi
  mkdir -p "$dir"
  echo "$csv"
}

# --- sweeps: every configuration runs through spb_config, which counts it ---
# A sweep calls spb_sweep_begin first and spb_sweep_end last (its exit status: non-zero where a configuration failed;
# its last line: "sweep: N configurations, N ok, N failed, N skipped"). A configuration is ok when its command exits 0
# and adds rows to its CSV (or has no CSV), skipped when it exits 0 and adds none (every row was already there), and
# failed otherwise. SIGINT or SIGTERM stops the sweep at once: the running configuration's processes (mpirun and its
# ranks, which Open MPI puts in process groups of their own) get SIGTERM, then SIGKILL after 10 s, the sweep waits
# until none is left, counts that configuration as failed, prints its last line and exits 130 (SIGINT) or 143
# (SIGTERM). Every row written before stays: spbench writes a row as each finishes.
spb_sweep_begin() {
  SPB_N_OK=0 SPB_N_FAILED=0 SPB_N_SKIPPED=0 SPB_CHILD=""
  SPB_SWEEP_TMP=$(mktemp -d)
  SPB_CONFIG_LOG=$SPB_SWEEP_TMP/config.log
  trap 'spb_sweep_stop INT 130' INT
  trap 'spb_sweep_stop TERM 143' TERM
  trap 'rm -rf "$SPB_SWEEP_TMP"' EXIT
}

spb_sweep_summary() {
  printf 'sweep: %d configurations, %d ok, %d failed, %d skipped\n' \
    $((SPB_N_OK + SPB_N_FAILED + SPB_N_SKIPPED)) "$SPB_N_OK" "$SPB_N_FAILED" "$SPB_N_SKIPPED"
}

spb_sweep_end() {
  spb_sweep_summary
  [ "$SPB_N_FAILED" -eq 0 ]
}

spb_sweep_stop() {  # the traps' handler: SIGNAL EXIT_CODE
  trap '' INT TERM
  spb_log "SIG$1: stopping the sweep (the rows written so far stay)"
  if [ -n "$SPB_CHILD" ]; then
    spb_stop_child
    SPB_N_FAILED=$((SPB_N_FAILED + 1))
  fi
  spb_sweep_summary
  exit "$2"
}

# spb_tree PGID: the processes of that group and all their descendants (mpirun's ranks have groups of their own).
spb_tree() {
  ps -eo pid=,ppid=,pgid= | awk -v g="$1" '
    { pid[NR] = $1; parent[NR] = $2; if ($3 == g) in_tree[$1] = 1 }
    END { do { more = 0; for (i = 1; i <= NR; i++) if (!(pid[i] in in_tree) && (parent[i] in in_tree)) { in_tree[pid[i]] = 1; more = 1 } } while (more)
          for (p in in_tree) print p }'
}

# spb_stop_child: SIGTERM to the running configuration, SIGKILL to what is left after 10 s; returns once none of its
# processes is left (zombies aside).
spb_stop_child() {
  local pids tries=0
  pids=$(spb_tree "$SPB_CHILD")
  kill -TERM -- "-$SPB_CHILD" 2>/dev/null || true
  wait "$SPB_CHILD" 2>/dev/null || true
  while :; do
    pids=$(printf '%s\n' $pids $(spb_tree "$SPB_CHILD") | sort -u)
    [ -n "$(ps -o stat= -p "$(echo $pids | tr ' ' ,)" 2>/dev/null | grep -v '^Z')" ] || break
    tries=$((tries + 1))
    if [ "$tries" -eq 100 ]; then kill -KILL $pids 2>/dev/null || true; fi
    [ "$tries" -lt 150 ] || { spb_log "processes left after SIGKILL: $pids"; break; }
    sleep 0.1
  done
  SPB_CHILD=""
}

# spb_attempt FILTER COMMAND...: runs COMMAND (a program or a shell function) in a process group of its own, with
# its console lines that match the extended regex FILTER shown as they come; all of them are kept in $SPB_CONFIG_LOG
# (and appended to $SPB_SWEEP_LOG where that is set). Returns the command's exit status.
spb_attempt() {
  local filter=$1 rc=0
  shift
  set -m  # job control: the command becomes a process group that a signal can stop whole
  (
    set +e +o pipefail
    "$@" 2>&1 | tee "$SPB_CONFIG_LOG" ${SPB_SWEEP_LOG:+-a "$SPB_SWEEP_LOG"} | grep --line-buffered -E "$filter"
    exit "${PIPESTATUS[0]}"
  ) </dev/null &
  SPB_CHILD=$!
  set +m
  wait "$SPB_CHILD" || rc=$?
  SPB_CHILD=""
  return "$rc"
}

spb_rows() { if [ -n "$1" ] && [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# spb_tally RC CSV ROWS_BEFORE: counts a configuration (see above) and says how it ended where it did not add rows.
spb_tally() {
  local rc=$1 csv=$2 before=$3
  if [ "$rc" -ne 0 ]; then
    SPB_N_FAILED=$((SPB_N_FAILED + 1))
    spb_log "failed (exit $rc): $(grep -m1 -E 'error|WRONG|MPI_ABORT' "$SPB_CONFIG_LOG" || tail -1 "$SPB_CONFIG_LOG")"
  elif [ -n "$csv" ] && [ "$(spb_rows "$csv")" -eq "$before" ]; then
    SPB_N_SKIPPED=$((SPB_N_SKIPPED + 1))
    spb_log "skipped: every row already in $csv"
  else
    SPB_N_OK=$((SPB_N_OK + 1))
  fi
}

# spb_config LABEL CSV FILTER COMMAND...: one configuration of a sweep, counted (CSV: the file its rows go to, or ""
# where it writes none). Its exit status is left in SPB_CONFIG_RC; the function itself returns 0, so that a sweep
# under `set -e` goes on to the next configuration.
spb_config() {
  local label=$1 csv=$2 filter=$3 before
  shift 3
  spb_log "$label"
  before=$(spb_rows "$csv")
  SPB_CONFIG_RC=0
  spb_attempt "$filter" "$@" || SPB_CONFIG_RC=$?
  spb_tally "$SPB_CONFIG_RC" "$csv" "$before"
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
