#!/usr/bin/env python3
"""GLA-1B training steps in PyTorch with fla's GLAForCausalLM: the stack a user would run instead of `spbench model`.

usage: fla_baseline.py --heads H --seq T --precision {bf16,fp32-autocast-bf16,bf16-fp32-master}
                       --compile {none,block,model} [--checkpoint] [--csv FILE] ...

One configuration per process (so that peak memory is this configuration's alone). The model is spbench's GLA-1B
configuration (20 layers, hidden 2048, vocab 32000, expand_k 0.5, expand_v 1, MLP 5632, untied head, gate rank 16,
gate normaliser 16) with fla's fused RMSNorm + output gate, fused SwiGLU and fused cross-entropy. A step is the
forward with labels (fla's loss), the backward and a fused AdamW step (lr 3e-4, betas 0.9/0.95, weight decay 0.1, no
clipping), B = 1, random tokens. `--warmup` steps first, then `--steps` timed with CUDA events around each step.

Precisions:
  bf16                  every parameter, gradient and AdamW state in bf16 (fla's own benchmark convention)
  fp32-autocast-bf16    fp32 parameters, gradients and AdamW states, the step under torch.autocast(bfloat16)
  bf16-fp32-master      mixed precision as Megatron trains: bf16 parameters for the forward and backward, fp32 master
                        weights beside them, each bf16 gradient added into an fp32 main gradient as soon as it is
                        made (and freed), AdamW on the fp32 masters with fp32 moments, the bf16 weights written from
                        the masters after each step; no autocast
The last two do the work of spbench's step (fp32 master weights, bf16 products, fp32 optimizer).

Compile modes:
  none                  eager
  block                 each of the 20 blocks compiled on its own (module.compile(), as torchtitan and fla's trainer
                        do), the layer index kept out of the guards so that one graph serves every block
  model                 the whole model under torch.compile
Peak memory is read three ways: the device's used memory as the driver counts it after each step (the context,
cuBLAS and Triton modules included: what `spbench model` reports as peak_mem_gib), and torch's own peaks of allocated
and reserved bytes.

The result is checked before it is written: every loss finite, the first step's loss within 10% of ln(vocab) (the
loss of a freshly initialised model on random tokens). A failed check prints FAIL and writes no row (exit 1).
Exit 0: measured (and written); 1: the check failed; 2: bad arguments or no GPU; 3: fla or torch.compile failed.
"""
import argparse
import csv
import math
import os
import socket
import statistics
import sys
import time

# The row's columns: DESIGN §6's schema first (in its order), then the model level's and this baseline's own.
COLUMNS = [
    "level", "method", "backend", "world_size", "batch", "heads", "dk", "dv", "tokens_per_rank", "block_elems",
    "dtype", "pass", "time_ms_mean", "time_ms_median", "time_ms_min", "time_ms_max", "err_rel_rms",
    "tokens_per_s_per_gpu", "gpu", "git_sha", "date",
    "chunk", "blocks", "comm", "warmup", "iters", "time_ms_cv", "time_ms_mean_over_ranks", "host", "driver", "cuda",
    "nccl", "mpi", "overlap",
    "layers", "hidden", "vocab", "expand_k", "expand_v", "mlp", "steps", "seed", "loss", "peak_mem_gib", "mfu",
    "recompute", "tokens_per_s", "peak_tflops", "params", "flops_per_token", "nodes", "ranks_per_node",
    "precision", "compile", "torch_max_allocated_gib", "torch_max_reserved_gib", "torch", "triton", "fla_commit",
]
# The key of a configuration: a row with the same values of these is already measured (resume).
KEY = ["gpu", "git_sha", "heads", "tokens_per_rank", "layers", "hidden", "vocab", "mlp", "precision", "compile",
       "recompute", "warmup", "iters", "seed", "fla_commit"]

PRECISIONS = ["bf16", "fp32-autocast-bf16", "bf16-fp32-master"]
COMPILE_MODES = ["none", "block", "model"]

# Dense bf16 tensor-core peak (TFLOP/s) from the vendors' datasheets, as runtime/gpu_peak.cpp holds it for spbench.
DATASHEET_BF16 = [("H200 NVL", 835.5), ("H200", 989.4), ("H100 NVL", 835.5), ("H100 PCIe", 756.5),
                  ("H100", 989.4), ("A100", 312.0)]


def fail(code, msg):
    print(f"fla_baseline: error: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True, help="tokens of the sequence (B = 1)")
    ap.add_argument("--precision", choices=PRECISIONS, required=True)
    ap.add_argument("--compile", choices=COMPILE_MODES, default="none",
                    help="none (eager), block (each block compiled on its own) or model (the whole model)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="activation checkpointing of every block (gradient_checkpointing_enable, non-reentrant: "
                         "each block's input kept, its forward run again in the backward), as spbench's "
                         "--recompute=blocks; the row's recompute column says blocks")
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--mlp", type=int, default=5632)
    ap.add_argument("--warmup", "-w", type=int, default=5)
    ap.add_argument("--steps", "-n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--csv", default="", help="append the row to this CSV (created with its header)")
    ap.add_argument("--git-sha", default=os.environ.get("SPB_GIT_SHA", "unknown"),
                    help="the spbench commit this run belongs to (default $SPB_GIT_SHA)")
    a = ap.parse_args()
    for name in ["heads", "seq", "layers", "hidden", "vocab", "mlp", "steps"]:
        if getattr(a, name) < 1:
            fail(2, f"--{name} must be >= 1 (got {getattr(a, name)})")
    if a.warmup < 0:
        fail(2, f"--warmup must be >= 0 (got {a.warmup})")
    if a.seed < 0:
        fail(2, f"--seed must be >= 0 (got {a.seed})")
    key_dim, value_dim = a.hidden // 2, a.hidden
    if key_dim % a.heads or value_dim % a.heads:
        fail(2, f"--heads {a.heads} must divide the key dim {key_dim} and the value dim {value_dim}")
    return a


def read_rows(path):
    """The rows already in `path`; a file with another header, or a half last line, is refused."""
    if not path or not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        text = f.read()
    if text and not text.endswith("\n"):
        fail(2, f"--csv {path}: its last line is not terminated (a half row); repair the file first")
    rows = list(csv.reader(text.splitlines()))
    if not rows or rows[0] != COLUMNS:
        fail(2, f"--csv {path}: the file exists with other columns; write to a new file")
    for i, r in enumerate(rows[1:], start=2):
        if len(r) != len(COLUMNS):
            fail(2, f"--csv {path}:{i}: {len(r)} fields, the header has {len(COLUMNS)}")
    return [dict(zip(COLUMNS, r)) for r in rows[1:]]


def append_row(path, row):
    """One write of the whole line (the header first when the file is new), flushed and synced."""
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if new:
        w.writerow(COLUMNS)
    w.writerow([row.get(c, "") for c in COLUMNS])
    data = buf.getvalue().encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError("short write")
            os.fsync(fd)
        except OSError as e:
            os.ftruncate(fd, size)   # no half row stays behind
            fail(2, f"--csv {path}: cannot append the row ({e})")
    finally:
        os.close(fd)


def driver_version():
    try:
        with open("/proc/driver/nvidia/version") as f:
            for word in f.readline().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    return ""


def compiled(torch, model, mode):
    """What the step calls: the model eager, with each block compiled on its own, or compiled whole."""
    if mode == "none":
        return model
    if mode == "model":
        return torch.compile(model)
    # fla's blocks keep their index as an int attribute; dynamo would make it a constant of each block's guards, and
    # compile a graph per block until its recompile limit. Kept out of the guards, one graph serves all 20 blocks.
    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
        torch._dynamo.config.allow_unspec_int_on_nn_module = True
    else:
        print("# this torch has no allow_unspec_int_on_nn_module: a block's index stays in its guards", flush=True)
    for block in model.model.layers:
        block.compile()
    return model


def make_step(torch, model, precision, forward):
    """One training step for `precision`: the forward with labels, the backward, the AdamW step; returns the loss."""
    adamw = dict(lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    if precision != "bf16-fp32-master":
        opt = torch.optim.AdamW(model.parameters(), **adamw)
        autocast = precision == "fp32-autocast-bf16"

        def step(tokens):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss = forward(input_ids=tokens, labels=tokens).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
        return step

    # Megatron's main params and main grads: the model's bf16 weights are what the forward and backward read; each
    # has an fp32 master and an fp32 main gradient. A bf16 gradient is added into its main gradient the moment the
    # backward has made it, and freed; AdamW (fp32 moments) steps the masters, which are then written back as bf16.
    weights = [p for p in model.parameters() if p.requires_grad]
    masters = [torch.nn.Parameter(w.detach().float()) for w in weights]
    for w, m in zip(weights, masters):
        m.grad = torch.zeros_like(m)

        def accumulate(p, main=m):
            main.grad.add_(p.grad)
            p.grad = None
        w.register_post_accumulate_grad_hook(accumulate)
    main_grads = [m.grad for m in masters]
    opt = torch.optim.AdamW(masters, **adamw)

    def step(tokens):
        loss = forward(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        with torch.no_grad():
            torch._foreach_copy_(weights, masters)
            torch._foreach_zero_(main_grads)
        return loss
    return step


def main():
    a = parse_args()
    try:
        import torch
    except ImportError as e:
        fail(3, f"cannot import torch ({e})")
    if not torch.cuda.is_available():
        fail(2, "no GPU: torch.cuda.is_available() is False")
    try:
        import triton
        from fla.models import GLAConfig, GLAForCausalLM
    except Exception as e:   # noqa: BLE001 (any import failure of fla is reported the same way)
        fail(3, f"cannot import fla ({type(e).__name__}: {e}); put fla's source on PYTHONPATH")

    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(dev)
    peak = next((t for name, t in DATASHEET_BF16 if name in gpu), float("nan"))
    fla_commit = os.environ.get("FLA_COMMIT", "")
    if not fla_commit:
        import fla
        commit_file = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(fla.__file__))), "COMMIT")
        if os.path.exists(commit_file):
            fla_commit = open(commit_file).read().strip()[:12]
        else:
            fla_commit = getattr(fla, "__version__", "")

    row = {
        "level": "model", "method": "pytorch-fla", "backend": "pytorch", "world_size": 1, "batch": 1,
        "heads": a.heads, "dk": a.hidden // 2 // a.heads, "dv": a.hidden // a.heads, "tokens_per_rank": a.seq,
        "block_elems": 0, "dtype": "bf16", "pass": "step", "err_rel_rms": "", "gpu": gpu, "git_sha": a.git_sha,
        "chunk": 64, "blocks": 0, "comm": "none", "warmup": a.warmup, "iters": a.steps, "host": socket.gethostname(),
        "driver": driver_version(), "cuda": torch.version.cuda or "", "nccl": "", "mpi": "", "overlap": 0,
        "layers": a.layers, "hidden": a.hidden, "vocab": a.vocab, "expand_k": 0.5, "expand_v": 1, "mlp": a.mlp,
        "steps": a.steps, "seed": a.seed, "recompute": "blocks" if a.checkpoint else "none", "peak_tflops": peak,
        "nodes": 1, "ranks_per_node": 1,
        "precision": a.precision, "compile": a.compile, "torch": torch.__version__, "triton": triton.__version__,
        "fla_commit": fla_commit,
    }
    done = read_rows(a.csv)
    if any(all(str(r[k]) == str(row[k]) for k in KEY) for r in done):
        print(f"fla_baseline: {a.heads} heads, {a.seq} tokens, {a.precision}, compile {a.compile}: already in "
              f"{a.csv}, skipped")
        return 0

    torch.manual_seed(a.seed)
    config = GLAConfig(hidden_size=a.hidden, expand_k=0.5, expand_v=1.0, intermediate_size=a.mlp,
                       num_hidden_layers=a.layers, num_heads=a.heads, vocab_size=a.vocab, tie_word_embeddings=False,
                       fuse_norm=True, fuse_swiglu=True, fuse_cross_entropy=True, use_cache=False,
                       attn_mode="chunk")
    bf16_weights = a.precision in ("bf16", "bf16-fp32-master")
    model = GLAForCausalLM(config).to(dev, dtype=torch.bfloat16 if bf16_weights else torch.float32)
    model.train()
    if a.checkpoint:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params = sum(p.numel() for p in model.parameters())
    embed = model.model.embeddings.weight.numel()
    H, dk, dv = a.heads, row["dk"], row["dv"]
    # spbench's count (model/gla_model.cpp, flops_per_token): 6 x non-embedding parameters + the attention's own.
    flops_tok = 6.0 * (params - embed) + a.layers * 3.0 * H * (4.0 * dk * dv + 64.0 * (dk + dv))
    row.update(params=params, flops_per_token=flops_tok)
    step = make_step(torch, model, a.precision, compiled(torch, model, a.compile))

    gen = torch.Generator(device=dev).manual_seed(a.seed)
    total = a.warmup + a.steps

    print(f"# fla GLAForCausalLM  {gpu}  {a.layers} layers  hidden {a.hidden}  heads {H} (dk {dk}, dv {dv})  "
          f"mlp {a.mlp}  vocab {a.vocab}  params {params / 1e6:.1f} M  T {a.seq}  {a.precision}  "
          f"compile {a.compile}  warm-up {a.warmup}  steps {a.steps}  fla {fla_commit}", flush=True)
    free0, total_mem = torch.cuda.mem_get_info(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    times, losses, used_peak = [], [], 0
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t_start = time.time()
    try:
        for s in range(total):
            tokens = torch.randint(0, a.vocab, (1, a.seq), device=dev, generator=gen)
            torch.cuda.synchronize(dev)
            e0.record()
            loss = step(tokens)
            e1.record()
            torch.cuda.synchronize(dev)
            losses.append(loss.item())
            if s >= a.warmup:
                times.append(e0.elapsed_time(e1))
            free, _ = torch.cuda.mem_get_info(dev)
            used_peak = max(used_peak, total_mem - free)
            if s == 0:
                print(f"# first step {time.time() - t_start:.1f} s (compiles and autotunes included)", flush=True)
    except torch.cuda.OutOfMemoryError as e:
        print(f"fla_baseline: out of memory at step {s + 1}: {str(e).splitlines()[0]}", flush=True)
        return 1
    except Exception as e:   # noqa: BLE001 (a torch.compile or Triton failure: reported, no row)
        print(f"fla_baseline: error: step {s + 1} failed ({type(e).__name__}: {str(e).splitlines()[0][:300]})",
              file=sys.stderr, flush=True)
        return 3

    if a.compile != "none":
        from torch._dynamo.utils import counters
        print(f"# torch.compile: {dict(counters['stats'])}; graph breaks {sum(counters['graph_break'].values())}",
              flush=True)

    gib = float(1 << 30)
    mean = statistics.fmean(times)
    tps = a.seq / (mean / 1e3)
    row.update(
        time_ms_mean=f"{mean:.4f}", time_ms_median=f"{statistics.median(times):.4f}", time_ms_min=f"{min(times):.4f}",
        time_ms_max=f"{max(times):.4f}",
        time_ms_cv=f"{(statistics.pstdev(times) / mean if len(times) > 1 else 0.0):.5f}",
        time_ms_mean_over_ranks=f"{mean:.4f}", tokens_per_s_per_gpu=f"{tps:.1f}", tokens_per_s=f"{tps:.1f}",
        loss=f"{losses[-1]:.6f}", peak_mem_gib=f"{used_peak / gib:.3f}",
        mfu=(f"{flops_tok * tps / (peak * 1e12):.4f}" if peak == peak else ""),
        torch_max_allocated_gib=f"{torch.cuda.max_memory_allocated(dev) / gib:.3f}",
        torch_max_reserved_gib=f"{torch.cuda.max_memory_reserved(dev) / gib:.3f}",
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    ln_v = math.log(a.vocab)
    ok = all(math.isfinite(x) for x in losses) and abs(losses[0] - ln_v) <= 0.1 * ln_v
    print(f"  heads {H:3d}  T {a.seq:6d}  {a.precision:18s} compile {a.compile}  mean {mean:9.3f} ms  median "
          f"{row['time_ms_median']} ms  {tps:9.0f} tok/s  mfu {row['mfu'] or '-'}  peak {used_peak / gib:6.2f} GiB "
          f"(torch allocated {row['torch_max_allocated_gib']}, reserved {row['torch_max_reserved_gib']})  "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f}  {'OK' if ok else 'FAIL'}", flush=True)
    if not ok:
        print(f"fla_baseline: FAIL: losses {losses[0]:.4f} .. {losses[-1]:.4f}: not finite, or the first is not "
              f"within 10% of ln(vocab) = {ln_v:.4f}; no row written", flush=True)
        return 1
    if a.csv:
        append_row(a.csv, row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
