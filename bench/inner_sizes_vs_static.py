#!/usr/bin/python3
"""Kernels with run-time inner sizes against kernels compiled for each size (docs/dynamic-shapes.md,
"Run-time sizes of inner axes"): softmax and layernorm over x [rows, n], one device under
shapes.policy = static (each n compiled for itself) and one under automatic (the kernel made
general from n = 1000 and 1001, then run at every other n); and a decode step's attention, one
query row of 8 heads of 32 against a key and value cache [8, 1024, 32] read to n keys (made
general from n = 100 and 101). Each realize alternates between the two devices, A B A B, in one
process (the machine is noisy); prints each side's median run time (RealizeStats.run_ms: the
kernels alone) and the ratio general / specialized. Under automatic with autotuning on, a kernel
whose run-time sizes time slower than shapes.max_slowdown keeps its sizes (the general column
is then 0).

    PYTHONPATH=build/python /usr/bin/python3 bench/inner_sizes_vs_static.py [--rows 2048] [--repeat 150]
"""
import argparse
import os
import statistics
import tempfile

import numpy as np

import kiln


def device(policy, directory):
    cache = os.path.join(directory, policy + ".sqlite")
    return kiln.Device("cpu", {"shapes.policy": policy, "compilation.cache": "file=" + cache,
                               "autotune.cache": "file=" + cache})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=150)
    parser.add_argument("--sizes", type=int, nargs="+", default=[768, 1024, 2000])
    parser.add_argument("--keys", type=int, nargs="+", default=[64, 200, 512, 1000],
                        help="attention: the key counts")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    heads, ctx, width = 8, 1024, 32
    cache_kv = (rng.standard_normal((heads, ctx, width), dtype=np.float32),
                rng.standard_normal((heads, ctx, width), dtype=np.float32))
    print(f"{'op':<10} {'n':>5} {'general':>8} {'specialized ms':>15} {'general ms':>11} {'ratio':>6}")
    for op in ["softmax", "layernorm", "attention"]:
        with tempfile.TemporaryDirectory() as directory:
            static, automatic = device("static", directory), device("automatic", directory)
            caches = {dev: [kiln.tensor(c, device=dev) for c in cache_kv] for dev in (static, automatic)}

            def step(dev, x, gamma, beta):
                t = kiln.tensor(x, device=dev)
                if op == "attention":  # x: the query; gamma: the key count
                    k, v = (kiln.slice(c, 1, 0, gamma) for c in caches[dev])
                    y = kiln.attention(t, k, v)
                elif op == "softmax":
                    y = kiln.softmax(t, axis=1)
                else:
                    y = kiln.layernorm(t, kiln.tensor(gamma, device=dev),
                                       kiln.tensor(beta, device=dev), axis=1)
                kiln.realize([y])
                return dev.last_stats()

            def inputs(n):
                if op == "attention":
                    return rng.standard_normal((heads, 1, width), dtype=np.float32), n, None
                return (rng.standard_normal((args.rows, n), dtype=np.float32),
                        rng.standard_normal(n, dtype=np.float32),
                        rng.standard_normal(n, dtype=np.float32))

            # The automatic device's kernel takes n at run time from the second of these.
            for n in [100, 101] if op == "attention" else [1000, 1001]:
                data = inputs(n)
                step(static, *data)
                step(automatic, *data)
            for n in args.keys if op == "attention" else args.sizes:
                data = inputs(n)
                step(static, *data)  # compiles this size's own kernel
                general = step(automatic, *data).dynamic_kernels
                a, b = [], []
                for _ in range(args.repeat):
                    a.append(step(static, *data).run_ms)
                    b.append(step(automatic, *data).run_ms)
                sa, sb = statistics.median(a), statistics.median(b)
                print(f"{op:<10} {n:>5} {general:>8} {sa:>15.4f} {sb:>11.4f} {sb / sa:>6.3f}")


if __name__ == "__main__":
    main()
