#!/usr/bin/env python3
"""spbench's products beside PyTorch's on one GPU: is the step's GEMM time the library's or the GPU's?

usage: products_beside_torch.py

The products of a GLA-1B step (16384 tokens, 32 heads; their shapes, transposes and C types as model/gla_model.cpp
calls them) run through cublasGemmEx exactly as model/cuda/model_gemm.cu maps a row-major product onto cuBLAS
(called here through ctypes, on PyTorch's stream, with a 32 MiB workspace), with fp32 C where spbench writes fp32 and
again with bf16 C, and beside them the same product as fla's model makes it in PyTorch (F.linear or a matmul, bf16
out). Each alone: 3 warm-up calls, the median of 10 timed with CUDA events. Then a whole step's products (20 layers
and the LM head's four chunks) back to back, both ways, twice: what they take when the GPU runs at its power cap.
Operands are uniform random bf16 in [-0.5, 0.5). Each product's C (fp32 and bf16) is checked against PyTorch's: a
relative RMS difference over 1e-2 (bf16's rounding of C is 2^-9, about 2e-3) fails the run, so a wrong mapping of
the operands cannot pass as a time.
Exit 0: measured and checked; 1: a product differs; 3: no GPU, no PyTorch or no cuBLAS.
"""
import ctypes
import glob
import os
import site
import sys

from cuda_timing import median_ms

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"products_beside_torch.py: no PyTorch ({e})", file=sys.stderr)
    sys.exit(3)
if not torch.cuda.is_available():
    print("products_beside_torch.py: no GPU", file=sys.stderr)
    sys.exit(3)

N, D, Kd, Vd, FF, R, V = 16384, 2048, 1024, 2048, 5632, 16, 32000
P = 2 * Kd + 2 * Vd + R
f32, bf = "f32", "bf16"
# (name, trans_a, trans_b, M, N, K, c_type) in spbench's row-major convention (model/gla_model.cpp)
LAYER = [
    ("fwd q", 0, 1, N, Kd, D, bf), ("fwd k", 0, 1, N, Kd, D, bf), ("fwd v", 0, 1, N, Vd, D, bf),
    ("fwd g", 0, 1, N, Vd, D, bf), ("fwd rank0", 0, 1, N, R, D, bf), ("fwd rank1", 0, 1, N, Kd, R, bf),
    ("fwd o_proj", 0, 1, N, D, Vd, f32), ("fwd gate/up", 0, 1, N, 2 * FF, D, bf), ("fwd down", 0, 1, N, D, FF, f32),
    ("bwd down dX", 0, 0, N, FF, D, bf), ("bwd down dW", 1, 0, D, FF, N, f32),
    ("bwd gate/up dW", 1, 0, 2 * FF, D, N, f32), ("bwd gate/up dX", 0, 0, N, D, 2 * FF, f32),
    ("bwd o dW", 1, 0, D, Vd, N, f32), ("bwd o dX", 0, 0, N, Vd, D, bf),
    ("bwd rank1 dW", 1, 0, Kd, R, N, f32), ("bwd rank1 dX", 0, 0, N, R, Kd, bf),
    ("bwd proj dW", 1, 0, P, D, N, f32), ("bwd proj dX", 0, 0, N, D, P, f32),
]
HEAD = [("lm fwd", 0, 1, 4096, V, D, f32), ("lm dW", 1, 0, V, D, 4096, f32), ("lm dX", 0, 0, 4096, D, V, f32)]

# PyTorch's own cuBLAS where its wheel has one (the library its matmuls run), else the system's.
libdir = [os.path.dirname(f) for d in site.getsitepackages()
          for f in glob.glob(os.path.join(d, "nvidia", "**", "libcublas.so.13"), recursive=True)]
try:
    lib = ctypes.CDLL(os.path.join(libdir[0], "libcublas.so.13") if libdir else "libcublas.so.13")
except OSError as e:
    print(f"products_beside_torch.py: no cuBLAS ({e})", file=sys.stderr)
    sys.exit(3)
h = ctypes.c_void_p()
assert lib.cublasCreate_v2(ctypes.byref(h)) == 0
ws = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
lib.cublasSetStream_v2(h, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
assert lib.cublasSetWorkspace_v2(h, ctypes.c_void_p(ws.data_ptr()), ctypes.c_size_t(32 << 20)) == 0
one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)


def operands(ta, tb, M, Nn, K, ct):
    g = torch.Generator(device="cuda").manual_seed(M + Nn + K)
    A = (torch.rand((K, M) if ta else (M, K), device="cuda", generator=g) - 0.5).to(torch.bfloat16)
    B = (torch.rand((Nn, K) if tb else (K, Nn), device="cuda", generator=g) - 0.5).to(torch.bfloat16)
    C = torch.empty(M, Nn, device="cuda", dtype=torch.float32 if ct == f32 else torch.bfloat16)
    return A, B, C


def spb(ta, tb, M, Nn, K, ct, A, B, C):
    """C [M, Nn] = op(A) op(B), row-major, as CublasGemm::gemm: cuBLAS computes C^T = op(B)^T op(A)^T.
    Enums: CUDA_R_16BF 14, CUDA_R_32F 0, CUBLAS_COMPUTE_32F 68, CUBLAS_GEMM_DEFAULT -1."""
    ldb, lda = (K if tb else Nn), (M if ta else K)
    st = lib.cublasGemmEx(h, int(tb), int(ta), Nn, M, K, ctypes.byref(one), ctypes.c_void_p(B.data_ptr()), 14, ldb,
                          ctypes.c_void_p(A.data_ptr()), 14, lda, ctypes.byref(zero), ctypes.c_void_p(C.data_ptr()),
                          0 if ct == f32 else 14, Nn, 68, -1)
    assert st == 0, st


def tor(ta, tb, M, Nn, K, A, B):
    if tb and not ta:
        return F.linear(A, B)
    return (A.t() if ta else A) @ (B.t() if tb else B)


print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  cuBLAS from {libdir[0] if libdir else 'system'}")
print(f"{'product':16s} {'M':>6s} {'N':>6s} {'K':>6s}  C     spb_ms  spb_bf16C   torch_ms   TFLOP/s spb / torch"
      f"   diff")
bad = 0
tot = {"spb": 0.0, "spbbf": 0.0, "torch": 0.0}
ops = {}
for name, ta, tb, M, Nn, K, ct in LAYER + HEAD:
    A, B, C = operands(ta, tb, M, Nn, K, ct)
    Cb = torch.empty(M, Nn, device="cuda", dtype=torch.bfloat16)
    ops[name] = (ta, tb, M, Nn, K, ct, A, B, C)
    t1 = median_ms(lambda: spb(ta, tb, M, Nn, K, ct, A, B, C), 3, 10)
    t2 = median_ms(lambda: spb(ta, tb, M, Nn, K, bf, A, B, Cb), 3, 10) if ct == f32 else t1
    t3 = median_ms(lambda: tor(ta, tb, M, Nn, K, A, B), 3, 10)
    ref = tor(ta, tb, M, Nn, K, A, B).float()
    spb(ta, tb, M, Nn, K, ct, A, B, C)
    spb(ta, tb, M, Nn, K, bf, A, B, Cb)
    diff = max(((c.float() - ref).norm() / ref.norm()).item() for c in (C, Cb))
    bad += diff > 1e-2
    calls = 20 if (name, ta, tb, M, Nn, K, ct) in LAYER else 4  # a layer's products 20 times, the head's 4 chunks
    tot["spb"] += calls * t1
    tot["spbbf"] += calls * t2
    tot["torch"] += calls * t3
    fl = 2.0 * M * Nn * K
    print(f"{name:16s} {M:6d} {Nn:6d} {K:6d}  {ct:4s} {t1:8.3f}  {t2:8.3f}  {t3:8.3f}  {fl / t1 / 1e9:6.0f} "
          f"{fl / t2 / 1e9:6.0f} {fl / t3 / 1e9:6.0f}  {diff:.1e}")
print(f"# a step's products, each alone x its calls: spbench {tot['spb']:.1f} ms, with bf16 C {tot['spbbf']:.1f} ms, "
      f"torch {tot['torch']:.1f} ms")


def call(kind, name):
    """One of the step's products, spbench's way or PyTorch's, on the operands made for it above."""
    ta, tb, M, Nn, K, ct, A, B, C = ops[name]
    if kind == "torch":
        tor(ta, tb, M, Nn, K, A, B)
    else:
        spb(ta, tb, M, Nn, K, ct, A, B, C)


def seq(kind):
    """A whole step's products back to back: every layer's 20 times, then the LM head's 4 chunks."""
    def run():
        for _ in range(20):
            for name, *_r in LAYER:
                call(kind, name)
        for name, *_r in HEAD:
            for _ in range(4):
                call(kind, name)
    return run


for rnd in range(2):
    for kind in ("spb", "torch"):
        print(f"# round {rnd}: the step's products back to back, {kind}: {median_ms(seq(kind), 3, 5):.1f} ms")
if bad:
    print(f"products_beside_torch.py: FAIL: {bad} products differ from PyTorch's by more than 1e-2", file=sys.stderr)
sys.exit(1 if bad else 0)
