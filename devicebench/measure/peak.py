"""The machine's practical arithmetic rate, measured with numpy (no framework needed)."""

from __future__ import annotations

import time

import numpy as np


def cpu_matmul_gflops(n: int = 1024, repeats: int = 5) -> float:
    """Median float32 GFLOP/s of an ``n x n`` matmul on this CPU (all cores, numpy's BLAS).

    Example:
        >>> cpu_matmul_gflops(256, repeats=3) > 0
        True
    """
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b  # warm-up: thread pool start, caches
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        rates.append(2 * n**3 / (time.perf_counter() - t0) / 1e9)
    return float(sorted(rates)[len(rates) // 2])
