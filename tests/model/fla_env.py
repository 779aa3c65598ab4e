"""What the fla scripts of tests/model need before they start: a GPU (fla's kernels are Triton) and fla importable."""
import importlib
import sys

import torch


def need_fla(prog, module, *names):
    """fla's `names` from `module` (e.g. "fla.models", "GLAConfig"), or None after one line on stderr saying why they
    cannot be had: no GPU, or fla not importable (not on PYTHONPATH, or a name it does not have)."""
    if not torch.cuda.is_available():
        print(f"{prog}: no GPU (fla's kernels are Triton)", file=sys.stderr)
        return None
    try:
        mod = importlib.import_module(module)
        return [getattr(mod, n) for n in names]
    except Exception as e:   # noqa: BLE001
        print(f"{prog}: cannot import fla ({type(e).__name__}: {e})", file=sys.stderr)
        return None
