#!/usr/bin/env python3
"""`spbench model --dump DIR` against fla's own GLAForCausalLM (see tests/model/README.md).

usage: fla_reference.py DIR [--precision fp32|autocast] [--attn-mode chunk|fused_recurrent] [--grad-tol X]
                         [--loss-tol X] [--unfuse norm,swiglu,ce]

Loads the dump's initial parameters into fla's GLAForCausalLM (fp32 parameters, fla's fused norm/gate, SwiGLU and
cross-entropy, its GLA kernel by --attn-mode, default chunk; check_against_fla.sh passes fused_recurrent; with
--precision autocast the steps run under torch.autocast(bfloat16), as a user trains with fla), recomputes the first step's loss and every parameter's gradient and the losses of every
AdamW step on the dump's tokens, and compares them with what spbench dumped, printing each error and its margin
(tolerance / error). Needs a GPU (fla's kernels are Triton) and fla's source on PYTHONPATH.
Exit 0: every check passed; 1: a check failed; 2: the dump is malformed; 3: fla or the GPU is missing.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import DumpError, kind_of, read_config, read_manifest, read_npy, rel_rms, run  # noqa: E402

# Why these bars (tests/model/README.md): spbench on a GPU rounds activations and GEMM inputs to bf16 (8 mantissa
# bits: a relative step of 2^-8 = 3.9e-3, so about 1.1e-3 RMS for one rounding); a step-1 gradient passes through
# about a dozen such roundings per block on its way back (saved activations, each product's inputs, the GLA kernels'
# bf16 outputs), which add up like a random walk: sqrt(12 x 4 blocks) x 1.1e-3 = 7.6e-3 for a 4-block model, and a
# small-norm tensor (a bias, a norm weight) can see twice that. 2e-2 is about 2.5x that estimate: it passes bf16's
# rounding and fails any wrong term, which gives errors of order 1. The reference itself computes in fp32 (fla's
# Triton products may use tf32, 10 mantissa bits: 4x finer than bf16, so it adds little). A loss is a mean over
# B x T tokens, so its own rounding averages out: 1e-2 on a loss that falls from ln(vocab) over 20 AdamW steps still
# flags a wrong update.
# With --precision autocast the reference rounds to bf16 too, independently of spbench: the two errors add like two
# independent walks, sqrt(2) x larger, and the gradient bar is sqrt(2) x 2e-2, rounded up to 3e-2.
GRAD_TOL = {"fp32": 2e-2, "autocast": 3e-2}
LOSS_TOL = 1e-2


def fla_name(name):
    """spbench's tensor name -> the name of the same tensor in fla's GLAForCausalLM."""
    if name == "lm_head.weight":
        return name
    if name == "embed.weight":
        return "model.embeddings.weight"
    return "model." + name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump")
    ap.add_argument("--precision", choices=["fp32", "autocast"], default="fp32")
    ap.add_argument("--grad-tol", type=float, default=None, help="default: 2e-2 (fp32), 3e-2 (autocast)")
    ap.add_argument("--loss-tol", type=float, default=LOSS_TOL)
    ap.add_argument("--unfuse", default="", help="comma-separated fla fusions to turn off: norm, swiglu, ce")
    ap.add_argument("--attn-mode", choices=["chunk", "fused_recurrent"], default="chunk",
                    help="fla's GLA kernel: chunk (what fla trains with) or its token-by-token recurrence")
    a = ap.parse_args()
    if a.grad_tol is None:
        a.grad_tol = GRAD_TOL[a.precision]
    if not (a.grad_tol > 0 and a.loss_tol > 0):
        ap.error("tolerances must be positive numbers")
    if not torch.cuda.is_available():
        print("fla_reference: no GPU (fla's kernels are Triton)", file=sys.stderr)
        return 3
    try:
        from fla.models import GLAConfig, GLAForCausalLM
    except Exception as e:   # noqa: BLE001
        print(f"fla_reference: cannot import fla ({type(e).__name__}: {e})", file=sys.stderr)
        return 3

    d = a.dump
    c = read_config(os.path.join(d, "config.csv"))
    # fla's layer fixes these two (gate_low_rank_dim 16, gate_logit_normalizer 16): a dump of another model is not
    # comparable.
    if c["gate_rank"] != 16 or c["gate_normaliser"] != 16:
        raise DumpError(f"gate rank {c['gate_rank']} and normaliser {c['gate_normaliser']}: fla's GLA has 16 and 16")
    entries, n = read_manifest(os.path.join(d, "manifest.csv"), c)
    flat = read_npy(os.path.join(d, "params.npy"), [n])
    grads = read_npy(os.path.join(d, "grads_step1.npy"), [n], finite=False)
    losses = read_npy(os.path.join(d, "losses.npy"), [c["steps"]], finite=False)
    tokens = read_npy(os.path.join(d, "tokens.npy"), [c["steps"], c["batch"], c["seq"] + 1])
    if np.any(tokens != np.round(tokens)) or tokens.min() < 0 or tokens.max() >= c["vocab"]:
        raise DumpError("tokens.npy: not integers in [0, vocab)")
    dev = torch.device("cuda")
    tokens = torch.from_numpy(tokens.astype(np.int64)).to(dev)

    config = GLAConfig(hidden_size=c["hidden"], expand_k=c["key_dim"] / c["hidden"],
                       expand_v=c["value_dim"] / c["hidden"], intermediate_size=c["mlp"],
                       num_hidden_layers=c["layers"], num_heads=c["heads"], vocab_size=c["vocab"],
                       norm_eps=c["norm_eps"], tie_word_embeddings=False, fuse_norm="norm" not in a.unfuse,
                       fuse_swiglu="swiglu" not in a.unfuse, fuse_cross_entropy="ce" not in a.unfuse,
                       use_cache=False, attn_mode=a.attn_mode)
    model = GLAForCausalLM(config).to(dev, dtype=torch.float32)
    model.train()
    named = dict(model.named_parameters())
    gated = "attn.g_norm_swish_gate." if "norm" not in a.unfuse else "attn.g_norm."  # fla's name when fused
    mapped = {fla_name(name).replace("attn.g_norm.", gated): (name, off, shape) for name, off, shape in entries}
    if set(named) != set(mapped):
        extra, missing = sorted(set(named) - set(mapped)), sorted(set(mapped) - set(named))
        raise DumpError(f"tensor names do not map onto fla's model: fla only {extra[:4]}, dump only {missing[:4]}")
    with torch.no_grad():
        for fname, (name, off, shape) in mapped.items():
            p = named[fname]
            src = torch.from_numpy(flat[off:off + math.prod(shape)].copy()).to(dev)
            if src.numel() != p.numel():
                raise DumpError(f"{name}: {src.numel()} values, fla's {fname} has {p.numel()}")
            p.copy_(src.view(p.shape))
    under = " under bf16 autocast" if a.precision == "autocast" else ""
    print(f"dump {d}: {len(entries)} tensors, {n} parameters, {c['layers']} layers, {c['heads']} heads (dk {c['dk']}, "
          f"dv {c['dv']}), B={c['batch']} T={c['seq']}, {c['steps']} steps; fla's GLAForCausalLM on "
          f"{torch.cuda.get_device_name(dev)}, fp32 parameters{under}")

    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["adam_eps"],
                            weight_decay=c["weight_decay"])
    passed = failed = 0
    worst_grad, worst_loss = 0.0, 0.0
    for s in range(c["steps"]):
        opt.zero_grad(set_to_none=True)
        # fla shifts the labels itself (position t predicts token t + 1; the last position is ignored), so the T + 1
        # tokens of a dumped row give exactly spbench's T predictions.
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "autocast"):
            loss = model(input_ids=tokens[s], labels=tokens[s]).loss
        loss.backward()
        if s == 0:
            errs = {}   # kind -> [(error, name, RMS of fla's gradient, RMS of spbench's)]
            for fname, (name, off, shape) in mapped.items():
                ref = named[fname].grad.detach().double().cpu().numpy().reshape(-1)
                got = grads[off:off + ref.size].astype(np.float64)
                errs.setdefault(kind_of(name), []).append(
                    (rel_rms(ref, got), name, np.sqrt(np.mean(ref ** 2)), np.sqrt(np.mean(got ** 2))))
            for k, lst in errs.items():
                nbad = sum(1 for e, *_ in lst if not e <= a.grad_tol)   # NaN counts as a failure
                passed, failed = passed + len(lst) - nbad, failed + nbad
                err, name, rms_fla, rms_spb = max(lst, key=lambda t: t[0] if t[0] == t[0] else math.inf)
                worst_grad = max(worst_grad, err if err == err else math.inf)
                margin = a.grad_tol / err if err else math.inf
                print(f"grad {k:20s} worst {name:32s} rel_rms {err:.3e}  margin {margin:5.1f}x  ({len(lst)} tensors, "
                      f"{nbad} over {a.grad_tol:g})  {'ok' if nbad == 0 else 'FAIL'}  rms fla {rms_fla:.3e} "
                      f"spbench {rms_spb:.3e}")
        ref, got = loss.item(), float(losses[s])
        err = abs(ref - got) / abs(ref)
        ok = err <= a.loss_tol
        worst_loss = max(worst_loss, err if err == err else math.inf)
        passed, failed = passed + ok, failed + (not ok)
        print(f"step {s + 1:3d} loss fla {ref:.6f} spbench {got:.6f} rel {err:.3e}  {'ok' if ok else 'FAIL'}")
        opt.step()
    print(f"worst gradient error {worst_grad:.3e} (bar {a.grad_tol:g}, margin "
          f"{a.grad_tol / worst_grad if worst_grad else math.inf:.1f}x); worst loss error {worst_loss:.3e} "
          f"(bar {a.loss_tol:g}, margin {a.loss_tol / worst_loss if worst_loss else math.inf:.1f}x)")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    run(main)
