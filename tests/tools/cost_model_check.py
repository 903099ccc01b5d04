#!/usr/bin/env python3
"""The cost model against the machine: every kernel of the 11 benchmark workloads is estimated
within 2x of its measured time (ctest `CostModelWithinTwiceOfMeasured`, label `perf`: timed, so
not in the default run; `ctest -L perf` on a quiet machine).

For each workload, `kiln dump examples/W.kg --stage groups --measure --autotune` plans with the
rates measured on this machine (runtime/measured_rates.h), runs the plan with the schedules a
realize runs, and prints each kernel's estimate next to its median time. Prints one table and
exits 1 when a kernel's estimate/measured is outside [1/2, 2].

Usage: cost_model_check.py KILN_BINARY EXAMPLES_DIR [--repeat N] [--bound B]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

WORKLOADS = ["ew_chain", "softmax", "layernorm", "matmul", "matmul_bias_relu", "gemv",
             "reduce_sum", "argmax_axis0", "small_ops", "life", "attention"]
ROW = re.compile(r"^\s+(k\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$")


def measure(kiln, graph, repeat, cwd):
    env = dict(os.environ)
    env.pop("KILN_CPU_RATES", None)  # the measured rates, as `kiln run` plans with
    out = subprocess.run([kiln, "dump", graph, "--stage", "groups", "--measure", "--repeat",
                          str(repeat), "--autotune", "--rates", "measured"],
                         capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{graph}: kiln dump failed ({out.returncode}): {out.stderr.strip()}")
    text = out.stdout.split("measured on", 1)
    if len(text) != 2:
        raise RuntimeError(f"{graph}: no measurement in kiln dump's output:\n{out.stdout}")
    rows = [m.groups() for m in map(ROW.match, text[1].splitlines()) if m]
    if not rows:
        raise RuntimeError(f"{graph}: no kernel rows in:\n{text[1]}")
    return [(k, float(e), float(t), float(r)) for k, e, t, r in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("examples")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--bound", type=float, default=2.0)
    a = ap.parse_args()
    bad = []
    print(f"{'workload':<18} {'kernel':<7} {'estimate µs':>13} {'measured µs':>13} {'est/meas':>9}")
    with tempfile.TemporaryDirectory() as cwd:  # no kiln.toml above: kiln's defaults
        for w in WORKLOADS:
            rows = measure(a.kiln, os.path.join(a.examples, f"{w}.kg"), a.repeat, cwd)
            for k, est, meas, ratio in rows:
                flag = ""
                if not 1 / a.bound <= ratio <= a.bound:
                    flag = "  <-- outside"
                    bad.append(f"{w} {k}: estimate {est:.1f} µs, measured {meas:.1f} µs ({ratio:.2f}x)")
                print(f"{w:<18} {k:<7} {est:>13.1f} {meas:>13.1f} {ratio:>9.2f}{flag}")
    if bad:
        print(f"\n{len(bad)} kernel(s) outside {1 / a.bound:.2f}x..{a.bound:.2f}x of measured:")
        print("\n".join("  " + b for b in bad))
        return 1
    print(f"\nevery kernel within {1 / a.bound:.2f}x..{a.bound:.2f}x of its measured time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
