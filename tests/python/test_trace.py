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
    with pytest.raises(ValueError, match="nothing traced yet"):
        kiln.trace(lambda x: x).graph_dump()


def test_floats_are_keyed_by_their_bits():
    dev = open_test_device()
    x = kiln.tensor(np.float32([1, 2]), device=dev)
    g = kiln.trace(lambda x, s: x * s)
    assert not np.signbit(g(x, 0.0).numpy()).any()
    assert np.signbit(g(x, -0.0).numpy()).all()  # -0.0 == 0.0, but it is another value: traced again
    assert g.traces == 2
    assert not np.signbit(g(x, 0.0).numpy()).any() and np.signbit(g(x, -0.0).numpy()).all()
    assert g.traces == 2
    assert np.signbit(g(x, np.float32(-0.0)).numpy()).all() and not np.signbit(g(x, np.float32(0.0)).numpy()).any()
    assert g.traces == 4
    h = kiln.trace(lambda x, s: x + s[0])
    for _ in range(4):  # NaN != NaN, yet it is one value: traced once
        assert np.isnan(h(x, [float("nan")]).numpy()).all()
        assert np.isnan(h(x, [np.float64("nan")]).numpy()).all()
    assert h.traces == 2  # a float and a numpy float are two types, as 1 and 1.0 are


def test_one_tensor_passed_for_several_arguments():
    dev = open_test_device()
    runs = []

    def f(x, y, zs):
        runs.append(1)
        return x * 2 + y - zs[0] * zs[1]

    g = kiln.trace(f)
    an, bn = arr(3), arr(3)
    a, b = kiln.tensor(an, device=dev), kiln.tensor(bn, device=dev)
    np.testing.assert_allclose(g(a, a, [a, b]).numpy(), an * 3 - an * bn, rtol=1e-6, atol=1e-6)
    assert g.traces == 1
    assert [i.name for i in g.graph.inputs] == ["arg0", "arg1"]  # one input per distinct tensor
    c, d = kiln.tensor(bn, device=dev), kiln.tensor(an, device=dev)
    np.testing.assert_allclose(g(c, c, [c, d]).numpy(), bn * 3 - bn * an, rtol=1e-6, atol=1e-6)  # replayed
    assert g.traces == 1
    # Distinct tensors do not replay the graph of the aliased call, and the other way round.
    np.testing.assert_allclose(g(a, b, [c, d]).numpy(), an * 2 + bn - bn * an, rtol=1e-6, atol=1e-6)
    assert g.traces == 2 and len(g.graph.inputs) == 4
    np.testing.assert_allclose(g(a, a, [a, b]).numpy(), an * 3 - an * bn, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g(b, a, [a, b]).numpy(), bn * 2 + an - an * bn, rtol=1e-6, atol=1e-6)
    assert g.traces == 3  # another pattern: the first two arguments differ, the second is the third
    np.testing.assert_allclose(g(d, c, [c, d]).numpy(), an * 2 + bn - bn * an, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g(c, d, [a, b]).numpy(), bn * 2 + an - an * bn, rtol=1e-6, atol=1e-6)
    assert g.traces == 3 and len(runs) == 3
    same = kiln.trace(lambda p, q: p + q)
    assert np.array_equal(same(a, a).numpy(), an + an) and np.array_equal(same(b, b).numpy(), bn + bn)
    assert same.traces == 1


def test_a_value_realized_inside_the_traced_function_is_refused():
    dev = open_test_device()

    @kiln.trace
    def step(x):
        h = (x + 1).realize()  # computed from x now: a replay would read this value again
        return h * 2

    with pytest.raises(kiln.InvalidArgumentError, match="realized after the args were made"):
        step(kiln.tensor(np.ones(3, np.float32), device=dev))
