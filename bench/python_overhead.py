#!/usr/bin/python3
"""Per-op overhead from Python: a chain of 512 small elementwise ops on a (1, 8, 8, 8) float32
tensor, then its result, in kiln (recorded lazily, realized as fused kernels), numpy and torch
eager, in one process, one after another in rounds (the machine is noisy). Prints the median of
each measurement and its cost per op.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--repeat 30] [--ops 512]

kiln's rows: `record` is the Python side alone (512 ops recorded, nothing run); `record + realize`
adds the realize that runs them (its plan found in the plan cache: no fusion, no compilation) and
the copy of the result into numpy."""
import argparse
import statistics
import time

import numpy as np

import kiln

SHAPE = (1, 8, 8, 8)


def chain_kiln(x, n):
    y = x
    for i in range(n):
        k = i % 4
        y = y * 1.01 if k == 0 else y + 0.01 if k == 1 else kiln.tanh(y) if k == 2 else -y
    return y


def chain_numpy(x, n):
    y = x
    for i in range(n):
        k = i % 4
        y = y * np.float32(1.01) if k == 0 else y + np.float32(0.01) if k == 1 else np.tanh(y) if k == 2 else -y
    return y


def chain_torch(torch, x, n):
    y = x
    for i in range(n):
        k = i % 4
        y = y * 1.01 if k == 0 else y + 0.01 if k == 1 else torch.tanh(y) if k == 2 else -y
    return y


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--ops", type=int, default=512)
    args = parser.parse_args()
    n = args.ops

    dev = kiln.Device("cpu", {"compilation.cache": "none", "autotune.cache": "none", "autotune.enabled": False})
    a = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    x = kiln.tensor(a, device=dev).realize()
    cases = {
        "kiln: record": lambda: chain_kiln(x, n),
        "kiln: record + realize": lambda: np.asarray(chain_kiln(x, n)),
        "numpy eager": lambda: chain_numpy(a, n),
    }
    try:
        import torch
        tx = torch.from_numpy(a)
        cases["torch eager"] = lambda: chain_torch(torch, tx, n).numpy()
        torch_version = torch.__version__
    except ImportError:
        torch_version = None

    # Warm up: the first realize plans and compiles the chain; later ones find the plan.
    start = time.perf_counter()
    first = np.asarray(chain_kiln(x, n))
    first_ms = (time.perf_counter() - start) * 1e3
    stats = dev.last_stats()
    np.testing.assert_allclose(first, chain_numpy(a, n), rtol=1e-4, atol=1e-5)
    for fn in cases.values():
        fn()
    samples = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, fn in cases.items():
            samples[name].append(timed(fn))
    np.asarray(chain_kiln(x, n))
    hit = dev.last_stats()

    print(f"{n} chained ops on float32{list(SHAPE)} (mul, add, tanh, neg in turn), median of {args.repeat} "
          f"rounds; kiln {kiln.__version__}, numpy {np.__version__}, torch {torch_version or '(absent)'}")
    print(f"kiln's first realize (plan + compile, {stats.kernels} kernel(s)): {first_ms:.1f} ms; later: plan "
          f"from cache {hit.plan_cache_hit}, {hit.compiled} compiled, {hit.kernels} kernel(s), kernels ran "
          f"{hit.run_ms * 1e3:.1f} us")
    print()
    print("| | total (ms) | per op (us) |")
    print("|---|---:|---:|")
    for name, times in samples.items():
        med = statistics.median(times)
        print(f"| {name} | {med * 1e3:.3f} | {med * 1e6 / n:.2f} |")


if __name__ == "__main__":
    main()
