#!/usr/bin/env python3
"""The workloads of WORKLOADS.md at sizes that fill an H100/H200, on kiln and on PyTorch.

  workloads.py graphs OUTDIR
      Writes OUTDIR/<workload>.kg: the examples/ graphs with GPU-sized inputs (no torch needed).
  workloads.py bench KILN GRAPHDIR OUTDIR [--only a,b]
      On the GPU machine: for each workload, `kiln run --device cuda:0 --repeat N --stats-json`
      (median device time of the kernels, each launch timed with CUDA events), PyTorch eager and
      torch.compile on the same shapes (median of N event-timed calls after warm-ups), and the
      device bandwidth measured with a device-to-device copy. Writes OUTDIR/workloads.json and
      OUTDIR/workloads.md and prints the table. Then the dynamic table: ew_chain, softmax and
      layernorm with their outer axis marked (?b=N), so their kernels take the extent at run time,
      at N and N - 1 next to the specialized kernels at N (`--only dynamic` for that table alone).

Timing follows WORKLOADS.md: 2 warm-ups (the first also compiles), then the median of 10 runs.
kiln's number is its kernels' device time (RunStats::device_ms); its run time, which also copies
the outputs back to the host, is reported beside it.
"""
import json
import pathlib
import re
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = HERE.parent.parent / "examples"

# name -> (example file, {input name: new shape}, bytes moved once, flops)
F32 = 4
SIZES = {
    "ew_chain": ("ew_chain.kg", {"a": [1 << 26], "b": [1 << 26], "c": [1 << 26]}),
    "softmax": ("softmax.kg", {"x": [8192, 8192]}),
    "layernorm": ("layernorm.kg", {"x": [65536, 1024], "gamma": [1024], "beta": [1024]}),
    "matmul": ("matmul.kg", {"A": [4096, 4096], "B": [4096, 4096]}),
    "matmul_bias_relu": ("matmul_bias_relu.kg", {"x": [4096, 4096], "W": [4096, 4096], "b": [4096]}),
    "gemv": ("gemv.kg", {"x": [1, 16384], "W": [16384, 16384]}),
    "reduce_sum": ("reduce_sum.kg", {"x": [16, 4096, 4096]}),
    "argmax_axis0": ("argmax_axis0.kg", {"x": [16, 4096, 4096]}),
    "small_ops": ("small_ops.kg", {}),
    "life": ("life.kg", {"board": [4096, 4096]}),
    "attention": ("attention.kg", {"q": [4, 16, 2048, 64], "k": [4, 16, 2048, 64],
                                   "v": [4, 16, 2048, 64]}),
}
# The matmuls again on the tensor cores: kiln with compilation.matmul_precision = "high" (f32
# operands rounded to tf32), PyTorch with torch.backends.cuda.matmul.allow_tf32 (cuBLAS on tf32).
# Attention likewise (kiln: both products on tf32; PyTorch's SDPA as in the f32 row).
TF32 = {"matmul_tf32": "matmul", "matmul_bias_relu_tf32": "matmul_bias_relu",
        "attention_tf32": "attention"}
# The same on bf16 operands (kiln: matmul_precision = "high"; PyTorch: bf16 tensors).
BF16 = {"matmul_bf16": "matmul"}
MEMORY_BOUND = ["ew_chain", "softmax", "layernorm", "gemv", "reduce_sum", "argmax_axis0"]
# Dynamic kernels next to specialized ones (issue 20): the workload again with its outer axis
# marked (`?b=N`, so its kernels take the extent at run time), timed at N, where the specialized
# row ran, and at N - 1, inside the same power-of-two bucket.
DYNAMIC = ["ew_chain", "softmax", "layernorm"]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def bytes_once(name):
    s = SIZES[name][1]
    if name == "ew_chain":
        return 4 * numel(s["a"]) * F32
    if name == "softmax":
        return 2 * numel(s["x"]) * F32
    if name == "layernorm":
        return 2 * numel(s["x"]) * F32
    if name == "gemv":
        return (numel(s["W"]) + numel(s["x"]) + s["W"][1]) * F32
    if name in ("reduce_sum", "argmax_axis0"):
        x = s["x"]
        return (numel(x) + numel(x[1:])) * F32
    return 0


def write_graphs(outdir):
    out = pathlib.Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for name, (file, shapes) in SIZES.items():
        text = (EXAMPLES / file).read_text()
        for inp, shape in shapes.items():
            dims = ",".join(str(d) for d in shape)
            text, n = re.subn(rf"^input %{inp} : (\w+)\[[0-9,]*\]", rf"input %{inp} : \1[{dims}]",
                              text, flags=re.M)
            if n != 1:
                sys.exit(f"workloads.py: {file} has no input %{inp}")
        (out / f"{name}.kg").write_text(text)
    for name, base in BF16.items():
        text = (out / f"{base}.kg").read_text()
        (out / f"{name}.kg").write_text(re.sub(r": f32\[", ": bf16[", text))
    print(f"workloads.py: {len(SIZES) + len(BF16)} graphs in {out}")


def write_dynamic_graph(graphdir, outdir, name):
    """OUTDIR/<name>_dyn.kg: GRAPHDIR/<name>.kg with every input whose first axis has the
    workload's outer size N (its first input's) marked ?b=N. Returns the file and N."""
    text = (pathlib.Path(graphdir) / f"{name}.kg").read_text()
    first = next(iter(SIZES[name][1].values()))[0]
    text, n = re.subn(rf"^(input %\w+ : \w+\[){first}([,\]])", rf"\g<1>?b={first}\2", text,
                      flags=re.M)
    if n == 0:
        sys.exit(f"workloads.py: {name}.kg has no input of outer size {first}")
    out = pathlib.Path(outdir) / f"{name}_dyn.kg"
    out.write_text(text)
    return out, first


def bench_dynamic(kiln, graphdir, outdir, specialized):
    """Each DYNAMIC workload's marked graph at its size N and at N - 1 next to the specialized
    row's time; its CUDA source must take the extent (kiln_extent). Returns the table's lines."""
    lines = ["| workload | specialized at N (ms) | dynamic at N (ms) | dynamic / specialized | "
             "dynamic at N - 1 (ms) | dynamic kernels |", "|---|---|---|---|---|---|"]
    rows = []
    for name in DYNAMIC:
        if "device_ms" not in specialized.get(name, {}):
            specialized[name] = run_kiln(kiln, pathlib.Path(graphdir) / f"{name}.kg", outdir, name)
        spec = specialized[name].get("device_ms")
        graph, n = write_dynamic_graph(graphdir, outdir, name)
        src = subprocess.run([kiln, "dump", str(graph), "--target", "cuda", "--arch", "sm_90",
                              "--no-autotune", "--stage", "source"], capture_output=True, text=True)
        extents = len(re.findall(r"int kiln_extent\b", src.stdout))
        kernels = len(re.findall(r"__global__", src.stdout))
        at_n = run_kiln(kiln, graph, outdir, f"{name}_dyn")
        at_n1 = run_kiln(kiln, graph, outdir, f"{name}_dyn_m1", dims=[f"b={n - 1}"])
        row = {"name": name, "n": n, "specialized_ms": spec, "dynamic": at_n,
               "dynamic_n_minus_1": at_n1, "kernels_taking_extent": extents, "kernels": kernels}
        rows.append(row)
        print(json.dumps(row), flush=True)
        d, d1 = at_n.get("device_ms"), at_n1.get("device_ms")
        fmt = lambda v: f"{v:.3f}" if v else "error"
        ratio = f"{d / spec:.2f}" if d and spec else "-"
        lines.append(f"| {name} (N = {n}) | {fmt(spec)} | {fmt(d)} | {ratio} | {fmt(d1)} | "
                     f"{extents} of {kernels} |")
    return rows, lines


def kiln_failures(rows, dyn_rows):
    """What fails the check: kiln failing a workload (PyTorch failing torch.compile does not), or a
    marked workload whose kernels did not all take the extent at run time."""
    failed = [r["name"] for r in rows if "error" in r["kiln"]]
    for r in dyn_rows:
        if "error" in r["dynamic"] or "error" in r["dynamic_n_minus_1"]:
            failed.append(f"{r['name']} (dynamic)")
        elif r["kernels"] == 0 or r["kernels_taking_extent"] != r["kernels"]:
            failed.append(f"{r['name']} (dynamic: {r['kernels_taking_extent']} of "
                          f"{r['kernels']} kernels take kiln_extent)")
    return failed


def torch_fns(torch):
    F = torch.nn.functional

    def ew_chain(a, b, c):
        return F.gelu(a * b + c, approximate="tanh")

    def softmax(x):
        return torch.softmax(x, -1)

    def layernorm(x, g, b):
        return F.layer_norm(x, (x.shape[-1],), g, b, 1e-5)

    def matmul(a, b):
        return a @ b

    def matmul_bias_relu(x, w, b):
        return torch.relu(x @ w + b)

    def gemv(x, w):
        return x @ w

    def reduce_sum(x):
        return x.sum(0)

    def argmax_axis0(x):
        return x.argmax(0)

    def small_ops(x):
        n, step = 0, 0
        while n < 512:
            if step % 2 == 0:
                x = x * 1.0001 + 0.0001
                n += 2
            else:
                x = torch.relu(x)
                n += 1
            step += 1
        return x

    def life(board):
        g = torch.where(board > 0.5, 1.0, 0.0)
        for _ in range(100):
            n = sum(torch.roll(g, shifts=(dy, dx), dims=(0, 1))
                    for dy, dx in [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0),
                                   (1, 1)])
            born = (n == 3) | ((n == 2) & (g > 0.5))
            g = torch.where(born, 1.0, 0.0)
        return g

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.125)

    return locals()


def torch_inputs(torch, name, dtype=None):
    shapes = SIZES[name][1]
    gen = torch.Generator(device="cuda").manual_seed(1)
    if name == "small_ops":
        shapes = {"x": [1, 8, 8, 8]}
    return [torch.randn(s, device="cuda", generator=gen).to(dtype or torch.float32)
            for s in shapes.values()]


def time_torch(torch, fn, args, warm=2, runs=10):
    for _ in range(warm):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def device_bandwidth(torch):
    x = torch.empty(1 << 28, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    ms = time_torch(torch, lambda: y.copy_(x), [], warm=3, runs=20)
    return 2 * x.numel() * 4 / (ms * 1e-3)


def run_kiln(kiln, graph, outdir, name, env=None, dims=()):
    import os
    stats = pathlib.Path(outdir) / f"kiln-{name}.json"
    cmd = [kiln, "run", str(graph), "--random-inputs", "--seed", "1", "--device", "cuda:0",
           "--repeat", "12", "--stats-json", str(stats)]
    for d in dims:
        cmd += ["--dim", d]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.time() - t0
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or ["failed"],
                "wall_s": wall}
    s = json.loads(stats.read_text())
    return {"device_ms": s["device_ms"], "run_ms": s["run_ms"], "kernels": s["kernels"],
            "compile_ms": s["compile_ms"], "wall_s": wall}


def bench(kiln, graphdir, outdir, only):
    import torch
    out = pathlib.Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    fns = torch_fns(torch)
    bw = device_bandwidth(torch)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"copy bandwidth {bw / 1e9:.0f} GB/s (read + write)", flush=True)
    rows = []
    for name in list(SIZES) + list(TF32) + list(BF16):
        if only and name not in only:
            continue
        base = TF32.get(name, BF16.get(name, name))
        tf32 = name in TF32
        env = {"KILN_COMPILATION_MATMUL_PRECISION": "high"} if tf32 or name in BF16 else {}
        graph = pathlib.Path(graphdir) / f"{name if name in BF16 else base}.kg"
        row = {"name": name, "kiln": run_kiln(kiln, graph, out, name, env)}
        args = torch_inputs(torch, base, torch.bfloat16 if name in BF16 else None)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        row["eager_ms"] = time_torch(torch, fns[base], args)
        t0 = time.time()
        try:
            torch._dynamo.reset()
            compiled = torch.compile(fns[base])
            row["compile_ms"] = time_torch(torch, compiled, args)
        except Exception as e:  # reported, not fatal: the other workloads still run
            row["compile_ms"] = None
            row["compile_error"] = str(e).splitlines()[0]
        torch.backends.cuda.matmul.allow_tf32 = False
        row["torch_compile_s"] = time.time() - t0
        b = bytes_once(base)
        row["bytes"] = b
        k = row["kiln"].get("device_ms")
        if b and k:
            row["kiln_bw_pct"] = 100 * (b / (k * 1e-3)) / bw
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    dyn_rows, dyn_lines = [], []
    if not only or "dynamic" in only:
        specialized = {r["name"]: r["kiln"] for r in rows}
        dyn_rows, dyn_lines = bench_dynamic(kiln, graphdir, out, specialized)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "copy_bandwidth_gbs": bw / 1e9, "rows": rows, "dynamic": dyn_rows}
    (out / "workloads.json").write_text(json.dumps(result, indent=1))
    lines = ["| workload | kiln kernels (ms) | kiln run incl. copy back (ms) | torch eager (ms) | "
             "torch.compile (ms) | kiln / torch.compile | % of copy bandwidth |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        k = r["kiln"]
        kd = f"{k['device_ms']:.3f}" if "device_ms" in k else "error: " + " ".join(k["error"])
        kr = f"{k['run_ms']:.3f}" if "run_ms" in k else "-"
        tc = f"{r['compile_ms']:.3f}" if r.get("compile_ms") else "error"
        ratio = (f"{k['device_ms'] / r['compile_ms']:.2f}"
                 if "device_ms" in k and r.get("compile_ms") else "-")
        pct = f"{r['kiln_bw_pct']:.0f}%" if "kiln_bw_pct" in r else "-"
        lines.append(f"| {r['name']} | {kd} | {kr} | {r['eager_ms']:.3f} | {tc} | {ratio} | {pct} |")
    table = "\n".join(lines)
    if dyn_lines:
        table += "\n\nDynamic kernels (outer axis marked ?b) next to specialized:\n\n"
        table += "\n".join(dyn_lines)
    (out / "workloads.md").write_text(
        f"{result['device']}, torch {result['torch']}, device-to-device copy "
        f"{result['copy_bandwidth_gbs']:.0f} GB/s\n\n{table}\n")
    print(table)
    failed = kiln_failures(rows, dyn_rows)
    if failed:
        sys.exit("workloads.py: kiln failed " + ", ".join(failed))


def main(argv):
    if len(argv) >= 2 and argv[0] == "graphs":
        write_graphs(argv[1])
    elif len(argv) >= 4 and argv[0] == "bench":
        only = set()
        if "--only" in argv:
            only = set(argv[argv.index("--only") + 1].split(","))
        bench(argv[1], argv[2], argv[3], only)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
