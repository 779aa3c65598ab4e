#!/usr/bin/env python3
"""fla's Gated DeltaNet kernel (chunk_gated_delta_rule) on one GPU: its time, and a dump of its gradients to check.

usage: fla_gdn_kernel.py [--tokens T ...] [--passes fwd fwd_bwd] [--lift-triton-guard] [--csv FILE] ...
       fla_gdn_kernel.py --dump DIR [--dump-tokens 2048] [--lift-triton-guard]

Timing (the default): fla.ops.gated_delta_rule.chunk_gated_delta_rule at B = 1, --heads 16, dk = dv = 128, for each
of --tokens (16384 32768), in each pass of --passes: `fwd` (the forward under torch.no_grad) and `fwd_bwd` (the
forward with autograd, then torch.autograd.grad of (o, ht) with random do and dht into q, k, v, g, beta). The inputs
are what fla's GatedDeltaNet layer hands the kernel: q random (bf16), k L2-normalised here (bf16;
use_qk_l2norm_in_kernel=False), v random (bf16), the log gate g in fp32 made as the layer makes it at
initialisation, g = -A_h softplus(x + dt_bias_h) with A_h ~ U[1, 16) and softplus(dt_bias_h) ~ logU[1e-3, 1e-1] per
head and x ~ N(0, 1) per token (so g < 0), beta = sigmoid(N(0, 1)) in bf16 (--beta-dtype fp32 for fp32; post-sigmoid:
use_beta_sigmoid_in_kernel=False), scale dk^-1/2, initial_state None, output_final_state=True. --warmup calls
(5; the first one autotunes fla's kernels, minutes on an empty Triton cache), then --iters (50) each between two CUDA
events: mean, median, min, max and cv in ms. One row per (tokens, pass) appended to --csv in the columns of
results/nvidia-h200_kernel.csv (level kernel, method fla-gdn, backend triton), then fla_commit, torch, triton,
beta_dtype, g_dtype and note. A file that exists with other columns is refused (write to e.g.
results/<machine>_kernel_fla.csv); a row already there (the same configuration, git sha, fla, Triton and torch) is
skipped.

fla's backend dispatch is switched off (FLA_DISABLE_BACKEND_DISPATCH=1, set before fla is imported) so that its Triton
kernels run even where tilelang or flash_qla is installed; --allow-dispatch leaves it on (backend column
fla-dispatch).

The Triton guard: at fla bc3b101, fla.ops.common.chunk_o.chunk_bwd_dqkwg raises on Hopper with Triton >= 3.4.0 and
< 3.7.1 ("produces incorrect results for gated chunk_bwd_dqkwg (see #640)"): the backward refuses to run there. It
reads the module global TRITON_ABOVE_3_7_1 of fla.ops.common.chunk_o at each call; --lift-triton-guard sets it to True
so that the backward runs, and every row (and meta.json) says so: note `triton_guard_lifted`. Without the flag, a
refused backward is reported and writes no row (exit 1). Whether the lifted backward is right is what --dump and
gdn_check_npy measure.

--dump DIR (instead of timing): one forward and backward at --dump-tokens (2048) tokens, --dump-heads (4) heads, dk =
dv = 128, with a random fp32 h0 (initial_state, requires grad), random do (bf16, as o) and random dht (fp32, as ht);
writes DIR/*.npy, fp32, C order, the inputs as the rounded values the kernel got: q, k [B, T, H, dk]; v, do
[B, T, H, dv]; g, beta [B, T, H]; h0, dht [B, H, dk, dv]; and fla's o, ht, dq, dk, dv, dg, dbeta, dh0 in the same
layouts (fla's own with state_v_first=False: q, k, v [B, T, H, D], g, beta [B, T, H], states [N, H, K, V]; no
transposes needed), and DIR/meta.json. Then `gdn_check_npy DIR` (kernels/gdn/bench/) compares each with spbench's fp64
token loop. If fla refuses the backward, o and ht are still written and meta.json says why (exit 1).

Exit 0: every requested row written (or already there) or the dump complete; 1: fla refused or failed a pass; 2: bad
arguments or no GPU; 3: torch, Triton or fla cannot be imported.
"""
import argparse
import csv
import io
import json
import math
import os
import socket
import statistics
import sys
import time

# results/nvidia-h200_kernel.csv's columns, in its order (DESIGN §6's schema, then the kernel level's config_key),
# then this script's own.
KERNEL_COLUMNS = [
    "level", "method", "backend", "world_size", "batch", "heads", "dk", "dv", "tokens_per_rank", "block_elems",
    "dtype", "pass", "time_ms_mean", "time_ms_median", "time_ms_min", "time_ms_max", "err_rel_rms",
    "tokens_per_s_per_gpu", "gpu", "git_sha", "date",
    "chunk", "blocks", "comm", "warmup", "iters", "time_ms_cv", "time_ms_mean_over_ranks", "host", "driver", "cuda",
    "nccl", "mpi", "overlap", "config_key",
]
EXTRA_COLUMNS = ["fla_commit", "torch", "triton", "beta_dtype", "g_dtype", "note"]
COLUMNS = KERNEL_COLUMNS + EXTRA_COLUMNS
# A row with the same values of these is already measured.
KEY = ["level", "method", "backend", "world_size", "heads", "dk", "dv", "tokens_per_rank", "pass", "warmup", "iters",
       "gpu", "git_sha", "config_key", "fla_commit", "torch", "triton", "beta_dtype", "note"]


def log(msg):
    print(f"[fla_gdn] {msg}", file=sys.stderr, flush=True)


def fail(code, msg):
    print(f"fla_gdn: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


# --- rows -------------------------------------------------------------------------------------------------------------

def config_key(flags):
    """runtime/csv.cpp's config_key: FNV-1a 64 of `flag=value` lines, 16 hex digits."""
    h = 0xcbf29ce484222325
    for flag, value in flags:
        for c in f"{flag}={value}\n".encode():
            h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def read_rows(path, columns):
    """The rows already in `path`; a file with another header, or a half last line, is refused."""
    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    with open(path, newline="") as f:
        text = f.read()
    if not text.endswith("\n"):
        fail(2, f"--csv {path}: its last line is not terminated (a half row); repair the file first")
    rows = list(csv.reader(text.splitlines()))
    if rows[0] != columns:
        fail(2, f"--csv {path}: the file exists with other columns; write to a new file (the header must be: "
                f"{','.join(columns)})")
    return [dict(zip(columns, r)) for r in rows[1:]]


def append_row(path, row, columns):
    """One write of the whole line (the header first when the file is new), synced; never touches the rows before."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        w.writerow(columns)
    w.writerow([row.get(c, "") for c in columns])
    data = buf.getvalue().encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError("short write")
            os.fsync(fd)
        except OSError as e:
            os.ftruncate(fd, size)
            fail(2, f"--csv {path}: cannot append the row ({e})")
    finally:
        os.close(fd)


def already(rows, row):
    return any(all(str(r.get(k, "")) == str(row.get(k, "")) for k in KEY) for r in rows)


def stats_ms(times):
    mean = statistics.fmean(times)
    return dict(time_ms_mean=f"{mean:.6g}", time_ms_median=f"{statistics.median(times):.6g}",
                time_ms_min=f"{min(times):.6g}", time_ms_max=f"{max(times):.6g}",
                time_ms_cv=f"{(statistics.pstdev(times) / mean if len(times) > 1 and mean > 0 else 0.0):.6g}")


def driver_version():
    try:
        with open("/proc/driver/nvidia/version") as f:
            for word in f.readline().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    return ""


# --- fla --------------------------------------------------------------------------------------------------------------

def import_fla(allow_dispatch):
    """torch, triton and fla's chunk_gated_delta_rule; fla's dispatch off unless allowed (set before the import)."""
    if not allow_dispatch:
        os.environ["FLA_DISABLE_BACKEND_DISPATCH"] = "1"
    try:
        import torch
        import triton
    except Exception as e:  # noqa: BLE001
        fail(3, f"cannot import torch / triton ({type(e).__name__}: {e})")
    if not torch.cuda.is_available():
        fail(2, "no GPU: torch.cuda.is_available() is False")
    try:
        import fla
        import fla.ops.common.chunk_o as chunk_o
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception as e:  # noqa: BLE001
        fail(3, f"cannot import fla ({type(e).__name__}: {e}); put fla's source on PYTHONPATH (.fla)")
    return torch, triton, fla, chunk_o, chunk_gated_delta_rule


def fla_commit_of(fla):
    """FLA_COMMIT, else the COMMIT file beside fla's package folder (.fla/COMMIT), else fla's version."""
    commit = os.environ.get("FLA_COMMIT", "")
    if not commit:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(fla.__file__))), "COMMIT")
        if os.path.exists(path):
            commit = open(path).read().strip()[:12]
        else:
            commit = "v" + getattr(fla, "__version__", "unknown")
    return commit


def guard_state(chunk_o, lift):
    """Whether chunk_bwd_dqkwg's Triton guard would refuse here, and whether it is lifted (chunk_o's global set)."""
    g = vars(chunk_o)
    if "TRITON_ABOVE_3_7_1" not in g:
        fail(3, "fla.ops.common.chunk_o has no TRITON_ABOVE_3_7_1: not the fla this script knows (bc3b101)")
    active = bool(g.get("IS_NVIDIA_HOPPER")) and bool(g.get("TRITON_ABOVE_3_4_0")) and not g["TRITON_ABOVE_3_7_1"]
    if lift:
        chunk_o.TRITON_ABOVE_3_7_1 = True
    return active, lift


def note_of(lifted, active):
    if lifted:
        return "triton_guard_lifted" if active else "triton_guard_lifted_inactive"
    return "triton_guard_active" if active else ""


def make_inputs(torch, B, T, H, dk, dv, beta_dtype, seed, dev):
    """q, k (L2-normalised), v in bf16; g < 0 in fp32 as GatedDeltaNet's gate at initialisation; beta = sigmoid."""
    import torch.nn.functional as F
    gen = torch.Generator(device=dev).manual_seed(seed)
    q = torch.randn(B, T, H, dk, device=dev, generator=gen).to(torch.bfloat16)
    k = F.normalize(torch.randn(B, T, H, dk, device=dev, generator=gen), p=2, dim=-1).to(torch.bfloat16)
    v = torch.randn(B, T, H, dv, device=dev, generator=gen).to(torch.bfloat16)
    A = 1 + 15 * torch.rand(H, device=dev, generator=gen)
    dt = torch.exp(math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * torch.rand(H, device=dev, generator=gen))
    dt_bias = dt + torch.log(-torch.expm1(-dt))  # softplus(dt_bias) = dt
    g = -A * F.softplus(torch.randn(B, T, H, device=dev, generator=gen) + dt_bias)
    beta = torch.randn(B, T, H, device=dev, generator=gen).sigmoid().to(beta_dtype)
    return q, k, v, g.float().contiguous(), beta


# --- timing -----------------------------------------------------------------------------------------------------------

def time_calls(torch, fn, warmup, iters, label):
    """`warmup` calls (each one's wall time printed), then `iters` calls each between two CUDA events (ms)."""
    for i in range(warmup):
        t0 = time.time()
        fn()
        torch.cuda.synchronize()
        log(f"{label}: warm-up {i + 1}/{warmup} {time.time() - t0:.2f} s" + (" (autotune included)" if i == 0 else ""))
    times = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    return times


def run_timing(a, torch, triton, fla, chunk_o, gdr):
    dev = torch.device("cuda")
    active, lifted = guard_state(chunk_o, a.lift_triton_guard)
    note = note_of(lifted, active)
    beta_dtype = torch.bfloat16 if a.beta_dtype == "bf16" else torch.float32
    base = {
        "level": "kernel", "method": "fla-gdn", "backend": "fla-dispatch" if a.allow_dispatch else "triton",
        "world_size": 1, "batch": 1, "heads": a.heads, "dk": a.dk, "dv": a.dv, "block_elems": 0, "dtype": "bf16",
        "err_rel_rms": "", "gpu": torch.cuda.get_device_name(dev), "git_sha": a.git_sha, "chunk": 64, "blocks": "",
        "comm": "", "warmup": a.warmup, "iters": a.iters, "time_ms_mean_over_ranks": "", "host": socket.gethostname(),
        "driver": driver_version(), "cuda": torch.version.cuda or "", "nccl": "", "mpi": "", "overlap": "",
        "config_key": config_key([("seed", a.seed), ("gates", "gdn-init"), ("dispatch", int(a.allow_dispatch))]),
        "fla_commit": fla_commit_of(fla), "torch": torch.__version__, "triton": triton.__version__,
        "beta_dtype": a.beta_dtype, "g_dtype": "fp32", "note": note,
    }
    done = read_rows(a.csv, COLUMNS)
    log(f"{base['gpu']}: fla {base['fla_commit']}, torch {base['torch']}, triton {base['triton']}, backend "
        f"{base['backend']}, guard {'active' if active else 'inactive'}{', lifted' if lifted else ''}")
    failed = 0
    scale = a.dk ** -0.5
    for T in a.tokens:
        q, k, v, g, beta = make_inputs(torch, 1, T, a.heads, a.dk, a.dv, beta_dtype, a.seed, dev)
        for p in a.passes:
            row = dict(base, tokens_per_rank=T, **{"pass": p})
            label = f"T {T} {p}"
            if already(done, row):
                log(f"{label}: already in {a.csv}, skipped")
                continue
            if p == "fwd":
                def fn():
                    with torch.no_grad():
                        gdr(q, k, v, g, beta, scale=scale, initial_state=None, output_final_state=True,
                            use_qk_l2norm_in_kernel=False)
            else:
                leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v, g, beta)]
                gen = torch.Generator(device=dev).manual_seed(a.seed + 1)
                do = torch.randn(q.shape[:3] + (a.dv,), device=dev, generator=gen).to(torch.bfloat16)
                dht = torch.randn(1, a.heads, a.dk, a.dv, device=dev, generator=gen)

                def fn():
                    o, ht = gdr(*leaves, scale=scale, initial_state=None, output_final_state=True,
                                use_qk_l2norm_in_kernel=False)
                    torch.autograd.grad((o, ht), leaves, (do, dht.to(ht.dtype)))
            log(f"{label}: {a.warmup} warm-up calls, then {a.iters} timed (the first call may autotune for minutes)")
            try:
                times = time_calls(torch, fn, a.warmup, a.iters, label)
            except RuntimeError as e:
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                log(f"{label}: fla refused or failed: {first[:400]}")
                if "#640" in str(e):
                    log("  (the Triton guard of fla.ops.common.chunk_o; --lift-triton-guard runs the backward anyway)")
                failed += 1
                continue
            st = stats_ms(times)
            mean = statistics.fmean(times)
            row.update(st, tokens_per_s_per_gpu=f"{T / (mean / 1e3):.1f}",
                       date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            print(f"  fla-gdn  H {a.heads}  dk {a.dk} dv {a.dv}  T {T:6d}  {p:7s}  mean {st['time_ms_mean']} ms  "
                  f"median {st['time_ms_median']}  min {st['time_ms_min']}  max {st['time_ms_max']}  cv "
                  f"{st['time_ms_cv']}  {note}", flush=True)
            if a.csv:
                append_row(a.csv, row, COLUMNS)
                done.append({c: str(row.get(c, "")) for c in COLUMNS})
    return 1 if failed else 0


# --- the dump ---------------------------------------------------------------------------------------------------------

def save(np, dir_, name, t):
    """fp32, C order, as spbench's runtime/npy.h reads it."""
    np.save(os.path.join(dir_, name + ".npy"), np.ascontiguousarray(t.detach().float().cpu().numpy(), dtype=np.float32),
            allow_pickle=False)


def run_dump(a, torch, triton, fla, chunk_o, gdr):
    import numpy as np
    dev = torch.device("cuda")
    active, lifted = guard_state(chunk_o, a.lift_triton_guard)
    B, T, H, dk, dv = 1, a.dump_tokens, a.dump_heads, 128, 128
    beta_dtype = torch.bfloat16 if a.beta_dtype == "bf16" else torch.float32
    q, k, v, g, beta = make_inputs(torch, B, T, H, dk, dv, beta_dtype, a.seed, dev)
    gen = torch.Generator(device=dev).manual_seed(a.seed + 2)
    h0 = torch.randn(B, H, dk, dv, device=dev, generator=gen)
    do = torch.randn(B, T, H, dv, device=dev, generator=gen).to(torch.bfloat16)
    dht = torch.randn(B, H, dk, dv, device=dev, generator=gen)
    os.makedirs(a.dump, exist_ok=True)
    for name in ["o", "ht", "dq", "dk", "dv", "dg", "dbeta", "dh0", "dht"]:  # no stale outputs of an earlier dump
        path = os.path.join(a.dump, name + ".npy")
        if os.path.exists(path):
            os.remove(path)
    meta = {
        "producer": "baselines/pytorch/fla_gdn_kernel.py --dump", "B": B, "T": T, "H": H, "dk": dk, "dv": dv,
        "scale": dk ** -0.5, "seed": a.seed, "fla_commit": fla_commit_of(fla),
        "fla_version": getattr(fla, "__version__", ""), "torch": torch.__version__, "triton": triton.__version__,
        "gpu": torch.cuda.get_device_name(dev), "git_sha": a.git_sha, "triton_guard_active": active,
        "triton_guard_lifted": lifted, "backend": "fla-dispatch" if a.allow_dispatch else "triton",
        "initial_state": True, "dht": True, "q_k_v_do_dtype": "bf16", "g_dtype": "fp32", "beta_dtype": a.beta_dtype,
        "h0_dtype": "fp32", "layout": "q, k [B, T, H, dk]; v, o, do [B, T, H, dv]; g, beta, dg, dbeta [B, T, H]; "
                                          "h0, ht, dht, dh0 [B, H, dk, dv]",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for name, t in [("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("h0", h0), ("do", do)]:
        save(np, a.dump, name, t)
    leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v, g, beta, h0)]
    log(f"dump: B {B}, T {T}, H {H}, dk {dk}, dv {dv}, with h0 and dht; guard {'active' if active else 'inactive'}"
        f"{', lifted' if lifted else ''} (the first call may autotune for minutes)")
    rc = 0
    o, ht = gdr(*leaves[:5], scale=dk ** -0.5, initial_state=leaves[5], output_final_state=True,
                use_qk_l2norm_in_kernel=False)
    save(np, a.dump, "o", o)
    save(np, a.dump, "ht", ht)
    dht = dht.to(ht.dtype)  # the gradient as the backward gets it (fp32 where ht is)
    save(np, a.dump, "dht", dht)
    meta.update(o_dtype=str(o.dtype).replace("torch.", ""), ht_dtype=str(ht.dtype).replace("torch.", ""))
    try:
        grads = torch.autograd.grad((o, ht), leaves, (do.to(o.dtype), dht), allow_unused=True)
        for name, t in zip(["dq", "dk", "dv", "dg", "dbeta", "dh0"], grads):
            if t is None:
                log(f"dump: fla returned no {name}")
                continue
            save(np, a.dump, name, t)
        meta["backward"] = "ran"
    except RuntimeError as e:
        meta["backward"] = "refused: " + str(e).splitlines()[0][:400]
        log(f"dump: the backward {meta['backward']}")
        rc = 1
    with open(os.path.join(a.dump, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    log(f"dump: wrote {a.dump}; check it with: gdn_check_npy {a.dump}")
    return rc


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[16384, 32768], help="sequence lengths (B = 1)")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dk", type=int, default=128)
    ap.add_argument("--dv", type=int, default=128)
    ap.add_argument("--passes", nargs="+", choices=["fwd", "fwd_bwd"], default=["fwd", "fwd_bwd"])
    ap.add_argument("--warmup", "-w", type=int, default=5)
    ap.add_argument("--iters", "-n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--beta-dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--lift-triton-guard", action="store_true",
                    help="set fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True so that the backward runs on Hopper "
                         "with Triton >= 3.4, < 3.7.1 (the rows' note says triton_guard_lifted)")
    ap.add_argument("--allow-dispatch", action="store_true",
                    help="leave fla's backend dispatch on (tilelang / flash_qla where installed)")
    ap.add_argument("--csv", default="", help="append the rows to this CSV (created with its header)")
    ap.add_argument("--git-sha", default=os.environ.get("SPB_GIT_SHA", "unknown"),
                    help="the spbench commit this run belongs to (default $SPB_GIT_SHA)")
    ap.add_argument("--dump", default="", metavar="DIR", help="one forward and backward written to DIR as .npy")
    ap.add_argument("--dump-tokens", type=int, default=2048)
    ap.add_argument("--dump-heads", type=int, default=4)
    a = ap.parse_args(argv)
    for name in ["heads", "dk", "dv", "iters", "dump_tokens", "dump_heads"]:
        if getattr(a, name) < 1:
            fail(2, f"--{name.replace('_', '-')} must be >= 1 (got {getattr(a, name)})")
    if any(t < 1 for t in a.tokens):
        fail(2, f"--tokens must be >= 1 (got {a.tokens})")
    if a.warmup < 0 or a.seed < 0:
        fail(2, "--warmup and --seed must be >= 0")
    if a.dk not in (16, 32, 64, 128, 256) or a.dv % 16:
        fail(2, f"--dk {a.dk} / --dv {a.dv}: fla's kernels take dk a power of two 16..256, dv a multiple of 16")
    if a.csv:
        read_rows(a.csv, COLUMNS)  # a file with other columns is refused before any GPU work
    return a


def main():
    a = parse_args()
    torch, triton, fla, chunk_o, gdr = import_fla(a.allow_dispatch)
    if a.dump:
        return run_dump(a, torch, triton, fla, chunk_o, gdr)
    return run_timing(a, torch, triton, fla, chunk_o, gdr)


if __name__ == "__main__":
    sys.exit(main())
