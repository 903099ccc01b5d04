"""A small training loop in kiln from Python: a one-hidden-layer classifier trained by gradient
descent with hand-written backpropagation, each step realized as one request. It matches the same
steps in numpy (float64) at every step, learns, and after the first step reuses its plan."""
import numpy as np

import kiln
from conftest import open_test_device

STEPS, LR = 25, 0.5


def make_data(rng):
    x = rng.standard_normal((64, 8))
    labels = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int) + (x[:, 2] > 1).astype(int)
    return x, np.eye(3)[labels]


def init(rng):
    return [rng.standard_normal((8, 16)) * 0.3, np.zeros(16), rng.standard_normal((16, 3)) * 0.3, np.zeros(3)]


def numpy_step(x, y, params):
    w1, b1, w2, b2 = params
    h1 = x @ w1 + b1
    h = np.maximum(h1, 0)
    logits = h @ w2 + b2
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    loss = -(y * logp).sum(1).mean()
    d = (np.exp(logp) - y) / len(x)
    dh1 = np.where(h1 > 0, d @ w2.T, 0)
    grads = [x.T @ dh1, dh1.sum(0), h.T @ d, d.sum(0)]
    return [p - LR * g for p, g in zip(params, grads)], loss


def kiln_step(x, y, params):
    w1, b1, w2, b2 = params
    h1 = x @ w1 + b1
    h = kiln.relu(h1)
    logits = h @ w2 + b2
    logp = kiln.log_softmax(logits, axis=1)
    loss = -(y * logp).sum(axis=1).mean()
    d = (kiln.exp(logp) - y) / x.shape[0]
    dh1 = kiln.where(h1 > 0, d @ w2.T, 0.0)
    grads = [x.T @ dh1, dh1.sum(axis=0), h.T @ d, d.sum(axis=0)]
    return [p - LR * g for p, g in zip(params, grads)], loss


def test_training_matches_numpy_learns_and_reuses_its_plan():
    rng = np.random.default_rng(5)
    xs, ys = make_data(rng)
    start = init(rng)
    d = open_test_device()
    x, y = kiln.tensor(xs, device=d), kiln.tensor(ys, device=d)
    params = [kiln.tensor(p, device=d) for p in start]
    ref = start
    losses = []
    for step in range(STEPS):
        params, loss = kiln_step(x, y, params)
        kiln.realize(params + [loss])  # one request: the step's shared values computed once
        stats = d.last_stats()
        if step > 0:
            assert stats.plan_cache_hit and stats.compiled == 0, (step, stats)
        ref, ref_loss = numpy_step(xs, ys, ref)
        losses.append(float(loss))
        np.testing.assert_allclose(losses[-1], ref_loss, rtol=1e-10)
        for got, want in zip(params, ref):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9, atol=1e-12)
    assert losses[-1] < 0.6 * losses[0], losses
    accuracy = (np.asarray((x @ params[0] + params[1]).relu() @ params[2] + params[3]).argmax(1) == ys.argmax(1)).mean()
    assert accuracy > 0.8


def test_float32_training_from_torch_tensors():
    """The same loop in float32, its data handed over from torch without a copy."""
    import pytest
    torch = pytest.importorskip("torch", reason="python3-torch is not installed")
    rng = np.random.default_rng(6)
    xs, ys = make_data(rng)
    x, y = kiln.from_dlpack(torch.from_numpy(xs.astype(np.float32))), kiln.from_dlpack(torch.from_numpy(ys.astype(np.float32)))
    params = [kiln.tensor(p.astype(np.float32)) for p in init(rng)]
    first = None
    for _ in range(STEPS):
        params, loss = kiln_step(x, y, params)
        kiln.realize(params + [loss])
        first = float(loss) if first is None else first
    assert float(loss) < 0.6 * first
    w1 = torch.from_dlpack(params[0])  # the trained weights, to torch without a copy
    assert w1.dtype == torch.float32 and tuple(w1.shape) == (8, 16)
    assert w1.data_ptr() == np.asarray(params[0]).ctypes.data
