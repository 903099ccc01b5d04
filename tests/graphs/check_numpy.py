#!/usr/bin/python3
"""Independent oracle: evaluates `.kg` graphs with numpy in float64 and compares kiln's outputs.

  check_numpy.py KILN_BINARY GRAPH.kg [--device cpu|reference]

Inputs are made here (seeded; floats uniform in [-2, 2], or [0.25, 2] for the names listed on a
`# numpy-check: positive=a,b` line; integers in [-8, 8]; bools p=0.5), passed to `kiln run` as
.npy files, and every output must satisfy |kiln - numpy| <= 2e-4 * max(1, max|numpy|).
"""
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

DT = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "i8": np.int8,
      "u8": np.uint8, "bool": np.bool_, "f16": np.float16}
CALC = {"f32": np.float64, "f64": np.float64, "f16": np.float64}  # floats computed in f64

erf = np.vectorize(math.erf, otypes=[np.float64])


def parse_value(text):
    text = text.strip()
    if text.startswith("["):
        inner = text[1:-1].strip()
        return [parse_value(t) for t in inner.split(",")] if inner else []
    if text in ("true", "false"):
        return text == "true"
    if text in DT:
        return text
    try:
        return int(text)
    except ValueError:
        return float(text)


def split_args(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def axes_of(x, axes):
    return tuple(a % x.ndim for a in axes) if axes is not None else None


def reduce(fn, x, kw):
    return fn(x, axis=axes_of(x, kw.get("axes")), keepdims=kw.get("keepdim", False))


def argreduce(fn, x, kw):
    axis = kw["axis"] % x.ndim
    r = fn(x, axis=axis).astype(np.int32)
    return np.expand_dims(r, axis) if kw.get("keepdim", False) else r


def slice_op(x, kw):
    idx = [slice(None)] * x.ndim
    idx[kw["axis"] % x.ndim] = slice(kw.get("start"), kw.get("end"), kw.get("step", 1))
    return x[tuple(idx)]


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention(q, k, v, kw):
    scale = kw.get("scale", 1 / math.sqrt(q.shape[-1]))
    s = q @ np.swapaxes(k, -1, -2) * scale
    if kw.get("causal", False):
        lq, lk = s.shape[-2], s.shape[-1]
        s = np.where(np.arange(lk)[None, :] <= np.arange(lq)[:, None], s, -np.inf)
    return softmax(s, -1) @ v


def layernorm(x, g, b, kw):
    axis, eps = kw.get("axis", -1), kw.get("eps", 1e-5)
    mu = x.mean(axis=axis, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=axis, keepdims=True) + eps) * g + b


def floor_div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        with np.errstate(divide="ignore"):
            return np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b))).astype(a.dtype)
    return a / b


OPS = {
    "neg": lambda a, kw: -a, "abs": lambda a, kw: np.abs(a), "exp": lambda a, kw: np.exp(a),
    "log": lambda a, kw: np.log(a), "sqrt": lambda a, kw: np.sqrt(a),
    "rsqrt": lambda a, kw: 1 / np.sqrt(a), "recip": lambda a, kw: 1 / a,
    "sin": lambda a, kw: np.sin(a), "cos": lambda a, kw: np.cos(a), "tanh": lambda a, kw: np.tanh(a),
    "sigmoid": lambda a, kw: 1 / (1 + np.exp(-a)), "relu": lambda a, kw: np.maximum(a, 0).astype(a.dtype),
    "gelu": lambda a, kw: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))),
    "erf": lambda a, kw: erf(a), "floor": lambda a, kw: np.floor(a), "ceil": lambda a, kw: np.ceil(a),
    "sign": lambda a, kw: np.sign(a), "not": lambda a, kw: np.logical_not(a),
    "add": lambda a, b, kw: (a + b).astype(a.dtype), "sub": lambda a, b, kw: (a - b).astype(a.dtype),
    "mul": lambda a, b, kw: (a * b).astype(a.dtype), "div": lambda a, b, kw: floor_div(a, b),
    "pow": lambda a, b, kw: np.power(a, b), "eq": lambda a, b, kw: a == b, "ne": lambda a, b, kw: a != b,
    "lt": lambda a, b, kw: a < b, "le": lambda a, b, kw: a <= b, "gt": lambda a, b, kw: a > b,
    "ge": lambda a, b, kw: a >= b, "and": lambda a, b, kw: a & b, "or": lambda a, b, kw: a | b,
    "where": lambda c, a, b, kw: np.where(c, a, b),
    "cast": lambda a, kw: (np.trunc(a) if kw["to"] not in CALC and a.dtype.kind == "f" else a)
    .astype(DT[kw["to"]]).astype(CALC.get(kw["to"], DT[kw["to"]])),
    "sum": lambda a, kw: reduce(np.sum, a, kw).astype(a.dtype), "mean": lambda a, kw: reduce(np.mean, a, kw),
    "prod": lambda a, kw: reduce(np.prod, a, kw).astype(a.dtype),
    "argmax": lambda a, kw: argreduce(np.argmax, a, kw), "argmin": lambda a, kw: argreduce(np.argmin, a, kw),
    "reshape": lambda a, kw: a.reshape(kw["shape"]), "permute": lambda a, kw: np.transpose(a, kw["dims"]),
    "expand": lambda a, kw: np.broadcast_to(a, kw["shape"]), "slice": slice_op,
    "pad": lambda a, kw: np.pad(a, list(zip(kw["before"], kw["after"])), constant_values=kw.get("value", 0)),
    "flip": lambda a, kw: np.flip(a, tuple(kw["axes"])),
    "roll": lambda a, kw: np.roll(a, kw["shifts"], tuple(kw["axes"])),
    "unfold": lambda a, kw: np.take(sliding_window_view(a, kw["size"], axis=kw["dim"]),
                                    np.arange(0, a.shape[kw["dim"]] - kw["size"] + 1, kw["step"]),
                                    axis=kw["dim"]),
    "matmul": lambda a, b, kw: a @ b,
    "softmax": lambda a, kw: softmax(a, kw.get("axis", -1)),
    "log_softmax": lambda a, kw: np.log(softmax(a, kw.get("axis", -1))),
    "layernorm": lambda x, g, b, kw: layernorm(x, g, b, kw),
    "attention": lambda q, k, v, kw: attention(q, k, v, kw),
}


def run_graph(path, inputs):
    env = {}
    outputs = []
    for raw in open(path):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("kiln.graph"):
            continue
        if line.startswith("input "):
            name = line.split()[1][1:]
            env[name] = inputs[name].astype(CALC.get(line.split(":")[1].strip().split("[")[0],
                                                     inputs[name].dtype))
        elif line.startswith("output "):
            outputs.append(line.split()[1][1:])
        else:
            m = re.match(r"%(\w+)\s*=\s*(\w+)\((.*)\)$", line)
            name, op, argtext = m.groups()
            args, kw = [], {}
            for a in split_args(argtext):
                if re.match(r"^\w+\s*=", a):
                    k, v = a.split("=", 1)
                    kw[k.strip()] = parse_value(v)
                elif a.startswith("%"):
                    args.append(env[a[1:]])
                else:
                    args.append(parse_value(a))
            if op in ("max", "min") and len(args) == 1:
                env[name] = reduce(np.max if op == "max" else np.min, args[0], kw)
                continue
            if op in ("max", "min"):
                op_fn = np.maximum if op == "max" else np.minimum
                env[name] = op_fn(args[0], args[1])
                continue
            if op == "full":
                env[name] = np.full(kw["shape"], kw["value"], CALC.get(kw.get("dtype", "f32"), np.float64))
                continue
            if op == "arange":
                dt = kw.get("dtype", "i32")
                env[name] = np.arange(kw.get("start", 0), kw["end"], kw.get("step", 1)).astype(CALC.get(dt, DT[dt]))
                continue
            if op == "concat":
                env[name] = np.concatenate(args, axis=kw["axis"])
                continue
            tensor = next(a for a in args if isinstance(a, np.ndarray))
            args = [np.array(a, dtype=tensor.dtype) if not isinstance(a, np.ndarray) else a for a in args]
            env[name] = OPS[op](*args, kw)
    return {o: env[o] for o in outputs}


def make_inputs(path, rng):
    positive = set()
    inputs = {}
    for raw in open(path):
        m = re.match(r"#\s*numpy-check:\s*positive=([\w,]+)", raw.strip())
        if m:
            positive |= set(m.group(1).split(","))
        m = re.match(r"input %(\w+)\s*:\s*(\w+)\[([\d,]*)\]", raw.strip())
        if m:
            name, dt, dims = m.groups()
            shape = [int(d) for d in dims.split(",")] if dims else []
            if dt in ("f32", "f64", "f16"):
                lo = 0.25 if name in positive else -2.0
                inputs[name] = rng.uniform(lo, 2.0, shape).astype(DT[dt])
            elif dt == "bool":
                inputs[name] = rng.integers(0, 2, shape).astype(np.bool_)
            else:
                inputs[name] = rng.integers(-8, 9, shape).astype(DT[dt])
    return inputs


def main():
    kiln, graph = sys.argv[1], sys.argv[2]
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    inputs = make_inputs(graph, np.random.default_rng(7))
    with tempfile.TemporaryDirectory() as tmp:
        args = [kiln, "run", graph, "--device", device, "--out", os.path.join(tmp, "out")]
        for name, value in inputs.items():
            np.save(os.path.join(tmp, name + ".npy"), value)
            args += ["--input", f"{name}={os.path.join(tmp, name + '.npy')}"]
        proc = subprocess.run(args, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"kiln run failed ({proc.returncode}): {proc.stderr}")
            return 1
        with np.errstate(all="ignore"):
            expected = run_graph(graph, inputs)
        failures = 0
        for name, want in expected.items():
            got = np.load(os.path.join(tmp, "out", name + ".npy"))
            want = np.asarray(want)
            if got.shape != want.shape:
                print(f"{name}: shape {got.shape} != numpy {want.shape}")
                failures += 1
                continue
            w, g = want.astype(np.float64), got.astype(np.float64)
            finite = np.isfinite(w)
            scale = max(1.0, np.abs(w[finite]).max() if finite.any() else 1.0)
            err = np.where(np.isnan(w) & np.isnan(g), 0, np.abs(g - w))
            err = np.where(np.isinf(w) & (g == w), 0, err)
            worst = float(np.nanmax(err)) / scale if err.size else 0.0
            ok = worst <= 2e-4
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(graph)} {device} %{name} "
                  f"{g.dtype}{list(g.shape)} max_rel_err={worst:.2e}")
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
