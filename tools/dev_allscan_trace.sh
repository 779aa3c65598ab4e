#!/usr/bin/env bash
# Where the device All-Scan's fixed cost per call goes (zeco/NOTES.md, "Where a device All-Scan call's time goes"):
# `spbench collective` for one packet protocol (device-ll16) at P=4 and P=2, 256 KiB .. 2 MiB states, back to back,
# with SPB_ALLSCAN_TRACE set (every CTA stamps %globaltimer / %clock64 at entry, end of prologue, first unit in, last
# unit out and exit; see zeco/all_scan_device.h), plus the same runs untraced for the trace's own cost; then a summary
# per (P, size). Needs a built spbench (CUDA) and >= 2 GPUs (P=4 is skipped on fewer than 4). About a minute of GPU
# time.
#   usage: tools/dev_allscan_trace.sh [BUILD_DIR]     BUILD_DIR: $SPB_BUILD, else build-gpu (scripts/gpu_session.sh
#          builds that one: `bash scripts/gpu_session.sh build` builds and runs no stage)
#   OUT                 output folder (default ./out); at most 4 files, the device tool brings back 8:
#                         allscan_trace_summary.txt   the summary (also on stdout)
#                         allscan_trace_calls.csv     per P, size, rank and call: the CTAs' stamps aggregated
#                         allscan_trace.log           spbench's own output
#                         allscan_trace.tar.xz        the raw traces (trace_P<P>.rank<r>.csv and .meta.csv) and
#                                                     spbench's CSVs; left out (and said so) if over 15 MiB
#   SPB_TRACE_PROTO     protocol (default device-ll16; device-ll and device-flag are traced too)
#   SPB_TRACE_WARMUP    untimed calls per size (default 5); SPB_TRACE_ITERS timed calls (default 59): 64 in all,
#                       what the trace ring holds. The summary uses the timed calls only.
#   SPB_TRACE_SIZES     "-b -e" of spbench (default "256K 2M", factor 2: 256K 512K 1M 2M)
#   SPB_TRACE_NP        world sizes to run (default "4 2")
#   SPB_ALLSCAN_CTAS, SPB_ALLSCAN_UNROLL   passed on when set (defaults: the protocol's)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${1:-${SPB_BUILD:-build-gpu}}
OUT=${OUT:-$PWD/out}
proto=${SPB_TRACE_PROTO:-device-ll16}
warm=${SPB_TRACE_WARMUP:-5}
iters=${SPB_TRACE_ITERS:-59}
read -r bmin bmax <<<"${SPB_TRACE_SIZES:-256K 2M}"
nps=${SPB_TRACE_NP:-4 2}
[ -x "$B/spbench" ] || { echo "no $B/spbench: build it first (bash scripts/gpu_session.sh build)"; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/allscan_trace.XXXXXX")
log=$OUT/allscan_trace.log
mkdir -p "$OUT"
: > "$log"
source scripts/gpu_env.sh
gpus=$(nvidia-smi -L | wc -l)
t0=$(date +%s)
stamp() { echo "[dev_allscan_trace +$(( $(date +%s) - t0 ))s] $*"; }

MPI="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x SPB_GIT_SHA"
for v in SPB_ALLSCAN_CTAS SPB_ALLSCAN_UNROLL; do [ -n "${!v:-}" ] && export "$v" && MPI+=" -x $v"; done
ran=""
for P in $nps; do
  [ "$P" -le "$gpus" ] || { stamp "P=$P skipped: $gpus GPUs"; continue; }
  for mode in traced untraced; do
    name=${mode}_P$P
    echo "### $name" >> "$log"
    if [ $mode = traced ]; then
      env=(env SPB_ALLSCAN_TRACE="$dir/trace_P$P"); x="-x SPB_ALLSCAN_TRACE"
    else
      env=(env -u SPB_ALLSCAN_TRACE); x=""
    fi
    "${env[@]}" timeout 120 $MPI $x -np "$P" "$B/spbench" collective --backend gpu -p allscan --allscan "$proto" \
      -b "$bmin" -e "$bmax" -f 2 -w "$warm" -n "$iters" --csv "$dir/$name.csv" >> "$log" 2>&1
    rc=$?
    bad=$(sed -n "/^### $name\$/,\$p" "$log" |
      grep -cE "WRONG|wrong results: [1-9]|[Ee]rror:|did not arrive|trace not written")
    note=""; [ "$bad" -gt 0 ] && note="  ($bad lines with WRONG or an error: see $log)"
    stamp "$name rc=$rc$note"
  done
  ran+=" $P"
done

python3 - "$dir" "$OUT" "$warm" "$proto" $ran <<'EOF' | tee "$OUT/allscan_trace_summary.txt"
# The summary. Clocks: %globaltimer is one clock per GPU (any SM reads the same), so it serves for instants across
# the CTAs of a rank; it is not documented to agree between GPUs, so instants of different ranks are compared only
# through the ping-pong estimate of their offset (meta: prev_offset_ns). %clock64 counts the cycles of one SM, so a
# duration inside one CTA (entry .. exit: a CTA never leaves its SM) can be read from it; it is used instead of the
# globaltimer for those when the globaltimer's step (measured on the GPU) is coarse (> 100 ns), converted at the
# clock64 rate measured against the globaltimer over 2 ms at creation and at destruction (both printed).
import csv, glob, os, statistics as st, sys
d, out, warm, proto = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
Ps = [int(x) for x in sys.argv[5:]]
num = lambda s: int(s) if s not in ("", None) else None
med = lambda v: st.median(v) if v else None
mean = lambda v: sum(v) / len(v) if v else None
label = lambda b: f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"

def spbench_medians(path):
    m = {}
    if os.path.exists(path):
        for r in csv.DictReader(open(path)):
            if r.get("method") == "allscan" and r.get("time_ms_median"):
                m[int(r["bytes"])] = float(r["time_ms_median"]) * 1e3
    return m

calls_out = []  # per P, size, rank and call
lines = []
say = lines.append
say(f"device All-Scan trace, {proto}, back to back; the first {warm} calls per size (untimed) and the gap into the")
say("first timed one (after a barrier) are left out. Durations in us: median over calls [mean over calls where the")
say("globaltimer step makes single values coarse]; 'x/y': per call the median / the max over the CTAs that own units.")
for P in Ps:
    metas, rows = {}, {}
    for r in range(P):
        path, meta = os.path.join(d, f"trace_P{P}.rank{r}.csv"), os.path.join(d, f"trace_P{P}.rank{r}.meta.csv")
        if not os.path.exists(path) or not os.path.exists(meta):
            continue
        for m in csv.DictReader(open(meta)):
            metas[(int(m["scan_id"]), r)] = m
        for x in csv.DictReader(open(path)):
            rows.setdefault((int(x["scan_id"]), r), []).append(x)
    if not rows:
        say(f"\nP={P}: no trace files (see the log)")
        continue
    traced = spbench_medians(os.path.join(d, f"traced_P{P}.csv"))
    untraced = spbench_medians(os.path.join(d, f"untraced_P{P}.csv"))
    for sid in sorted({k[0] for k in rows}):
        per_rank = {}
        info = None
        for r in range(P):
            xs, m = rows.get((sid, r), []), metas.get((sid, r))
            if not xs or not m:
                continue
            info = info or m
            gt_step = float(m["gt_step_ns"])
            ghz = (float(m["clk_ghz_start"]) + float(m["clk_ghz_end"])) / 2
            use_clk = gt_step > 100 and ghz > 0
            def dur(x, a, b):  # ns from stamp a to stamp b of one CTA, None if either is missing
                if use_clk:
                    ca, cb = num(x[a + "_clk"]), num(x[b + "_clk"])
                    return None if ca is None or cb is None else (cb - ca) / ghz
                ga, gb = num(x[a + "_ns"]), num(x[b + "_ns"])
                return None if ga is None or gb is None else gb - ga
            by_call = {}
            for x in xs:
                by_call.setdefault(int(x["call"]), []).append(x)
            c = {}
            for call, ctas in sorted(by_call.items()):
                work = [x for x in ctas if int(x["units"]) > 0]
                entries = [num(x["entry_ns"]) for x in ctas]
                e = {"entry_min": min(entries), "entry_max": max(entries), "exit_max": max(num(x["exit_ns"]) for x in ctas),
                     "epoch": int(ctas[0]["epoch"]), "ctas": len(ctas)}
                fi = [num(x["first_in_ns"]) for x in work if x["first_in_ns"]]
                e["first_in_min"] = min(fi) if fi else None
                for key, a, b in (("prologue", "entry", "prologue"), ("wait_first", "entry", "first_in"),
                                  ("transfer", None, "last_out"), ("drain", "last_out", "exit")):
                    v = []
                    for x in work:
                        a2 = a or ("first_in" if x["first_in_ns"] else "prologue")
                        t = dur(x, a2, b)
                        if t is not None:
                            v.append(t)
                    e[key + "_med"], e[key + "_max"] = (med(v), max(v)) if v else (None, None)
                c[call] = e
            timed = [k for k in sorted(c) if k > warm]
            for k in timed:
                if k + 1 in c:
                    c[k]["period"] = c[k + 1]["entry_min"] - c[k]["entry_min"]
                    c[k]["gap"] = c[k + 1]["entry_min"] - c[k]["exit_max"]
            per_rank[r] = (c, timed, m, use_clk, ghz, gt_step)
        if not per_rank:
            continue
        elems = int(rows[(sid, min(per_rank))][0]["elems"])
        b = elems * 4
        for r, (c, timed, m, use_clk, ghz, gt_step) in per_rank.items():
            for k in timed:
                calls_out.append({"P": P, "bytes": b, "rank": r, "call": k, **{q: c[k].get(q) for q in (
                    "epoch", "ctas", "entry_min", "entry_max", "exit_max", "first_in_min", "period", "gap",
                    "prologue_med", "prologue_max", "wait_first_med", "wait_first_max", "transfer_med", "transfer_max",
                    "drain_med", "drain_max")}})
        m0 = per_rank[min(per_rank)][2]
        gt_steps = sorted({round(v[5]) for v in per_rank.values()})
        ghzs = [f"{float(v[2]['clk_ghz_start']):.3f}/{float(v[2]['clk_ghz_end']):.3f}" for v in per_rank.values()]
        coarse = max(v[5] for v in per_rank.values()) > 100
        say("")
        say(f"== P={P}, {label(b)} ({b} B; {m0['proto']}, {m0['ctas']} CTAs, unroll {m0['unroll']}; "
            f"{len(per_rank[min(per_rank)][1])} timed calls traced) ==")
        tb, ub = traced.get(b), untraced.get(b)
        say(f"spbench median per call: traced {tb:.2f} us" if tb else "spbench median per call: traced -", )
        if ub:
            lines[-1] += f", untraced {ub:.2f} us" + (f" (the trace costs {tb - ub:+.2f})" if tb else "")
        say(f"clocks: globaltimer step {'/'.join(map(str, gt_steps))} ns; SM clock (GHz, start/end) per rank "
            f"{' '.join(ghzs)}; durations inside a CTA from {'clock64' if coarse else 'globaltimer'}")
        head = f"{'':40}" + "".join(f"{'rank ' + str(r):>16}" for r in sorted(per_rank))
        say(head)
        def row(name, fn, with_mean=coarse):
            cells = []
            for r in sorted(per_rank):
                c, timed = per_rank[r][0], per_rank[r][1]
                v = [fn(c[k]) for k in timed]
                v = [x for x in v if x is not None]
                if not v:
                    cells.append(f"{'-':>16}")
                elif with_mean:
                    cells.append(f"{med(v) / 1e3:>9.2f} [{mean(v) / 1e3:.2f}]".rjust(16))
                else:
                    cells.append(f"{med(v) / 1e3:>16.2f}")
            say(f"{name:40}" + "".join(cells))
        def row2(name, key):
            cells = []
            for r in sorted(per_rank):
                c, timed = per_rank[r][0], per_rank[r][1]
                a = [c[k][key + "_med"] for k in timed if c[k][key + "_med"] is not None]
                z = [c[k][key + "_max"] for k in timed if c[k][key + "_max"] is not None]
                cells.append((f"{med(a) / 1e3:.2f}/{med(z) / 1e3:.2f}" if a else "-").rjust(16))
            say(f"{name:40}" + "".join(cells))
        row("period: first entry(E) -> (E+1)", lambda e: e.get("period"))
        row("(a) last exit(E) -> first entry(E+1)", lambda e: e.get("gap"))
        row("(b) entry spread over CTAs", lambda e: e["entry_max"] - e["entry_min"])
        row("kernel span: first entry -> last exit", lambda e: e["exit_max"] - e["entry_min"])
        row("first entry -> first unit in (any CTA)",
            lambda e: e["first_in_min"] - e["entry_min"] if e["first_in_min"] else None)
        row2("(c) prologue (entry -> end)", "prologue")
        row2("(d) entry -> first unit in", "wait_first")
        row2("(e) first in (or prologue) -> last out", "transfer")
        row2("(f) last out -> exit", "drain")
        # Rank p against rank p-1, the same call: raw globaltimers (an unknown offset between GPUs) and corrected
        # by the ping-pong estimate (prev_offset_ns = globaltimer of p-1 minus that of p at one instant).
        for what, key in (("entry", "entry_min"), ("exit", "exit_max")):
            for corr in (False, True):
                cells = []
                for r in sorted(per_rank):
                    if r == 0 or r - 1 not in per_rank:
                        cells.append(f"{'-':>16}")
                        continue
                    off = per_rank[r][2]["prev_offset_ns"]
                    if corr and not off:
                        cells.append(f"{'no offset':>16}")
                        continue
                    c, cp = per_rank[r][0], per_rank[r - 1][0]
                    v = [c[k][key] + (float(off) if corr else 0) - cp[k][key] for k in per_rank[r][1] if k in cp]
                    cells.append(f"{med(v) / 1e3:>16.2f}" if v else f"{'-':>16}")
                say(f"{what + ' vs rank p-1, ' + ('offset-corrected' if corr else 'raw clocks'):40}" + "".join(cells))
        rtts = [f"{float(per_rank[r][2]['prev_rtt_ns']) / 1e3:.2f}" for r in sorted(per_rank)
                if per_rank[r][2]["prev_rtt_ns"]]
        if rtts:
            say(f"{'':40}(ping-pong round trips to rank p-1, us: {' '.join(rtts)}; the corrected rows assume")
            say(f"{'':40} equal one-way times and are good to a fraction of that)")
say("")
say("Raw clocks: GPUs' globaltimers are not documented to agree, so 'raw' differences carry an unknown constant;")
say("only durations on one rank and the offset-corrected rows compare ranks. (e) on a rank with no predecessor")
say("(rank 0 forward) runs from the end of its prologue. last_out is when a thread issued its last store.")
txt = "\n".join(lines)
print(txt)
if calls_out:
    keys = list(calls_out[0].keys())
    with open(os.path.join(out, "allscan_trace_calls.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for x in calls_out:
            w.writerow({k: "" if v is None else f"{v:.1f}" if isinstance(v, float) else v for k, v in x.items()})
EOF

# The raw traces and spbench's CSVs in one file (the device tool brings back at most 8 files, 16 MiB each).
if command -v xz > /dev/null; then tarf=$OUT/allscan_trace.tar.xz; XZ_OPT="-4 -T0" tar -C "$dir" -cJf "$tarf" .
else tarf=$OUT/allscan_trace.tar.gz; tar -C "$dir" -czf "$tarf" .; fi
if [ "$(stat -c %s "$tarf")" -gt $((15 << 20)) ]; then
  stamp "$(basename "$tarf") is $(( $(stat -c %s "$tarf") >> 20 )) MiB: left out (the per-call aggregates stay)"
  rm -f "$tarf"
fi
rm -rf "$dir"
stamp "done: $OUT/allscan_trace_summary.txt, allscan_trace_calls.csv, $(basename "$tarf"), allscan_trace.log"
