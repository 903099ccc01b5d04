#!/usr/bin/env python3
"""compare_npy.py GOT_DIR WANT_DIR: every WANT_DIR/*.npy against GOT_DIR's file of the same name.

Prints one line per output (shape, dtype, max relative difference) and exits 1 if any output is
missing, differs in shape or dtype, holds a NaN where the other does not, or differs by more than
the dtype's tolerance (float32: 1e-3 of max(|want|, 1); integers and bools: exactly).
"""
import pathlib
import sys

import numpy as np

TOL = {np.dtype("float64"): 1e-9, np.dtype("float32"): 1e-3, np.dtype("float16"): 1e-2}


def main(got_dir, want_dir):
    bad = 0
    wants = sorted(pathlib.Path(want_dir).glob("*.npy"))
    if not wants:
        print(f"compare_npy: no .npy files in {want_dir}")
        return 1
    for want_path in wants:
        got_path = pathlib.Path(got_dir) / want_path.name
        if not got_path.exists():
            print(f"  {want_path.stem}: missing from {got_dir}")
            bad += 1
            continue
        got, want = np.load(got_path), np.load(want_path)
        if got.shape != want.shape or got.dtype != want.dtype:
            print(f"  {want_path.stem}: {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}")
            bad += 1
            continue
        if want.dtype.kind in "biu":
            diff = int(np.count_nonzero(got != want))
            ok = diff == 0
            print(f"  {want_path.stem}: {want.dtype}{list(want.shape)}, {diff} elements differ")
        else:
            g, w = got.astype(np.float64), want.astype(np.float64)
            nan_mismatch = int(np.count_nonzero(np.isnan(g) != np.isnan(w)))
            nan_mismatch += int(np.count_nonzero((np.isinf(g) | np.isinf(w)) & (g != w)))
            fin = np.isfinite(w) & np.isfinite(g)
            rel = float(np.max(np.abs(g[fin] - w[fin]) / np.maximum(np.abs(w[fin]), 1.0))) if fin.any() else 0.0
            ok = nan_mismatch == 0 and rel <= TOL.get(want.dtype, 1e-2)
            print(f"  {want_path.stem}: {want.dtype}{list(want.shape)}, max rel diff {rel:.2e}"
                  f"{f', {nan_mismatch} NaN/inf mismatches' if nan_mismatch else ''}")
        bad += 0 if ok else 1
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
