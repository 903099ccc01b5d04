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
    xv, W = n(1, 4096), n(4096, 4096)
    r3 = n(16, 1024, 1024)
    small = n(1, 8, 8, 8)
    board = (rng.random((512, 512)) < 0.3).astype(np.float32)
    q, k, v = n(2, 8, 1024, 64), n(2, 8, 1024, 64), n(2, 8, 1024, 64)
    causal = np.tril(np.ones((1024, 1024), dtype=bool))
    return {
        "ew_chain": lambda: gelu(a * b + c),
        "softmax": lambda: softmax(x),
        "layernorm": lambda: layernorm(xl, g, be),
        "matmul": lambda: A @ B,
        "matmul_bias_relu": lambda: np.maximum(A @ B + bias, 0),
        "gemv": lambda: xv @ W,
        "reduce_sum": lambda: r3.sum(axis=0),
        "argmax_axis0": lambda: r3.argmax(axis=0).astype(np.int32),
        "small_ops": lambda: small_ops(small),
        "life": lambda: life(board),
        "attention": lambda: attention(q, k, v, causal),
    }


def small_ops(x):
    # As examples/small_ops.kg: 512 ops cycling mul 1.0001, add 0.0001, relu.
    for i in range(512):
        if i % 3 == 0:
            x = x * np.float32(1.0001)
        elif i % 3 == 1:
            x = x + np.float32(0.0001)
        else:
            x = np.maximum(x, np.float32(0))
    return x


def life(g):
    for _ in range(100):
        nb = sum(np.roll(np.roll(g, dr, 0), dc, 1)
                 for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0))
        g = ((nb == 3) | ((nb == 2) & (g > 0.5))).astype(np.float32)
    return g


def attention(q, k, v, causal):
    s = np.where(causal, q @ k.transpose(0, 1, 3, 2) / np.float32(8), np.float32(-np.inf))
    return softmax(s) @ v


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
