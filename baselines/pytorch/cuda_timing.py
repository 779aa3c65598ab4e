"""The timing the PyTorch-side scripts of this folder share: a callable's GPU time by CUDA events."""
import statistics


def median_ms(fn, warmup, iters):
    """fn called `warmup` times, then `iters` times each between two CUDA events: the median, in ms."""
    import torch  # here, not at the top: the callers check for PyTorch first and say so when it is missing
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
