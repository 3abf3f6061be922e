"""PyTorch's side of the GPU benchmarks (bench/vision_peer.py, bench/transformer_peer.py): the median time of
synchronized calls, and a CUDA graph captured from a callable after PyTorch's side-stream warm-up (as
torch.cuda.graphs asks)."""
import time

import numpy as np


def median_ms(run, warmup, runs):
    """Median wall time of `runs` calls of run() after `warmup` unmeasured ones, a synchronize after each (ms)."""
    import torch
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def captured(run):
    """run() recorded as a CUDA graph (its replay() runs it again)."""
    import torch
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph
