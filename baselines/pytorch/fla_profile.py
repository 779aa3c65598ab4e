#!/usr/bin/env python3
"""Where fla's time goes, on one GPU: its chunk GLA kernel alone, or its GLA-1B training step by stage.

usage: fla_profile.py attention [--T 16384] [--heads 4] [--dk 256] [--dv 512] [--warmup 5] [--iters 20]
       fla_profile.py step --heads H [--seq 16384] [--precision bf16|fp32-autocast-bf16] [--warmup 3] [--steps 3]

attention: calls fla's `chunk_gla` as fla's GLA layer does (bf16 q, k, v [1, T, H, d], bf16 log-gates
  logsigmoid(x) / 16, `state_v_first=True`, no initial or final state) and prints, for the forward and for the
  forward + backward, the median of `--iters` passes timed with CUDA events, then each kernel's time in one pass
  (torch.profiler, the mean of 5 profiled passes): the operator that spbench's `bench_gla_cuda` times.
step: builds fla's GLAForCausalLM as fla_baseline.py does (the same configuration, precision and fused AdamW; the
  script is kept apart so that the baseline's rows stay of their code), runs `--warmup` steps, profiles
  `--steps` more and prints each stage's GPU time per step (its kernels summed by name, STAGES) and the largest
  kernels: the table `spbench model --profile` prints for spbench's step.
Neither writes a results row: fla_baseline.py times the step for the rows.
Exit 0: measured; 1: a gradient or a loss not finite; 2: bad arguments; 3: no GPU or no fla.
"""
import argparse
import os
import sys

from cuda_timing import median_ms

torch = F = need_fla = None  # imported by main() once the arguments are checked (exit 3 without PyTorch)

# A kernel's stage: the first whose patterns its name contains (fla's Triton kernels, torch's and cuBLAS's).
STAGES = [
    ("products", ("gemm", "nvjet", "cutlass", "xmma", "sm90_")),
    ("attention (chunk GLA)", ("chunk_", "gla")),
    ("AdamW", ("adam",)),
    ("SwiGLU", ("swiglu", "swish")),
    ("norms (residual and output gate)", ("norm",)),
    ("cross-entropy", ("cross_entropy", "logsumexp", "softmax")),
]


def stage_of(kernel):
    name = kernel.lower()
    return next((stage for stage, pats in STAGES if any(p in name for p in pats)), "other kernels")


def kernel_times(fn, passes):
    """Each CUDA kernel's time per call of fn, summed over its launches: [(name, ms, launches)], largest first."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(passes):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        us = e.cuda_time_total if us is None else us
        if us > 0:
            rows.append((e.key, us / 1000.0 / passes, e.count / passes))
    return sorted(rows, key=lambda r: -r[1])


def attention(a):
    got = need_fla("fla_profile.py", "fla.ops.gla", "chunk_gla")
    if got is None:
        return 3
    (chunk_gla,) = got
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    q = torch.randn(1, a.T, a.heads, a.dk, device=dev, dtype=bf).requires_grad_()
    k = torch.randn(1, a.T, a.heads, a.dk, device=dev, dtype=bf).requires_grad_()
    v = torch.randn(1, a.T, a.heads, a.dv, device=dev, dtype=bf).requires_grad_()
    g = (F.logsigmoid(torch.randn(1, a.T, a.heads, a.dk, device=dev, dtype=bf)) / 16).requires_grad_()
    do = torch.randn(1, a.T, a.heads, a.dv, device=dev, dtype=bf)

    def fwd():
        with torch.no_grad():
            chunk_gla(q, k, v, g, state_v_first=True)

    def fwd_bwd():
        for t in (q, k, v, g):
            t.grad = None
        o, _ = chunk_gla(q, k, v, g, state_v_first=True)
        o.backward(do)

    print(f"# fla chunk_gla  B1 T{a.T} H{a.heads} dk{a.dk} dv{a.dv}  bf16  {torch.cuda.get_device_name()}  "
          f"torch {torch.__version__}")
    fwd_bwd()
    if not all(torch.isfinite(t.grad).all() for t in (q, k, v, g)):
        print("fla_profile.py: FAIL: a gradient is not finite", file=sys.stderr)
        return 1
    for name, fn in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
        ms = median_ms(fn, a.warmup, a.iters)
        print(f"{name:8s} median {ms:.3f} ms  (warm-up {a.warmup}, {a.iters} timed)")
        for kname, kms, calls in kernel_times(fn, 5):
            print(f"    {kms:8.3f} ms  x{calls:<2.0f} {kname[:90]}")
    return 0


def step(a):
    got = need_fla("fla_profile.py", "fla.models", "GLAConfig", "GLAForCausalLM")
    if got is None:
        return 3
    GLAConfig, GLAForCausalLM = got
    torch.manual_seed(a.seed)
    # fla_baseline.py's model and step: GLA-1B, fla's fused norm, SwiGLU and cross-entropy, fused AdamW.
    config = GLAConfig(hidden_size=2048, expand_k=0.5, expand_v=1.0, intermediate_size=5632, num_hidden_layers=20,
                       num_heads=a.heads, vocab_size=32000, tie_word_embeddings=False, fuse_norm=True,
                       fuse_swiglu=True, fuse_cross_entropy=True, use_cache=False, attn_mode="chunk")
    pure_bf16 = a.precision == "bf16"
    model = GLAForCausalLM(config).to("cuda", dtype=torch.bfloat16 if pure_bf16 else torch.float32).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    gen = torch.Generator(device="cuda").manual_seed(a.seed)

    def step_once():
        tokens = torch.randint(0, 32000, (1, a.seq), device="cuda", generator=gen)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=not pure_bf16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    print(f"# fla GLA-1B step  {a.heads} heads  T {a.seq}  {a.precision}  {torch.cuda.get_device_name()}  torch "
          f"{torch.__version__}  warm-up {a.warmup}, {a.steps} profiled", flush=True)
    losses = [step_once().item() for _ in range(a.warmup)]
    kernels = kernel_times(lambda: losses.append(step_once().item()), a.steps)
    if not all(x == x and abs(x) != float("inf") for x in losses):
        print("fla_profile.py: FAIL: a loss is not finite", file=sys.stderr)
        return 1
    stages = {}
    for name, ms, _ in kernels:
        stages[stage_of(name)] = stages.get(stage_of(name), 0.0) + ms
    total = sum(stages.values())
    print(f"# {total:.2f} ms of kernels per step (losses {losses[0]:.4f} -> {losses[-1]:.4f})")
    for stage, ms in sorted(stages.items(), key=lambda x: -x[1]):
        print(f"  {stage:36s} {ms:9.3f} ms  {100 * ms / total:5.1f}%")
    print("# the largest kernels (ms per step, launches per step, stage)")
    for name, ms, calls in kernels[:25]:
        print(f"  {ms:9.3f} ms  x{calls:<5.0f} {stage_of(name):22.22s} {name[:100]}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    at = sub.add_parser("attention")
    at.add_argument("--T", type=int, default=16384)
    at.add_argument("--heads", type=int, default=4)
    at.add_argument("--dk", type=int, default=256)
    at.add_argument("--dv", type=int, default=512)
    at.add_argument("--warmup", type=int, default=5)
    at.add_argument("--iters", type=int, default=20)
    st = sub.add_parser("step")
    st.add_argument("--heads", type=int, required=True)
    st.add_argument("--seq", type=int, default=16384)
    st.add_argument("--precision", choices=["bf16", "fp32-autocast-bf16"], default="bf16")
    st.add_argument("--warmup", type=int, default=3)
    st.add_argument("--steps", type=int, default=3)
    st.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    if a.what == "attention" and (min(a.T, a.heads, a.dk, a.dv, a.iters) < 1 or a.warmup < 0):
        ap.error("T, heads, dk, dv and iters must be at least 1, warmup at least 0")
    if a.what == "step" and (min(a.heads, a.seq, a.steps) < 1 or a.warmup < 0):
        ap.error("heads, seq and steps must be at least 1, warmup at least 0")
    global torch, F, need_fla
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"fla_profile.py: no PyTorch ({e})", file=sys.stderr)
        return 3
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "model"))
    from fla_env import need_fla
    return attention(a) if a.what == "attention" else step(a)


if __name__ == "__main__":
    sys.exit(main())
