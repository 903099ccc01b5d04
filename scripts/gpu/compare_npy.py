#!/usr/bin/env python3
"""compare_npy.py GOT_DIR WANT_DIR [--of-scale TOL]: every WANT_DIR/*.npy against GOT_DIR's file
of the same name.

Prints one line per output (shape, dtype, max relative difference) and exits 1 if any output is
missing, differs in shape or dtype, holds a NaN where the other does not, or differs by more than
the dtype's tolerance (float32: 1e-3 of max(|want|, 1) for each element; integers and bools:
exactly). With --of-scale TOL, floats may differ by TOL times the output's scale (max(max|want|,
1)) instead: the bound for results computed at a lower precision, such as matmuls on tf32, whose
error grows with the output's magnitude rather than each element's.
"""
import pathlib
import sys

import numpy as np

TOL = {np.dtype("float64"): 1e-9, np.dtype("float32"): 1e-3, np.dtype("float16"): 1e-2}


def main(got_dir, want_dir, of_scale=None):
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
            if of_scale is None:
                rel = float(np.max(np.abs(g[fin] - w[fin]) / np.maximum(np.abs(w[fin]), 1.0))) if fin.any() else 0.0
                ok = nan_mismatch == 0 and rel <= TOL.get(want.dtype, 1e-2)
                what = "max rel diff"
            else:
                scale = max(float(np.max(np.abs(w[fin]))) if fin.any() else 0.0, 1.0)
                rel = float(np.max(np.abs(g[fin] - w[fin]))) / scale if fin.any() else 0.0
                ok = nan_mismatch == 0 and rel <= of_scale
                what = "max diff of scale"
            print(f"  {want_path.stem}: {want.dtype}{list(want.shape)}, {what} {rel:.2e}"
                  f"{f', {nan_mismatch} NaN/inf mismatches' if nan_mismatch else ''}")
        bad += 0 if ok else 1
    return 1 if bad else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    tol = None
    if len(args) == 4 and args[2] == "--of-scale":
        tol = float(args[3])
        args = args[:2]
    if len(args) != 2:
        sys.exit(__doc__)
    sys.exit(main(args[0], args[1], tol))
