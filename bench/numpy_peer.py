#!/usr/bin/python3
"""numpy's median times for the workloads, measured like kiln_bench: inputs seeded
normal(0,1) and created before timing, 2 warm-ups, median of 10 runs, in milliseconds.
Run with Debian's /usr/bin/python3 (python3-numpy)."""
import sys
import time

import numpy as np


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.float32(0.7978845608028654) * (x + np.float32(0.044715) * x * x * x)))


def softmax(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + np.float32(1e-5)) * g + b


def workloads(rng):
    n = lambda *s: rng.standard_normal(s, dtype=np.float32)
    a, b, c = n(16777216), n(16777216), n(16777216)
    x = n(4096, 4096)
    xl, g, be = n(8192, 1024), n(1024), n(1024)
    A, B, bias = n(1024, 1024), n(1024, 1024), n(1024)
    return {
        "ew_chain": lambda: gelu(a * b + c),
        "softmax": lambda: softmax(x),
        "layernorm": lambda: layernorm(xl, g, be),
        "matmul": lambda: A @ B,
        "matmul_bias_relu": lambda: np.maximum(A @ B + bias, 0),
    }


def median_ms(fn, runs=10, warm=2):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


if __name__ == "__main__":
    only = set(sys.argv[1:])
    for name, fn in workloads(np.random.default_rng(1)).items():
        if not only or name in only:
            print(f"numpy {name} {median_ms(fn):.2f} ms", flush=True)
