#!/usr/bin/python3
"""The LLM decode workload (examples/llm/llama.py) in one run: kiln from Python and from C++ next
to numpy and torch eager, with tokens per second, ms per token (medians over the steps after the
first), the kernels kiln compiled over the run, and kiln's first-step latency with a cold cache
and then a warm one (the plan and kernels found in the cache file of the cold run); then the
Python step traced once and replayed (kiln.trace), warm.

    PYTHONPATH=build/python python3 bench/llm_decode.py [--steps 200] [--topk 1] [--cpp build/examples/llm/kiln_llm_decode]

Every decoder's tokens are checked against numpy's in float64: a row whose tokens differ says so.
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def load_llama():
    path = os.path.join(HERE, "..", "examples", "llm", "llama.py")
    spec = importlib.util.spec_from_file_location("llama", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--topk", type=int, default=1)
    ap.add_argument("--cpp", default=os.path.join(HERE, "..", "build", "examples", "llm", "kiln_llm_decode"))
    args = ap.parse_args()
    llama = load_llama()
    import kiln
    cfg = llama.Config()
    llama.check_args(ap, cfg, args.steps, args.topk)
    w = llama.weights(cfg)
    prompt = llama.prompt_tokens(cfg)
    rows = []

    ref, _ = llama.generate(llama.NumpyDecoder(cfg, w), prompt, args.steps, args.topk)  # float64
    got, t = llama.generate(llama.NumpyDecoder(cfg, w, np.float32), prompt, args.steps, args.topk)
    rows.append(("numpy float32", median(t[1:]), t[0], "", got))
    try:
        import torch
        got, t = llama.generate(llama.TorchDecoder(cfg, w, torch), prompt, args.steps, args.topk)
        rows.append((f"torch eager ({torch.get_num_threads()} threads)", median(t[1:]), t[0], "", got))
    except ImportError:
        print("# torch: not installed (Debian: python3-torch)")

    with tempfile.TemporaryDirectory() as tmp:
        store = "file=" + os.path.join(tmp, "cache.sqlite")
        for label, traced in (("cold cache", False), ("warm cache", False), ("warm cache, traced", True)):
            dev = kiln.Device("cpu", {"compilation.cache": store, "autotune.cache": store})
            dec = llama.KilnDecoder(cfg, w, kiln, dev, traced=traced)
            got, t = llama.generate(dec, prompt, args.steps, args.topk)
            compiled = sum(s.compiled for s in dec.stats)
            rows.append((f"kiln python, {label}", median(t[1:]), t[0], str(compiled), got))
        if os.path.exists(args.cpp):
            r = subprocess.run([args.cpp, "--steps", str(args.steps), "--topk", str(args.topk), "--cache", store],
                               capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                print(f"# kiln C++: failed: {r.stderr.strip()}")
            else:
                first = float(re.search(r"first step ([0-9.]+) ms", r.stdout).group(1)) / 1e3
                per = float(re.search(r"then ([0-9.]+) ms per token", r.stdout).group(1)) / 1e3
                compiled = re.search(r"(\d+) kernels compiled in all", r.stdout).group(1)
                got = [int(x) for x in re.search(r"^tokens: (.*)$", r.stdout, re.M).group(1).split()]
                rows.append(("kiln C++, warm cache", per, first, compiled, got))
        else:
            print(f"# kiln C++: {args.cpp} not built")

    print(f"# LLM decode: {cfg.layers} layers, width {cfg.width}, {cfg.heads} heads, MLP {cfg.mlp}, "
          f"vocabulary {cfg.vocab}, context {cfg.ctx}; {len(prompt)} prompt tokens, {args.steps} generated, "
          f"top-{args.topk}")
    print(f"{'decoder':34} {'ms/token':>9} {'tokens/s':>9} {'first step ms':>14} {'compiled':>9}  tokens")
    ok = True
    for name, per, first, compiled, got in rows:
        same = got == ref
        ok = ok and same
        print(f"{name:34} {per * 1e3:9.3f} {1 / per:9.0f} {first * 1e3:14.1f} {compiled:>9}  "
              f"{'= numpy' if same else 'DIFFER from numpy'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
