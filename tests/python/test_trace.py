"""kiln.trace: a function of tensors recorded once per signature and replayed. Replays give what
running the function again gives, on new arguments, with captured weights and nested results;
another shape, dtype or Python value traces again; a tensor that changes between calls is read
where it is an argument and kept as it was where it is captured; bad arguments and results say
what is wrong."""
import numpy as np
import pytest

import kiln
from conftest import open_test_device

rng = np.random.default_rng(11)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_replays_equal_the_function_run_again():
    dev = open_test_device()
    w = kiln.tensor(arr(6, 5), device=dev)
    b = kiln.tensor(arr(5), device=dev)
    runs = []

    def f(x, scale, extra):
        runs.append(1)
        h = kiln.relu(x @ w + b) * scale
        return h, [kiln.softmax(h, -1), kiln.sum(h, axis=[1]) + extra[0]]

    g = kiln.trace(f)
    for step in range(6):
        xn, en = arr(4, 6), arr(4)
        x, e = kiln.tensor(xn, device=dev), kiln.tensor(en, device=dev)
        got = g(x, 0.5, (e,))
        want = f(x, 0.5, (e,))
        assert isinstance(got, tuple) and isinstance(got[1], list)
        for a, c in [(got[0], want[0]), (got[1][0], want[1][0]), (got[1][1], want[1][1])]:
            assert a.shape == c.shape
            assert np.array_equal(a.numpy(), c.numpy())
        h = np.maximum(xn.astype(np.float64) @ w.numpy() + b.numpy(), 0) * 0.5
        np.testing.assert_allclose(got[1][1].numpy(), h.sum(1) + en, rtol=1e-5, atol=1e-5)
    assert g.traces == 1
    assert len(runs) == 1 + 6  # the trace, then only the untraced comparisons


def test_another_shape_dtype_or_value_traces_again():
    dev = open_test_device()
    g = kiln.trace(lambda x, k: x * k + 1.0)
    x4, x5 = kiln.tensor(arr(4), device=dev), kiln.tensor(arr(5), device=dev)
    np.testing.assert_allclose(g(x4, 2.0).numpy(), x4.numpy() * 2 + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g(x5, 2.0).numpy(), x5.numpy() * 2 + 1, rtol=1e-6, atol=1e-6)
    assert g.traces == 2
    np.testing.assert_allclose(g(x4, 3.0).numpy(), x4.numpy() * 3 + 1, rtol=1e-6, atol=1e-6)  # the value is part of the trace
    assert g.traces == 3
    xd = kiln.tensor(np.arange(4, dtype=np.float64), device=dev)
    assert g(xd, 2.0).numpy().dtype == np.float64
    assert g.traces == 4
    for x, k in [(x4, 2.0), (x5, 2.0), (x4, 3.0), (xd, 2.0)]:  # each signature replays its own
        np.testing.assert_allclose(g(x, k).numpy(), x.numpy() * k + 1, rtol=1e-6, atol=1e-6)
    assert g.traces == 4


def test_a_cache_passed_as_an_argument_is_read_at_each_call_and_a_captured_one_is_kept():
    dev = open_test_device()
    state = {"cache": kiln.tensor(np.zeros(3, np.float32), device=dev)}
    frozen = kiln.tensor(np.full(3, 10, np.float32), device=dev)
    step = kiln.trace(lambda x, cache: (cache + x, cache + x + frozen))
    for i in range(1, 5):
        x = kiln.tensor(np.full(3, i, np.float32), device=dev)
        cache, out = step(x, state["cache"])
        kiln.realize(cache, out)
        state["cache"] = cache
        total = i * (i + 1) / 2
        assert np.array_equal(cache.numpy(), np.full(3, total, np.float32))
        assert np.array_equal(out.numpy(), np.full(3, total + 10, np.float32))
    assert step.traces == 1
    del frozen  # the trace holds what it captured
    assert np.array_equal(step(kiln.tensor(np.ones(3, np.float32), device=dev), state["cache"])[1].numpy(),
                          np.full(3, 10 + 1 + 10, np.float32))


def test_the_graph_names_its_arguments_and_captures():
    dev = open_test_device()
    wn = arr(3, 2)
    w = kiln.tensor(wn, device=dev)
    g = kiln.trace(lambda x: kiln.relu(x @ w))
    g(kiln.tensor(arr(4, 3), device=dev))
    text = g.graph_dump("graph")
    assert "input %arg0 : f32[4,3]" in text and "input %captured0 : f32[3,2]" in text, text
    assert "output %out0" in text, text
    graph = g.graph  # a kiln.Graph: its inputs, and a call binds them in order
    assert [(i.name, i.shape) for i in graph.inputs] == [("arg0", (4, 3))] and graph.outputs == ["out0"], graph
    assert "kiln.trace of" in repr(graph), repr(graph)
    x = arr(4, 3)
    assert np.allclose(graph(kiln.tensor(x, device=dev))["out0"].numpy(), np.maximum(x @ wn, 0), atol=1e-5)


def test_bad_arguments_and_results_say_what_is_wrong():
    dev = open_test_device()
    x = kiln.tensor(arr(3), device=dev)
    with pytest.raises(TypeError, match="neither a tensor"):
        kiln.trace(lambda x, d: x)(x, {"a": 1})
    with pytest.raises(TypeError, match="returns tensors"):
        kiln.trace(lambda x: 3)(x)
    with pytest.raises(TypeError, match="returned no tensor"):
        kiln.trace(lambda x: [])(x)
    with pytest.raises(kiln.InvalidArgumentError, match="arg 1 is arg 0 again"):
        kiln.trace(lambda a, b: a + b)(x, x)
    with pytest.raises(ValueError, match="nothing traced yet"):
        kiln.trace(lambda x: x).graph_dump()
