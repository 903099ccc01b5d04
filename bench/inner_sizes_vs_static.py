#!/usr/bin/python3
"""Kernels with run-time inner sizes against kernels compiled for each size (docs/dynamic-shapes.md,
"Run-time sizes of inner axes"): softmax and layernorm over x [rows, n], one device under
shapes.policy = static (each n compiled for itself) and one under automatic (the kernel made
general from n = 1000 and 1001, then run at every other n). Each realize alternates between the
two devices, A B A B, in one process (the machine is noisy); prints each side's median run time
(RealizeStats.run_ms: the kernels alone) and the ratio general / specialized.

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
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'op':<10} {'n':>5} {'general':>8} {'specialized ms':>15} {'general ms':>11} {'ratio':>6}")
    for op in ["softmax", "layernorm"]:
        with tempfile.TemporaryDirectory() as directory:
            static, automatic = device("static", directory), device("automatic", directory)

            def step(dev, x, gamma, beta):
                t = kiln.tensor(x, device=dev)
                if op == "softmax":
                    y = kiln.softmax(t, axis=1)
                else:
                    y = kiln.layernorm(t, kiln.tensor(gamma, device=dev),
                                       kiln.tensor(beta, device=dev), axis=1)
                kiln.realize([y])
                return dev.last_stats()

            def inputs(n):
                return (rng.standard_normal((args.rows, n), dtype=np.float32),
                        rng.standard_normal(n, dtype=np.float32),
                        rng.standard_normal(n, dtype=np.float32))

            for n in [1000, 1001]:  # the automatic device's kernel takes n at run time from here
                data = inputs(n)
                step(static, *data)
                step(automatic, *data)
            for n in args.sizes:
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
