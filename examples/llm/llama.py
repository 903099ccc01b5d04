#!/usr/bin/python3
"""A Llama-style decoder, token by token: kiln (its Python API) next to numpy on the same weights.

    PYTHONPATH=build/python python3 examples/llm/llama.py --steps 200      # from the build tree

The model: token embedding (a gather), per layer RMSNorm, q/k/v projections, rotary position
embedding, attention over a key/value cache of `ctx` rows that the step writes its row into (rows
past the position are masked), the output projection, RMSNorm and a SiLU-gated MLP, each with a
residual; then RMSNorm, the vocabulary projection and greedy sampling (argmax). Weights come from
an integer hash of their index (`weights`), so that the C++ version (examples/llm/decode.cpp)
builds the same ones bit for bit.

Every step's graph has the same shapes: the position is an input tensor, not a shape, so one plan
serves every step and the whole loop compiles once. Exits 1 when kiln's tokens differ from
numpy's (--check, the default).
"""
import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Config:
    layers: int = 4
    width: int = 256
    heads: int = 8
    mlp: int = 688
    vocab: int = 4096
    ctx: int = 512
    eps: float = 1e-5
    rope_base: float = 10000.0

    @property
    def head_dim(self):
        return self.width // self.heads


def hashed(shape, tensor_id, seed, scale):
    """Uniform in [-scale, scale): ((i * 2654435761 + base) mod 2^32) / 2^32, in float64, then
    rounded to float32 once (the C++ version computes the same doubles)."""
    n = int(np.prod(shape))
    base = (seed * 1000003 + tensor_id * 7919) % (1 << 32)
    i = np.arange(n, dtype=np.uint64)
    x = (i * np.uint64(2654435761) + np.uint64(base)) % np.uint64(1 << 32)
    u = x.astype(np.float64) / float(1 << 32)
    return ((2.0 * u - 1.0) * scale).astype(np.float32).reshape(shape)


def weights(cfg, seed=1):
    """Per layer: attn_norm, wq, wk, wv, wo, mlp_norm, wg, wu, wd; then emb, norm, out. Norm gains
    are 1 + a small hashed term; projections are scaled by 1/sqrt(fan_in)."""
    d, m = cfg.width, cfg.mlp
    w = {"layers": []}
    tid = 0

    def nxt(shape, scale):
        nonlocal tid
        tid += 1
        return hashed(shape, tid, seed, scale)

    for _ in range(cfg.layers):
        layer = {
            "attn_norm": (1.0 + nxt((d,), 0.1).astype(np.float64)).astype(np.float32),
            "wq": nxt((d, d), d ** -0.5), "wk": nxt((d, d), d ** -0.5),
            "wv": nxt((d, d), d ** -0.5), "wo": nxt((d, d), d ** -0.5),
            "mlp_norm": (1.0 + nxt((d,), 0.1).astype(np.float64)).astype(np.float32),
            "wg": nxt((d, m), d ** -0.5), "wu": nxt((d, m), d ** -0.5),
            "wd": nxt((m, d), m ** -0.5),
        }
        w["layers"].append(layer)
    w["emb"] = nxt((cfg.vocab, d), 1.0)
    w["norm"] = (1.0 + nxt((d,), 0.1).astype(np.float64)).astype(np.float32)
    w["out"] = nxt((d, cfg.vocab), d ** -0.5)
    return w


def rope_tables(cfg):
    """cos and sin of position * base^(-2i/head_dim), [ctx, head_dim] (the half repeated), f32.
    Scalar libm calls (math), as the C++ version makes them: numpy's vectorized pow and cos may
    differ from libm in the last bit."""
    half = cfg.head_dim // 2
    inv = [math.pow(cfg.rope_base, -float(i) * 2.0 / cfg.head_dim) for i in range(half)]
    ang = [[float(p) * inv[i % half] for i in range(cfg.head_dim)] for p in range(cfg.ctx)]
    cos = np.array([[math.cos(a) for a in row] for row in ang], np.float64)
    sin = np.array([[math.sin(a) for a in row] for row in ang], np.float64)
    return cos.astype(np.float32), sin.astype(np.float32)


def pick(step, k):
    """Which of the k best tokens step `step` takes (top-k sampling with a hashed, reproducible
    choice; k = 1 is greedy)."""
    return ((step * 2654435761 + 12345) % (1 << 32)) % k


def prompt_tokens(cfg, n=8):
    return [(17 + 101 * i) % cfg.vocab for i in range(n)]


class NumpyDecoder:
    """The reference on the same (float32) weights, computed in `dtype`: float64 by default, so
    that its tokens do not depend on the CPU (numpy's float32 matmuls sum in an order that
    OpenBLAS picks per instruction set, and kiln's results are the same bits everywhere); float32
    is the speed peer of bench/llm_decode.py."""

    def __init__(self, cfg, w, dtype=np.float64):
        self.cfg, self.dt = cfg, dtype
        cast = lambda a: a.astype(dtype)  # noqa: E731
        self.w = {"layers": [{k: cast(v) for k, v in lw.items()} for lw in w["layers"]],
                  "emb": cast(w["emb"]), "norm": cast(w["norm"]), "out": cast(w["out"])}
        self.cos, self.sin = (cast(t) for t in rope_tables(cfg))
        shape = (cfg.ctx, cfg.width)
        self.k = [np.zeros(shape, dtype) for _ in range(cfg.layers)]
        self.v = [np.zeros(shape, dtype) for _ in range(cfg.layers)]

    def rms(self, x, g):
        return x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.dt(self.cfg.eps))) * g

    def rope(self, x, pos):
        c = self.cfg
        h = x.reshape(c.heads, c.head_dim)
        half = c.head_dim // 2
        rot = np.concatenate([-h[:, half:], h[:, :half]], axis=1)
        return (h * self.cos[pos] + rot * self.sin[pos]).reshape(1, c.width)

    def step(self, token, pos, k=1):
        c, w = self.cfg, self.w
        x = w["emb"][token][None, :]
        live = np.arange(c.ctx) <= pos
        for li, lw in enumerate(w["layers"]):
            h = self.rms(x, lw["attn_norm"])
            q = self.rope(h @ lw["wq"], pos)
            self.k[li][pos] = self.rope(h @ lw["wk"], pos)[0]
            self.v[li][pos] = (h @ lw["wv"])[0]
            qh = q.reshape(c.heads, 1, c.head_dim)
            kh = self.k[li].reshape(c.ctx, c.heads, c.head_dim).transpose(1, 2, 0)
            vh = self.v[li].reshape(c.ctx, c.heads, c.head_dim).transpose(1, 0, 2)
            s = (qh @ kh) * self.dt(c.head_dim ** -0.5)
            s = np.where(live, s, self.dt(-np.inf))
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            p = p / p.sum(axis=-1, keepdims=True)
            o = (p @ vh).transpose(1, 0, 2).reshape(1, c.width)
            x = x + o @ lw["wo"]
            h = self.rms(x, lw["mlp_norm"])
            g = h @ lw["wg"]
            x = x + ((g / (1 + np.exp(-g))) * (h @ lw["wu"])) @ lw["wd"]
        logits = self.rms(x, w["norm"]) @ w["out"]
        best = np.argsort(-logits[0], kind="stable")[:k]  # ties: the lower index first
        return int(best[pick(pos, k)])


class TorchDecoder:
    """The same float32 model in torch eager (a peer for bench/llm_decode.py), one op at a time."""

    def __init__(self, cfg, w, torch, threads=None):
        self.cfg, self.torch = cfg, torch
        if threads:
            torch.set_num_threads(threads)
        t = torch.from_numpy
        self.w = {"layers": [{k: t(v) for k, v in lw.items()} for lw in w["layers"]],
                  "emb": t(w["emb"]), "norm": t(w["norm"]), "out": t(w["out"])}
        cos, sin = rope_tables(cfg)
        self.cos, self.sin = t(cos), t(sin)
        shape = (cfg.ctx, cfg.width)
        self.k = [torch.zeros(shape) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape) for _ in range(cfg.layers)]

    def rms(self, x, g):
        return x * self.torch.rsqrt((x * x).mean(-1, keepdim=True) + self.cfg.eps) * g

    def rope(self, x, pos):
        c, torch = self.cfg, self.torch
        h = x.reshape(c.heads, c.head_dim)
        half = c.head_dim // 2
        rot = torch.cat([-h[:, half:], h[:, :half]], dim=1)
        return (h * self.cos[pos] + rot * self.sin[pos]).reshape(1, c.width)

    def step(self, token, pos, k=1):
        c, w, torch = self.cfg, self.w, self.torch
        with torch.no_grad():
            x = w["emb"][token][None, :]
            live = torch.arange(c.ctx) <= pos
            for li, lw in enumerate(w["layers"]):
                h = self.rms(x, lw["attn_norm"])
                q = self.rope(h @ lw["wq"], pos)
                self.k[li][pos] = self.rope(h @ lw["wk"], pos)[0]
                self.v[li][pos] = (h @ lw["wv"])[0]
                qh = q.reshape(c.heads, 1, c.head_dim)
                kh = self.k[li].reshape(c.ctx, c.heads, c.head_dim).permute(1, 2, 0)
                vh = self.v[li].reshape(c.ctx, c.heads, c.head_dim).permute(1, 0, 2)
                s = torch.where(live, (qh @ kh) * c.head_dim ** -0.5, float("-inf"))
                o = (torch.softmax(s, -1) @ vh).permute(1, 0, 2).reshape(1, c.width)
                x = x + o @ lw["wo"]
                h = self.rms(x, lw["mlp_norm"])
                g = h @ lw["wg"]
                x = x + ((g * torch.sigmoid(g)) * (h @ lw["wu"])) @ lw["wd"]
            logits = self.rms(x, w["norm"]) @ w["out"]
            best = torch.topk(logits[0], k).indices if k > 1 else logits[0].argmax().reshape(1)
            return int(best[pick(pos, k)])


class KilnDecoder:
    """The same model through kiln's Python API: one recorded graph per step, realized at once
    (the next token and every layer's updated cache rows). With `traced`, the step is recorded
    once (kiln.trace) and each later step records that graph over its token, position and caches
    in one call, instead of its ~250 ops one by one."""

    def __init__(self, cfg, w, kiln, device, traced=False):
        self.cfg, self.kiln = cfg, kiln
        self.forward = kiln.trace(self._forward) if traced else self._forward
        t = lambda a: kiln.tensor(a, device=device)  # noqa: E731
        self.w = {"layers": [{k: t(v) for k, v in lw.items()} for lw in w["layers"]],
                  "emb": t(w["emb"]), "norm": t(w["norm"]), "out": t(w["out"])}
        cos, sin = rope_tables(cfg)
        self.cos, self.sin = t(cos), t(sin)
        self.rows = kiln.reshape(kiln.arange(cfg.ctx, device=device), (cfg.ctx, 1))  # i32 [ctx, 1]
        self.ninf = kiln.full((1,), -np.inf, device=device)
        self.device = device
        self.stats = []  # the device's stats of each step's realize
        shape = (cfg.ctx, cfg.width)
        self.k = [t(np.zeros(shape, np.float32)) for _ in range(cfg.layers)]
        self.v = [t(np.zeros(shape, np.float32)) for _ in range(cfg.layers)]

    def rms(self, x, g):
        k = self.kiln
        return x * k.rsqrt(k.mean(x * x, axis=-1, keepdims=True) + self.cfg.eps) * g

    def rope(self, x, cos, sin):
        c, k = self.cfg, self.kiln
        h = x.reshape(c.heads, c.head_dim)
        half = c.head_dim // 2
        rot = k.concat([-k.slice(h, 1, half, None), k.slice(h, 1, 0, half)], axis=1)
        return (h * cos + rot * sin).reshape(1, c.width)

    def step(self, token, pos, topk=1):
        k = self.kiln
        tok = k.tensor(np.array([token], np.int32), device=self.device)
        at = k.tensor(np.array([pos], np.int32), device=self.device)
        nxt, self.k, self.v = self.forward(tok, at, self.k, self.v, topk)
        # The old caches are held by nothing but this step's graph now, so the realize writes the
        # new ones over their memory (buffer donation: the caches are updated in place).
        k.realize(nxt, *self.k, *self.v)
        self.stats.append(self.device.last_stats())
        return int(nxt.numpy().reshape(-1)[pick(pos, topk)])

    def _forward(self, tok, at, kcache, vcache, topk):
        """The next token's candidates and every layer's updated caches, recorded."""
        c, k, w = self.cfg, self.kiln, self.w
        kcache, vcache = list(kcache), list(vcache)
        x = k.gather(w["emb"], tok, 0)  # [1, width]
        cos, sin = k.gather(self.cos, at, 0), k.gather(self.sin, at, 0)  # [1, head_dim]
        here = self.rows == at  # [ctx, 1]: the row this step writes
        live = k.reshape(self.rows <= at, (1, 1, c.ctx))  # keys up to the position
        for li, lw in enumerate(w["layers"]):
            h = self.rms(x, lw["attn_norm"])
            q = self.rope(h @ lw["wq"], cos, sin)
            kc = k.where(here, self.rope(h @ lw["wk"], cos, sin), kcache[li])
            vc = k.where(here, h @ lw["wv"], vcache[li])
            kcache[li], vcache[li] = kc, vc
            qh = q.reshape(c.heads, 1, c.head_dim)
            kh = kc.reshape(c.ctx, c.heads, c.head_dim).permute(1, 2, 0)
            vh = vc.reshape(c.ctx, c.heads, c.head_dim).permute(1, 0, 2)
            s = k.where(live, (qh @ kh) * (c.head_dim ** -0.5), self.ninf)
            o = (k.softmax(s, -1) @ vh).permute(1, 0, 2).reshape(1, c.width)
            x = x + o @ lw["wo"]
            h = self.rms(x, lw["mlp_norm"])
            g = h @ lw["wg"]
            x = x + ((g * k.sigmoid(g)) * (h @ lw["wu"])) @ lw["wd"]
        logits = self.rms(x, w["norm"]) @ w["out"]
        nxt = k.argmax(logits, axis=-1) if topk == 1 else k.topk(logits, topk)[1]
        return nxt, kcache, vcache


def generate(decoder, prompt, steps, topk=1):
    """Feeds the prompt, then `steps` tokens chosen among the topk best (pick); returns them and
    per-step seconds."""
    token, times = prompt[0], []
    out = []
    for pos in range(len(prompt) + steps - 1):
        t0 = time.perf_counter()
        nxt = decoder.step(token, pos, topk)
        times.append(time.perf_counter() - t0)
        token = prompt[pos + 1] if pos + 1 < len(prompt) else nxt
        if pos + 1 >= len(prompt):
            out.append(nxt)
    return out, times


def check_args(ap, cfg, steps, topk):
    """Exits with a usage error unless `steps` fit the context after the prompt and `topk` is
    a count of candidates."""
    room = cfg.ctx - len(prompt_tokens(cfg)) + 1  # the last generated token is never fed
    if steps < 1:
        ap.error(f"--steps must be at least 1, got {steps}")
    if steps > room:
        ap.error(f"{steps} steps after the prompt do not fit a context of {cfg.ctx} (at most {room})")
    if not 1 <= topk <= cfg.vocab:
        ap.error(f"--topk must be in [1, {cfg.vocab}], got {topk}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--topk", type=int, default=1, help="sample among the k best (1: greedy)")
    ap.add_argument("--cache", default=None,
                    help='kiln.toml compilation.cache and autotune.cache for the device: "none" (a '
                         'cold start every run), "file=PATH", ... (default: kiln\'s)')
    ap.add_argument("--no-check", action="store_true", help="skip the numpy run")
    ap.add_argument("--traced", action="store_true",
                    help="record the step once and replay it (kiln.trace) instead of recording each step")
    args = ap.parse_args()
    import kiln

    cfg = Config()
    check_args(ap, cfg, args.steps, args.topk)
    w = weights(cfg)
    prompt = prompt_tokens(cfg)
    try:
        dev = kiln.Device(args.device,
                          {"compilation.cache": args.cache, "autotune.cache": args.cache} if args.cache else {})
    except kiln.Error as e:
        sys.exit(f"llama.py: {e}")
    decoder = KilnDecoder(cfg, w, kiln, dev, traced=args.traced)
    tokens, times = generate(decoder, prompt, args.steps, args.topk)
    steady = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else times[0]
    st = decoder.stats
    print(f"kiln ({args.device}): {len(tokens)} tokens, first step {times[0] * 1e3:.1f} ms, "
          f"then {steady * 1e3:.2f} ms per token (median), {1 / steady:.0f} tokens/s")
    print(f"kiln: {len(st)} steps, {st[-1].kernels} kernels a step, "
          f"{sum(x.compiled for x in st)} kernels compiled in all "
          f"(first step {st[0].compiled}, {st[0].compile_ms:.0f} ms), "
          f"{sum(x.plan_source != 'built' for x in st)} steps found their plan in a cache")
    print(f"kiln: caches updated in place in {sum(x.donated == 2 * cfg.layers for x in st)} "
          f"of {len(st)} steps")
    print("tokens:", " ".join(map(str, tokens)))
    if args.no_check:
        return 0
    ref, rtimes = generate(NumpyDecoder(cfg, w), prompt, args.steps, args.topk)
    rsteady = sorted(rtimes)[len(rtimes) // 2]
    print(f"numpy: {rsteady * 1e3:.2f} ms per token (median), {1 / rsteady:.0f} tokens/s")
    if ref != tokens:
        first = next(i for i, (a, b) in enumerate(zip(tokens, ref)) if a != b)
        print(f"llama.py: kiln's token {first} is {tokens[first]}, numpy's {ref[first]}",
              file=sys.stderr)
        return 1
    print(f"the {len(tokens)} tokens match numpy's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
