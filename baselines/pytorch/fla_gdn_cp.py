#!/usr/bin/env python3
"""fla's context parallelism for Gated DeltaNet (chunk_gated_delta_rule with a cp_context) over P GPUs, timed.

usage: torchrun --nproc-per-node P fla_gdn_cp.py [--tokens-per-gpu 16384] [--lift-triton-guard] [--csv FILE]
       mpirun -np P fla_gdn_cp.py ...                     (Open MPI's OMPI_COMM_WORLD_* are read as well)
       fla_gdn_cp.py --single-gpu-check DIR [--lift-triton-guard]              (one GPU, no torch.distributed)
       torchrun --nproc-per-node P fla_gdn_cp.py --cp-check DIR [--lift-triton-guard]

Run with fla on one H200 (fla bc3b101, Triton 3.6.0): --single-gpu-check, whose outputs and gradients are those of
fla's plain call within noise (baselines/pytorch/NOTES.md). Not yet run: the cp_context paths (the timed rows and
--cp-check), NCCL and torchrun, which need several GPUs; written against fla's source at bc3b101 (fla/ops/cp/
context.py build_cp_context, fla/ops/gated_delta_rule/chunk.py, fla's tests/context_parallel/test_cp_gdn.py for the
calling convention), and run end to end on CPU only (mpirun, Debian's CPU torch 1.13, gloo for NCCL, a stand-in for
fla's kernel).

The timed run (method fla-cp): one sequence of P x --tokens-per-gpu tokens (B = 1), each rank holding its own
contiguous --tokens-per-gpu, H = 16, dk = dv = 128, inputs made as fla_gdn_kernel.py makes them (bf16 q, k
L2-normalised, v; fp32 log gate g as GatedDeltaNet's at initialisation; beta = sigmoid, bf16), each rank its own
(seed + rank). The context: fla.ops.cp.build_cp_context(cu_seqlens = [0, P T], group = WORLD); the call:
chunk_gated_delta_rule(q, k, v, g, beta, scale = dk^-1/2, cp_context = ctx) (fla's CP takes no initial_state and no
output_final_state; it all-gathers each rank's (state, transition) and merges them in order). Passes: fwd (under
torch.no_grad) and fwd_bwd (autograd.grad of o with a random do into q, k, v, g, beta). Protocol as spbench's
operator level (DESIGN §5): 5 warm-up iterations, then 50, each after a barrier, timed by CUDA events on every rank;
an iteration's time is the slowest rank's; rows (rank 0) in the operator CSV's columns
(results/nvidia-h200-x4_operator.csv) then fla_gdn_kernel.py's extra columns, time_ms_mean_over_ranks the mean of
the ranks' means; err_rel_rms empty (no check in the timed run).

--single-gpu-check DIR: on one GPU, without a cp_context, the inputs of fla_gdn_kernel.py --dump DIR run as the CP
path runs them (cu_seqlens = [0, T], no initial state, no final state); writes DIR/single_{o,dq,dk,dv,dg,dbeta}.npy
and DIR/single_meta.json ("initial_state": false, "dht": false). Then: gdn_check_npy DIR --prefix single_.
--cp-check DIR: the same inputs split over the P ranks (T divisible by P) with the cp_context; rank 0 gathers
and writes DIR/cpP_*.npy and DIR/cpP_meta.json; then: gdn_check_npy DIR --prefix cpP_.
--lift-triton-guard: as fla_gdn_kernel.py (fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True; note column).
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fla_gdn_kernel as fk  # noqa: E402  (the rows, fla's import, the guard and the inputs)

OPERATOR_COLUMNS = [
    "level", "method", "backend", "world_size", "batch", "heads", "dk", "dv", "tokens_per_rank", "block_elems",
    "dtype", "pass", "time_ms_mean", "time_ms_median", "time_ms_min", "time_ms_max", "err_rel_rms",
    "tokens_per_s_per_gpu", "gpu", "git_sha", "date",
    "chunk", "blocks", "comm", "warmup", "iters", "time_ms_cv", "time_ms_mean_over_ranks", "host", "driver", "cuda",
    "nccl", "mpi", "overlap", "head_groups", "nodes", "ranks_per_node", "config_key",
]
COLUMNS = OPERATOR_COLUMNS + fk.EXTRA_COLUMNS
H, DK, DV = 16, 128, 128


def init_dist(torch):
    """torchrun's RANK / WORLD_SIZE / LOCAL_RANK, or Open MPI's; NCCL; one GPU per local rank."""
    import torch.distributed as dist
    env = os.environ
    if "RANK" not in env and "OMPI_COMM_WORLD_RANK" in env:
        env["RANK"], env["WORLD_SIZE"] = env["OMPI_COMM_WORLD_RANK"], env["OMPI_COMM_WORLD_SIZE"]
        env["LOCAL_RANK"] = env.get("OMPI_COMM_WORLD_LOCAL_RANK", env["RANK"])
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", "29517")
    if "RANK" not in env:
        fk.fail(2, "no RANK in the environment: run under torchrun or mpirun (or use --single-gpu-check)")
    local = int(env.get("LOCAL_RANK", env["RANK"]))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist, dist.get_rank(), dist.get_world_size()


def read_dump(torch, np, dir_, dev):
    def load(name, dtype):
        return torch.from_numpy(np.load(os.path.join(dir_, name + ".npy"))).to(dev, dtype)
    meta = json.load(open(os.path.join(dir_, "meta.json")))
    bdt = torch.bfloat16 if meta.get("beta_dtype", "bf16") == "bf16" else torch.float32
    return (load("q", torch.bfloat16), load("k", torch.bfloat16), load("v", torch.bfloat16), load("g", torch.float32),
            load("beta", bdt), load("do", torch.bfloat16)), meta


def fwd_bwd(torch, gdr, q, k, v, g, beta, do, **kw):
    leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v, g, beta)]
    o, _ = gdr(*leaves, scale=DK ** -0.5, **kw)
    return o, torch.autograd.grad(o, leaves, do)


def write_check(np, torch, dir_, prefix, o, grads, meta, extra):
    for name, t in zip(["o", "dq", "dk", "dv", "dg", "dbeta"], [o, *grads]):
        fk.save(np, dir_, prefix + name, t)
    out = dict(producer="baselines/pytorch/fla_gdn_cp.py", fla_commit=meta.get("fla_commit", ""),
               triton=meta.get("triton", ""), initial_state=False, dht=False, **extra)
    with open(os.path.join(dir_, prefix + "meta.json"), "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    fk.log(f"wrote {dir_}/{prefix}*.npy; check them with: gdn_check_npy {dir_} --prefix {prefix}")


def single_gpu_check(a, torch, triton, fla, chunk_o, gdr):
    import numpy as np
    dev = torch.device("cuda")
    active, lifted = fk.guard_state(chunk_o, a.lift_triton_guard)
    (q, k, v, g, beta, do), meta = read_dump(torch, np, a.single_gpu_check, dev)
    cu = torch.tensor([0, q.shape[1]], device=dev, dtype=torch.long)
    o, grads = fwd_bwd(torch, gdr, q, k, v, g, beta, do, cu_seqlens=cu)
    write_check(np, torch, a.single_gpu_check, "single_", o, grads,
                dict(meta, fla_commit=fk.fla_commit_of(fla), triton=triton.__version__),
                dict(cp_context=False, triton_guard_active=active, triton_guard_lifted=lifted))
    return 0


def cp_check(a, torch, triton, fla, chunk_o, gdr, dist, rank, P):
    import numpy as np
    from fla.ops.cp import build_cp_context
    dev = torch.device("cuda", torch.cuda.current_device())
    active, lifted = fk.guard_state(chunk_o, a.lift_triton_guard)
    (q, k, v, g, beta, do), meta = read_dump(torch, np, a.cp_check, dev)
    T = q.shape[1]
    if T % P:
        fk.fail(2, f"--cp-check: {T} tokens do not split over {P} ranks")
    n = T // P
    ctx = build_cp_context(torch.tensor([0, T], device=dev, dtype=torch.long), group=dist.group.WORLD)
    part = [x[:, rank * n:(rank + 1) * n].contiguous() for x in (q, k, v, g, beta, do)]
    o, grads = fwd_bwd(torch, gdr, *part, cp_context=ctx)

    def gather(t):  # in fp32: the files are fp32, and not every backend gathers bf16
        t = t.float().contiguous()
        parts = [torch.empty_like(t) for _ in range(P)]
        dist.all_gather(parts, t)
        return torch.cat(parts, dim=1)
    o_all, grads_all = gather(o), [gather(x) for x in grads]
    if rank == 0:
        write_check(np, torch, a.cp_check, f"cp{P}_", o_all, grads_all,
                    dict(meta, fla_commit=fk.fla_commit_of(fla), triton=triton.__version__),
                    dict(cp_context=True, world_size=P, triton_guard_active=active, triton_guard_lifted=lifted))
    return 0


def timed(a, torch, triton, fla, chunk_o, gdr, dist, rank, P):
    from fla.ops.cp import build_cp_context
    dev = torch.device("cuda", torch.cuda.current_device())
    active, lifted = fk.guard_state(chunk_o, a.lift_triton_guard)
    T = a.tokens_per_gpu
    ctx = build_cp_context(torch.tensor([0, P * T], device=dev, dtype=torch.long), group=dist.group.WORLD)
    q, k, v, g, beta = fk.make_inputs(torch, 1, T, H, DK, DV, torch.bfloat16, a.seed + rank, dev)
    gen = torch.Generator(device=dev).manual_seed(a.seed + 1000 + rank)
    do = torch.randn(1, T, H, DV, device=dev, generator=gen).to(torch.bfloat16)
    leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v, g, beta)]
    nodes = int(os.environ.get("SPB_NODES", "1"))
    base = {
        "level": "operator", "method": "fla-cp", "backend": "fla-dispatch" if a.allow_dispatch else "triton",
        "world_size": P, "batch": 1, "heads": H, "dk": DK, "dv": DV, "tokens_per_rank": T, "block_elems": 0,
        "dtype": "bf16", "err_rel_rms": "", "gpu": torch.cuda.get_device_name(dev), "git_sha": a.git_sha,
        "chunk": 64, "blocks": 0, "comm": "nccl", "warmup": a.warmup, "iters": a.iters, "host": socket.gethostname(),
        "driver": fk.driver_version(), "cuda": torch.version.cuda or "",
        "nccl": ".".join(map(str, torch.cuda.nccl.version())), "mpi": "", "overlap": 0, "head_groups": 0,
        "nodes": nodes, "ranks_per_node": P // nodes,
        "config_key": fk.config_key([("seed", a.seed), ("gates", "gdn-init"), ("dispatch", int(a.allow_dispatch))]),
        "fla_commit": fk.fla_commit_of(fla), "torch": torch.__version__, "triton": triton.__version__,
        "beta_dtype": "bf16", "g_dtype": "fp32", "note": fk.note_of(lifted, active),
    }
    done = fk.read_rows(a.csv, COLUMNS) if rank == 0 else []
    for p in a.passes:
        if p == "fwd":
            def fn():
                with torch.no_grad():
                    gdr(q, k, v, g, beta, scale=DK ** -0.5, cp_context=ctx)
        else:
            def fn():
                o, _ = gdr(*leaves, scale=DK ** -0.5, cp_context=ctx)
                torch.autograd.grad(o, leaves, do)
        row = dict(base, **{"pass": p})
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        try:
            for i in range(a.warmup + a.iters):
                dist.barrier()
                torch.cuda.synchronize()
                t0 = time.time()
                e0.record()
                fn()
                e1.record()
                e1.synchronize()
                if i < a.warmup:
                    if rank == 0:
                        fk.log(f"P {P} {p}: warm-up {i + 1}/{a.warmup} {time.time() - t0:.2f} s")
                else:
                    times.append(e0.elapsed_time(e1))
        except RuntimeError as e:
            fk.log(f"rank {rank}: P {P} {p}: fla refused or failed: {str(e).splitlines()[0][:400]}")
            return 1  # every rank meets the same guard; another failure may leave ranks in a collective
        mine = torch.tensor(times, device=dev, dtype=torch.float64)
        all_t = [torch.empty_like(mine) for _ in range(P)]
        dist.all_gather(all_t, mine)
        if rank != 0:
            continue
        per_rank = torch.stack(all_t).cpu()
        slowest = per_rank.max(dim=0).values.tolist()
        st = fk.stats_ms(slowest)
        mean = statistics.fmean(slowest)
        row.update(st, time_ms_mean_over_ranks=f"{per_rank.mean(dim=1).mean().item():.6g}",
                   tokens_per_s_per_gpu=f"{T / (mean / 1e3):.1f}",
                   date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        print(f"  fla-cp  P {P}  H {H}  T/GPU {T}  {p:7s}  mean {st['time_ms_mean']} ms  median {st['time_ms_median']}"
              f"  min {st['time_ms_min']}  max {st['time_ms_max']}  cv {st['time_ms_cv']}  {row['note']}", flush=True)
        if a.csv and not fk.already(done, row):
            fk.append_row(a.csv, row, COLUMNS)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens-per-gpu", type=int, default=16384)
    ap.add_argument("--passes", nargs="+", choices=["fwd", "fwd_bwd"], default=["fwd", "fwd_bwd"])
    ap.add_argument("--warmup", "-w", type=int, default=5)
    ap.add_argument("--iters", "-n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--lift-triton-guard", action="store_true")
    ap.add_argument("--allow-dispatch", action="store_true")
    ap.add_argument("--csv", default="")
    ap.add_argument("--git-sha", default=os.environ.get("SPB_GIT_SHA", "unknown"))
    ap.add_argument("--single-gpu-check", default="", metavar="DIR")
    ap.add_argument("--cp-check", default="", metavar="DIR")
    a = ap.parse_args()
    if a.tokens_per_gpu < 1 or a.iters < 1 or a.warmup < 0:
        fk.fail(2, "--tokens-per-gpu and --iters must be >= 1, --warmup >= 0")
    if a.csv:
        fk.read_rows(a.csv, COLUMNS)
    torch, triton, fla, chunk_o, gdr = fk.import_fla(a.allow_dispatch)
    if a.single_gpu_check:
        return single_gpu_check(a, torch, triton, fla, chunk_o, gdr)
    dist, rank, P = init_dist(torch)
    try:
        if a.cp_check:
            return cp_check(a, torch, triton, fla, chunk_o, gdr, dist, rank, P)
        return timed(a, torch, triton, fla, chunk_o, gdr, dist, rank, P)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
