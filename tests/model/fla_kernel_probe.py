#!/usr/bin/env python3
"""fla's GLA kernels against an fp64 recurrence, at the shape of tests/model/check_against_fla.sh.

usage: fla_kernel_probe.py [--T 1001] [--heads 32] [--dk 32] [--dv 64] [--dtype bf16|fp32] [--tol 2e-2]
                           [--require chunk|fused_recurrent|none]

Runs fla's chunk_gla and fused_recurrent_gla (with state_v_first=True, as fla's GLA layer calls them) on random q, k,
v and log-gates g (logsigmoid(randn) / 16, GLA's gate), backpropagates one random output gradient, and prints the
relative RMS error of o, dq, dk, dv and dg against the same recurrence in fp64 (o_t = dk^-1/2 q_t S_t with
S_t = diag(exp g_t) S_{t-1} + k_t v_t^T). check_against_fla.sh runs it first, so that a wrong fla kernel is named
before the model check compares against it.
Bar: bf16 inputs carry a relative rounding of about 1.1e-3 RMS and the kernels' outputs one more; the errors of a
right kernel come out at a few 1e-3 (3.3-3.9e-3 measured on an H200), a wrong term gives errors of order 1.
2e-2 sits between the two.
Exit 0: the required kernel (default fused_recurrent, the one check_against_fla.sh uses) is within the bar;
1: it is not; 3: no GPU or no fla.
"""
import argparse
import sys

import torch
import torch.nn.functional as F

from fla_env import need_fla


def recurrence(q, k, v, g, scale):
    """The GLA recurrence token by token (the fp64 reference)."""
    b, t_len, h, dk = q.shape
    s = q.new_zeros(b, h, dk, v.shape[-1])
    out = []
    for t in range(t_len):
        s = s * g[:, t].exp()[..., None] + k[:, t, :, :, None] * v[:, t, :, None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, s))
    return torch.stack(out, 1)


def rel_rms(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=1001)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--dk", type=int, default=32)
    ap.add_argument("--dv", type=int, default=64)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--tol", type=float, default=2e-2)
    ap.add_argument("--require", choices=["chunk", "fused_recurrent", "none"], default="fused_recurrent")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if min(a.T, a.heads, a.dk, a.dv) <= 0 or not a.tol > 0:
        ap.error("--T, --heads, --dk, --dv and --tol must be positive")
    fla = need_fla("fla_kernel_probe", "fla.ops.gla", "chunk_gla", "fused_recurrent_gla")
    if fla is None:
        return 3
    chunk_gla, fused_recurrent_gla = fla

    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    shape_k, shape_v = (1, a.T, a.heads, a.dk), (1, a.T, a.heads, a.dv)
    q, k = torch.randn(shape_k, device=dev) * 0.5, torch.randn(shape_k, device=dev) * 0.5
    v, do = torch.randn(shape_v, device=dev), torch.randn(shape_v, device=dev)
    g = F.logsigmoid(torch.randn(shape_k, device=dev)) / 16
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    # The reference sees the inputs after their rounding to the kernels' dtype: only the kernels' own error remains.
    q, k, v, g, do = (x.to(dtype) for x in (q, k, v, g, do))
    ins = [x.double().requires_grad_() for x in (q, k, v, g)]
    o = recurrence(*ins, a.dk ** -0.5)
    o.backward(do.double())
    ref = [o.detach()] + [x.grad for x in ins]

    kernels = {
        "chunk": lambda *x: chunk_gla(*x, state_v_first=True)[0],
        "fused_recurrent": lambda *x: fused_recurrent_gla(*x, state_v_first=True)[0],
    }
    ok = {}
    print(f"fla's GLA kernels vs an fp64 recurrence: B 1 T {a.T} H {a.heads} dk {a.dk} dv {a.dv}, {a.dtype} inputs, "
          f"bar {a.tol:g}")
    for name, kernel in kernels.items():
        x = [t.clone().requires_grad_() for t in (q, k, v, g)]
        out = kernel(*x)
        out.backward(do)
        errs = [rel_rms(got, want) for got, want in zip([out] + [t.grad for t in x], ref)]
        ok[name] = all(e <= a.tol for e in errs)   # NaN fails
        print(f"  {name:16s} " + "  ".join(f"{n} {e:.2e}" for n, e in zip(["o", "dq", "dk", "dv", "dg"], errs))
              + f"  {'ok' if ok[name] else 'WRONG'}", flush=True)
    return 0 if a.require == "none" or ok[a.require] else 1


if __name__ == "__main__":
    sys.exit(main())
