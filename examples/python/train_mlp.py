#!/usr/bin/python3
"""kiln from Python: train a small classifier with numpy data, see what kiln fused, hand the
weights to numpy and torch without a copy, and run a .kg graph file.

    PYTHONPATH=build/python python3 examples/python/train_mlp.py     # from the build tree
    python3 examples/python/train_mlp.py                             # once installed

It checks its own results and exits 1 if one is wrong (ctest: Python.example runs it)."""
import os
import sys

import numpy as np

import kiln

# A device with kiln's options: here no autotuning, so the first steps compile without measuring.
dev = kiln.set_default_device(kiln.Device("cpu", {"autotune.enabled": False}))

# The one-liner: softmax of a row of ones is 1/3 everywhere.
print(kiln.softmax(kiln.tensor(np.ones((2, 3), np.float32))).numpy())

# Data: 3 classes of 8-feature points; the model: x -> relu(x W1 + b1) W2 + b2.
rng = np.random.default_rng(0)
xs = rng.standard_normal((256, 8)).astype(np.float32)
labels = (xs[:, 0] + 0.5 * xs[:, 1] > 0).astype(int) + (xs[:, 2] > 1).astype(int)
x, y = kiln.tensor(xs), kiln.tensor(np.eye(3, dtype=np.float32)[labels])
w1 = kiln.tensor(rng.standard_normal((8, 32)).astype(np.float32) * 0.3)
b1 = kiln.zeros(32)
w2 = kiln.tensor(rng.standard_normal((32, 3)).astype(np.float32) * 0.3)
b2 = kiln.zeros(3)


def step(w1, b1, w2, b2, lr=0.5):
    """One step of gradient descent on the cross-entropy, backpropagated by hand. Every line only
    records; kiln fuses the whole step into a few kernels when it is realized."""
    h1 = x @ w1 + b1
    h = kiln.relu(h1)
    logp = kiln.log_softmax(h @ w2 + b2, axis=1)
    loss = -(y * logp).sum(axis=1).mean()
    d = (kiln.exp(logp) - y) / x.shape[0]
    dh1 = kiln.where(h1 > 0, d @ w2.T, 0.0)
    return (w1 - lr * (x.T @ dh1), b1 - lr * dh1.sum(axis=0), w2 - lr * (h.T @ d), b2 - lr * d.sum(axis=0)), loss


params, loss = step(w1, b1, w2, b2)
print("one training step, as kiln fuses it:")
print(kiln.dump(list(params) + [loss], "groups"))

losses = []
params = (w1, b1, w2, b2)
for i in range(60):
    params, loss = step(*params)
    kiln.realize(*params, loss)  # one request per step: one plan, reused from the second step on
    losses.append(float(loss))
    if i % 20 == 0:
        s = dev.last_stats()
        print(f"step {i:2d}: loss {losses[-1]:.4f}  ({s.kernels} kernels, {s.compiled} compiled, "
              f"plan from cache: {s.plan_cache_hit})")
w1, b1, w2, b2 = params
accuracy = float((np.asarray(kiln.argmax(kiln.relu(x @ w1 + b1) @ w2 + b2, axis=1)) == labels).mean())
print(f"final loss {losses[-1]:.4f}, training accuracy {accuracy:.1%}")

# The weights go to numpy (read-only, kiln's buffer) and to torch without a copy.
w1_np = np.asarray(w1)
try:
    import torch
    w1_torch = torch.from_dlpack(w1)
    assert w1_torch.data_ptr() == w1_np.ctypes.data
    print(f"W1 shared with numpy and torch at {hex(w1_np.ctypes.data)}")
except ImportError:
    print("(no torch here: python3-torch)")

# A .kg graph file, with inputs by name (examples/layernorm.kg: 8192 rows of 1024).
graph = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "layernorm.kg")
g = kiln.Graph(graph)
inputs = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in g.inputs}
out = kiln.run_graph(g, inputs)["y"]
xv = inputs["x"].astype(np.float64)
want = (xv - xv.mean(-1, keepdims=True)) / np.sqrt(xv.var(-1, keepdims=True) + 1e-5) * inputs["gamma"] + inputs["beta"]
error = float(np.abs(np.asarray(out) - want).max())
print(f"{os.path.basename(graph)}: {dev.last_stats().kernels} kernel(s), {dev.last_stats().run_ms:.2f} ms, "
      f"max error vs numpy {error:.1e}")

ok = losses[-1] < 0.5 * losses[0] and accuracy > 0.85 and error < 1e-4
print("ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
