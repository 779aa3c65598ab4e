#!/usr/bin/env bash
# Development sweep of the device All-Scan's packet protocols (device-ll, device-ll16) over the kernel's run-time
# knobs, SPB_ALLSCAN_CTAS x SPB_ALLSCAN_UNROLL, at P=4 and P=2 (zeco/NOTES.md, "The device All-Scan"). Needs a
# built spbench and >= 4 GPUs (P=4 is skipped on fewer).
#   usage: tools/dev_allscan.sh [BUILD_DIR]     BUILD_DIR: $SPB_BUILD, else build-gpu (scripts/gpu_session.sh
#          builds that one: `bash scripts/gpu_session.sh build` builds and runs no stage)
#   OUT               output folder (default ./out):
#                       allscan_sweep/<proto>_P<P>_ctas<C>_unroll<U>.csv  one CSV per configuration (the CSV key has
#                                         no knobs, so a shared file would skip every configuration after the first)
#                       allscan_summary.csv   every configuration's median per size in one table
#                       allscan_sweep.log     spbench's own output
#   SPB_DEV_PACK=1    (default) at the end, pack allscan_sweep/ into allscan_sweep.tar.gz and remove the folder: the
#                     device tool brings back at most 8 files. SPB_DEV_PACK=0 keeps the folder.
#   SPB_DEV_BUDGET_S  start no configuration after this many seconds (default 110); the most telling ones run first
#   SPB_DEV_ITERS     timed calls per size (default 50, after 5 untimed)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${1:-${SPB_BUILD:-build-gpu}}
OUT=${OUT:-$PWD/out}
dir=$OUT/allscan_sweep
log=$OUT/allscan_sweep.log
budget=${SPB_DEV_BUDGET_S:-110}
iters=${SPB_DEV_ITERS:-50}
[ -x "$B/spbench" ] || { echo "no $B/spbench: build it first (bash scripts/gpu_session.sh build)"; exit 1; }
mkdir -p "$dir"
: > "$log"
source scripts/gpu_env.sh
gpus=$(nvidia-smi -L | wc -l)
t0=$(date +%s)

# Configurations "proto P ctas unroll", most telling first (the budget cuts the tail): the defaults, the CTA count,
# the units per round, the rest of the P=4 grid, then P=2 (one hop: the link and the kernel without the chain).
configs=()
add() { for c in "$@"; do [[ " ${configs[*]} " == *" $c "* ]] || configs+=("$c"); done; }
for proto in ll16 ll; do add "$proto 4 32 8"; done
for ctas in 64 16 128; do for proto in ll16 ll; do add "$proto 4 $ctas 8"; done; done
for unroll in 4 2 1; do for proto in ll16 ll; do add "$proto 4 32 $unroll"; done; done
for ctas in 64 128 16; do
  for unroll in 4 2 1; do for proto in ll16 ll; do add "$proto 4 $ctas $unroll"; done; done
done
for ctas in 32 64 16 128; do for proto in ll16 ll; do add "$proto 2 $ctas 8"; done; done

MPI="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x SPB_GIT_SHA"
MPI+=" -x SPB_ALLSCAN_CTAS -x SPB_ALLSCAN_UNROLL"  # rank 0 reads them and broadcasts
i=0; ran=0
for c in "${configs[@]}"; do
  read -r proto P ctas unroll <<<"$c"
  i=$((i + 1))
  [ "$P" -le "$gpus" ] || continue
  el=$(( $(date +%s) - t0 ))
  if [ "$el" -ge "$budget" ]; then
    echo "[dev_allscan +${el}s] budget of ${budget}s spent: $(( ${#configs[@]} - i + 1 )) configurations not run"; break
  fi
  name=${proto}_P${P}_ctas${ctas}_unroll${unroll}
  csv=$dir/$name.csv
  rm -f "$csv"
  echo "### $name" >> "$log"
  SPB_ALLSCAN_CTAS=$ctas SPB_ALLSCAN_UNROLL=$unroll timeout 60 $MPI -np "$P" "$B/spbench" collective --backend gpu \
    -p allscan --allscan "device-$proto" -b 256K -e 8M -f 2 -w 5 -n "$iters" --csv "$csv" >> "$log" 2>&1
  rc=$?
  ran=$((ran + 1))
  # A failed check prints WRONG; an exception, "error" in its message (the header's "error" column is not followed
  # by a colon).
  bad=$(sed -n "/^### $name\$/,\$p" "$log" | grep -cE "WRONG|wrong results: [1-9]|[Ee]rror:|did not arrive")
  note=""; [ "$bad" -gt 0 ] && note="  ($bad lines with WRONG or an error: see $log)"
  echo "[dev_allscan +$(( $(date +%s) - t0 ))s] $i/${#configs[@]} $name rc=$rc$note"
done

# The summary: median microseconds per state size, one line per configuration, then the best per protocol, P, size.
python3 - "$dir" "$OUT/allscan_summary.csv" <<'EOF'
import csv, glob, os, re, sys
d, out = sys.argv[1], sys.argv[2]
rows = {}  # (proto, P, ctas, unroll) -> {bytes: median_us}
for f in sorted(glob.glob(os.path.join(d, "*.csv"))):
    m = re.match(r"(\w+)_P(\d+)_ctas(\d+)_unroll(\d+)\.csv$", os.path.basename(f))
    if not m:
        continue
    key = (m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))
    with open(f) as fh:
        for r in csv.DictReader(fh):
            if r.get("method") == "allscan" and r.get("time_ms_median"):
                rows.setdefault(key, {})[int(r["bytes"])] = float(r["time_ms_median"]) * 1e3
sizes = sorted({b for v in rows.values() for b in v})
label = lambda b: f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K"
with open(out, "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["proto", "P", "ctas", "unroll"] + [f"median_us_{label(b)}" for b in sizes])
    for k in sorted(rows):
        w.writerow(list(k) + [f"{rows[k][b]:.2f}" if b in rows[k] else "" for b in sizes])
print("\nmedian us per call (back to back); a blank: no row (not run, or the check failed)")
print(f"{'proto':6} {'P':>2} {'ctas':>4} {'unroll':>6} " + " ".join(f"{label(b):>7}" for b in sizes))
for k in sorted(rows, key=lambda k: (-k[1], k[0], k[2], k[3])):
    print(f"{k[0]:6} {k[1]:>2} {k[2]:>4} {k[3]:>6} " +
          " ".join(f"{rows[k][b]:7.2f}" if b in rows[k] else f"{'':7}" for b in sizes))
print("\nbest configuration (ctas/unroll: us) per protocol, P and size")
for proto, P in sorted({(k[0], k[1]) for k in rows}, key=lambda x: (-x[1], x[0])):
    cells = []
    for b in sizes:
        cand = [(v[b], k) for k, v in rows.items() if k[0] == proto and k[1] == P and b in v]
        cells.append(f"{label(b)} {min(cand)[1][2]}/{min(cand)[1][3]}: {min(cand)[0]:.1f}" if cand else f"{label(b)} -")
    print(f"{proto:6} P={P}  " + "  ".join(cells))
EOF
if [ "${SPB_DEV_PACK:-1}" = 1 ]; then
  tar -C "$OUT" -czf "$OUT/allscan_sweep.tar.gz" allscan_sweep && rm -rf "$dir"
  echo "per-configuration CSVs: $OUT/allscan_sweep.tar.gz (SPB_DEV_PACK=0 keeps the folder)"
fi
echo "[dev_allscan +$(( $(date +%s) - t0 ))s] $ran configurations run; summary $OUT/allscan_summary.csv, log $log"
