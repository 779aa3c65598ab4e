#!/usr/bin/env python3
"""Independent PyTorch reference for `spbench model --dump DIR` (see tests/model/README.md).

usage: torch_reference.py DIR [--device cuda|cpu] [--dtype float32|float64]

Rebuilds the GLA language model in plain torch operations from DIR's parameters, recomputes the first step's loss
and gradients and the losses of every AdamW step, and compares them with what spbench dumped.
Exit 0: every check passed; 1: some check failed; 2: the dump is malformed.
"""
import argparse
import csv
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F

GRAD_TOL = 2e-2   # relative RMS error of every parameter's gradient at step 1
LOSS_TOL = 1e-2   # relative error of every step's loss

INT_KEYS = ["vocab", "hidden", "layers", "heads", "dk", "dv", "key_dim", "value_dim", "mlp", "gate_rank",
            "batch", "seq", "steps"]
FLOAT_KEYS = ["lr", "beta1", "beta2", "adam_eps", "weight_decay", "norm_eps", "gate_normaliser"]


class DumpError(Exception):
    pass


def read_csv(path, columns):
    if not os.path.isfile(path):
        raise DumpError(f"missing {path}")
    with open(path, newline="") as f:
        rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
    if not rows or rows[0] != columns:
        raise DumpError(f"{path}: header must be {','.join(columns)}")
    for r in rows[1:]:
        if len(r) != len(columns):
            raise DumpError(f"{path}: bad line {','.join(r)}")
    return rows[1:]


def read_config(path):
    raw = dict(read_csv(path, ["key", "value"]))
    cfg = {}
    try:
        for k in INT_KEYS:
            v = float(raw[k])
            if v != int(v):
                raise DumpError(f"{path}: {k} = {raw[k]} is not an integer")
            cfg[k] = int(v)
        for k in FLOAT_KEYS:
            cfg[k] = float(raw[k])
    except KeyError as e:
        raise DumpError(f"{path}: missing key {e}")
    except ValueError as e:
        raise DumpError(f"{path}: {e}")
    if cfg["key_dim"] != cfg["heads"] * cfg["dk"] or cfg["value_dim"] != cfg["heads"] * cfg["dv"]:
        raise DumpError(f"{path}: key_dim/value_dim do not match heads * dk/dv")
    return cfg


def read_npy(path, shape, finite=True):
    if not os.path.isfile(path):
        raise DumpError(f"missing {path}")
    try:
        a = np.load(path, allow_pickle=False)
    except ValueError as e:
        raise DumpError(f"{path}: {e}")
    if a.dtype != np.float32 or tuple(a.shape) != tuple(shape) or a.dtype.byteorder not in "<=|":
        raise DumpError(f"{path}: expected '<f4' {list(shape)}, got {a.dtype.str} {list(a.shape)}")
    if finite and not np.all(np.isfinite(a)):
        raise DumpError(f"{path}: non-finite values")
    return a


def expected_shapes(c):
    """The parameter names and their logical shapes (a vector is 1-D), in the model's order."""
    V, D, Kd, Vd, Fm, R = c["vocab"], c["hidden"], c["key_dim"], c["value_dim"], c["mlp"], c["gate_rank"]
    shapes = {"embed.weight": (V, D)}
    for l in range(c["layers"]):
        p = f"layers.{l}."
        shapes.update({
            p + "attn_norm.weight": (D,), p + "attn.q_proj.weight": (Kd, D), p + "attn.k_proj.weight": (Kd, D),
            p + "attn.v_proj.weight": (Vd, D), p + "attn.g_proj.weight": (Vd, D),
            p + "attn.gk_proj.0.weight": (R, D), p + "attn.gk_proj.1.weight": (Kd, R),
            p + "attn.gk_proj.1.bias": (Kd,), p + "attn.g_norm.weight": (c["dv"],),
            p + "attn.o_proj.weight": (D, Vd), p + "mlp_norm.weight": (D,), p + "mlp.gate_proj.weight": (Fm, D),
            p + "mlp.up_proj.weight": (Fm, D), p + "mlp.down_proj.weight": (D, Fm)})
    shapes.update({"norm.weight": (D,), "lm_head.weight": (V, D)})
    return shapes


def read_manifest(path, cfg):
    """Returns [(name, offset, shape)] sorted by offset and the end of the last tensor."""
    want = expected_shapes(cfg)
    entries, seen = [], set()
    for name, off, rows, cols in read_csv(path, ["name", "offset", "rows", "cols"]):
        if name not in want or name in seen:
            raise DumpError(f"{path}: unexpected or repeated tensor {name}")
        seen.add(name)
        shape = want[name]
        try:
            got, off = (int(rows), int(cols)), int(off)
        except ValueError:
            raise DumpError(f"{path}: bad line for {name}")
        ok = got == shape if len(shape) == 2 else got in [(1, shape[0]), (shape[0], 1)]
        if not ok:
            raise DumpError(f"{path}: {name} is {got[0]}x{got[1]}, expected {shape}")
        entries.append((name, off, shape))
    missing = [n for n in want if n not in seen]
    if missing:
        raise DumpError(f"{path}: missing tensors {missing[:4]}")
    # Tensors may be padded apart (spbench starts most on 64 elements), never overlap.
    entries.sort(key=lambda e: e[1])
    end = 0
    for name, off, shape in entries:
        if off < end:
            raise DumpError(f"{path}: {name} starts at {off}, inside the tensor before it (ends at {end})")
        end = off + math.prod(shape)
    return entries, end


def rmsnorm(x, w, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def gla(q, k, v, g, scale):
    """Token loop: S_t = diag(exp g_t) S_{t-1} + k_t v_t^T, o_t = scale S_t^T q_t; q, k, g [B,T,H,dk], v [B,T,H,dv]."""
    B, T, H, dk = q.shape
    S = q.new_zeros(B, H, dk, v.shape[-1])
    out = []
    for t in range(T):
        S = torch.exp(g[:, t]).unsqueeze(-1) * S + k[:, t].unsqueeze(-1) * v[:, t].unsqueeze(-2)
        out.append(scale * torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    return torch.stack(out, dim=1)


def model_loss(P, tok, c):
    """P: name -> parameter; tok: long [B, T+1]. Mean cross-entropy of the next token."""
    inputs, targets = tok[:, :-1], tok[:, 1:]
    B, T = inputs.shape
    H, dk, dv, eps = c["heads"], c["dk"], c["dv"], c["norm_eps"]
    x = P["embed.weight"][inputs]
    for l in range(c["layers"]):
        p = lambda n: P[f"layers.{l}.{n}"]   # noqa: E731 (this layer's tensor n)
        h = rmsnorm(x, p("attn_norm.weight"), eps)
        q = (h @ p("attn.q_proj.weight").T).view(B, T, H, dk)
        k = (h @ p("attn.k_proj.weight").T).view(B, T, H, dk)
        v = (h @ p("attn.v_proj.weight").T).view(B, T, H, dv)
        z = (h @ p("attn.g_proj.weight").T).view(B, T, H, dv)
        gk = (h @ p("attn.gk_proj.0.weight").T) @ p("attn.gk_proj.1.weight").T + p("attn.gk_proj.1.bias")
        g = (F.logsigmoid(gk) / c["gate_normaliser"]).view(B, T, H, dk)
        o = gla(q, k, v, g, dk ** -0.5)
        o = rmsnorm(o, p("attn.g_norm.weight"), eps) * (z * torch.sigmoid(z))
        x = x + o.reshape(B, T, H * dv) @ p("attn.o_proj.weight").T
        h2 = rmsnorm(x, p("mlp_norm.weight"), eps)
        mlp = F.silu(h2 @ p("mlp.gate_proj.weight").T) * (h2 @ p("mlp.up_proj.weight").T)
        x = x + mlp @ p("mlp.down_proj.weight").T
    logits = rmsnorm(x, P["norm.weight"], eps) @ P["lm_head.weight"].T
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def rel_rms(ref, x):
    ref, x = ref.astype(np.float64), x.astype(np.float64)
    num, den = np.sqrt(np.mean((ref - x) ** 2)), np.sqrt(np.mean(ref ** 2))
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def kind_of(name):
    return re.sub(r"^layers\.\d+\.", "", name).replace(".weight", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev, dt = torch.device(a.device), getattr(torch, a.dtype)
    if dev.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda, but torch sees no GPU")

    d = a.dump
    c = read_config(os.path.join(d, "config.csv"))
    entries, n = read_manifest(os.path.join(d, "manifest.csv"), c)
    flat = read_npy(os.path.join(d, "params.npy"), [n])
    grads = read_npy(os.path.join(d, "grads_step1.npy"), [n], finite=False)     # NaN there fails the check
    losses = read_npy(os.path.join(d, "losses.npy"), [c["steps"]], finite=False)
    tokens = read_npy(os.path.join(d, "tokens.npy"), [c["steps"], c["batch"], c["seq"] + 1])
    if np.any(tokens != np.round(tokens)) or tokens.min() < 0 or tokens.max() >= c["vocab"]:
        raise DumpError("tokens.npy: not integers in [0, vocab)")
    tokens = torch.from_numpy(tokens.astype(np.int64)).to(dev)
    print(f"dump {d}: {len(entries)} tensors, {n} parameters, B={c['batch']} T={c['seq']} steps={c['steps']}; "
          f"reference on {dev} in {a.dtype}")

    P = {name: torch.tensor(flat[off:off + math.prod(shape)].reshape(shape), dtype=dt, device=dev,
                            requires_grad=True) for name, off, shape in entries}
    opt = torch.optim.AdamW(list(P.values()), lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["adam_eps"],
                            weight_decay=c["weight_decay"])
    passed = failed = 0
    for s in range(c["steps"]):
        opt.zero_grad(set_to_none=True)
        loss = model_loss(P, tokens[s], c)
        loss.backward()
        if s == 0:   # gradients of step 1 w.r.t. the initial parameters, reported per kind of tensor
            errs = {}
            for name, off, shape in entries:
                ref = P[name].grad.detach().double().cpu().numpy().reshape(-1)
                errs.setdefault(kind_of(name), []).append((rel_rms(ref, grads[off:off + ref.size]), name))
            for k, lst in errs.items():
                nbad = sum(1 for e, _ in lst if not e <= GRAD_TOL)   # NaN counts as a failure
                passed, failed = passed + len(lst) - nbad, failed + nbad
                err, name = max(lst, key=lambda t: t[0] if t[0] == t[0] else math.inf)
                print(f"grad {k:20s} worst {name:32s} rel_rms {err:.3e} ({len(lst)} tensors, {nbad} over "
                      f"{GRAD_TOL:g})  {'ok' if nbad == 0 else 'FAIL'}")
        ref, got = loss.item(), float(losses[s])
        err = abs(ref - got) / abs(ref)
        ok = err <= LOSS_TOL   # False for NaN
        passed, failed = passed + ok, failed + (not ok)
        print(f"step {s + 1:3d} loss torch {ref:.6f} spbench {got:.6f} rel {err:.3e}  {'ok' if ok else 'FAIL'}")
        opt.step()
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def run(entry):
    """Exit with entry()'s status; a malformed dump exits 2 (shared with fla_reference.py)."""
    try:
        sys.exit(entry())
    except DumpError as e:
        print(f"malformed dump: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    run(main)
