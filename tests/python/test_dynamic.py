"""Dynamic shapes from Python (docs/dynamic-shapes.md): an MLP served at 100 batch sizes compiles
each kernel once when its input is marked dynamic, every size matches numpy, and the shape policy
setting is honoured."""
import numpy as np
import pytest

import kiln
from conftest import assert_close, open_test_device


class Mlp:
    def __init__(self, dev, rng):
        self.w = [rng.standard_normal((48, 32)).astype(np.float32) * 0.2, rng.standard_normal(32).astype(np.float32),
                  rng.standard_normal((32, 5)).astype(np.float32) * 0.2, rng.standard_normal(5).astype(np.float32)]
        self.t = [kiln.tensor(a, device=dev) for a in self.w]

    def __call__(self, x):
        w1, b1, w2, b2 = self.t
        return kiln.relu(x @ w1 + b1) @ w2 + b2

    def numpy(self, x):
        w1, b1, w2, b2 = (a.astype(np.float64) for a in self.w)
        return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def serve(dev, sizes, mark, rng):
    mlp = Mlp(dev, rng)
    compiled = []
    for b in sizes:
        x = rng.standard_normal((b, 48)).astype(np.float32)
        t = kiln.tensor(x, device=dev)
        if mark:
            t.mark_dynamic(0, "batch")
        y = mlp(t)
        assert_close(y, mlp.numpy(x.astype(np.float64)), np.float32, scale=10)
        compiled.append(dev.last_stats().compiled)
    return compiled, dev.last_stats()


def test_a_marked_batch_dimension_compiles_each_kernel_once():
    dev = open_test_device()
    compiled, last = serve(dev, range(2, 102), True, np.random.default_rng(0))
    assert compiled[0] > 0
    assert sum(compiled[1:]) == 0, compiled
    assert last.dynamic_kernels == last.kernels
    # The first two sizes built plans; their symbolic plan served the 98 others.
    assert last.plan_source == ("symbolic" if dev.name == "cpu" else "built"), last


def test_automatic_generalizes_at_the_second_size():
    dev = open_test_device()
    compiled, last = serve(dev, [8, 8, 9, 10, 50], False, np.random.default_rng(1))
    assert compiled[0] > 0 and compiled[1] == 0 and compiled[2] > 0, compiled
    assert compiled[3:] == [0, 0], compiled
    assert last.dynamic_kernels == last.kernels


def test_the_static_policy_compiles_every_size():
    dev = open_test_device(**{"shapes.policy": "static"})
    compiled, last = serve(dev, [8, 9, 10], True, np.random.default_rng(2))
    assert all(c > 0 for c in compiled), compiled
    assert last.dynamic_kernels == 0


def test_mark_dynamic_checks_its_axis():
    t = kiln.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(kiln.InvalidArgumentError, match="axis 5 is out of range"):
        t.mark_dynamic(5)
    assert t.mark_dynamic(-1) is t
    # One symbol is one size (marking axes of sizes 2 and 3 with one name was accepted).
    t.mark_dynamic(0, "a")
    with pytest.raises(kiln.InvalidArgumentError, match=r"'a' names axis 0 \(size 2\) already; axis 1 has size 3"):
        t.mark_dynamic(1, "a")
    square = kiln.tensor(np.zeros((3, 3), np.float32))
    assert square.mark_dynamic(0, "n").mark_dynamic(1, "n") is square


def test_a_graph_with_a_size_symbol_is_called_at_any_size(source_dir):
    """examples/mlp_batch.kg declares %x : f32[?b=64,784]: any batch size may be bound."""
    import os
    graph = kiln.Graph(os.path.join(source_dir, "examples", "mlp_batch.kg"))
    rng = np.random.default_rng(3)
    w1, b1 = rng.standard_normal((784, 256)).astype(np.float32) * 0.05, rng.standard_normal(256).astype(np.float32)
    w2, b2 = rng.standard_normal((256, 10)).astype(np.float32) * 0.05, rng.standard_normal(10).astype(np.float32)
    for b in (64, 5, 1, 130):
        x = rng.standard_normal((b, 784)).astype(np.float32)
        y = graph(x=x, W1=w1, b1=b1, W2=w2, b2=b2)["y"]
        want = np.maximum(x.astype(np.float64) @ w1 + b1, 0) @ w2 + b2
        assert_close(y, want, np.float32, scale=20)
    with pytest.raises(kiln.Error, match="is declared f32"):
        graph(x=np.zeros((5, 783), np.float32), W1=w1, b1=b1, W2=w2, b2=b2)


def test_the_stats_say_why_a_new_size_compiled():
    dev = open_test_device()
    rng = np.random.default_rng(3)
    lines = []
    for b in (3, 5):
        x = rng.standard_normal((b, 8)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(kiln.relu(kiln.tensor(x, device=dev))), np.maximum(x, 0))
        lines.append(dev.last_stats().recompiles)
    assert lines[0] == [], lines
    assert any("dimension 0 changed 3 -> 5" in line for line in lines[1]), lines
    assert any("dynamic from now on" in line for line in lines[1]), lines


def test_a_graphs_dump_names_its_size_symbols():
    """A dump of a graph whose symbol is on an inner axis shows the kernels its first call makes:
    the size taken at run time, and each slot named by the symbol it holds (1/?n: a mean's scale)."""
    dev = open_test_device()
    graph = kiln.Graph.parse("kiln.graph v1\ninput %x : f32[?b=3,?n=10]\n%m = mean(%x, axes=[1])\noutput %m\n")
    text = graph.dump("kernels", device=dev)
    assert "# size.0 is ?b, size.1 is ?n, size.2 is 1/?n\nkernel k0" in text, text
    assert "reduce.sum f32 (v1<size.1>)" in text, text
    x = np.random.default_rng(5).standard_normal((7, 33)).astype(np.float32)
    assert_close(graph(x=x)["m"], x.astype(np.float64).mean(axis=1), np.float32)
    assert dev.last_stats().compiled == 0, dev.last_stats()


def test_a_graph_input_of_another_rank_names_its_symbols():
    """The input is declared as the file writes it (its symbols), then at this call's sizes."""
    graph = kiln.Graph.parse("kiln.graph v1\ninput %x : f32[?b=3,?n=10]\ninput %y : f32[?b,?n]\n"
                             "%s = add(%x, %y)\noutput %s\n")
    with pytest.raises(kiln.InvalidArgumentError,
                       match=r"input %y is declared f32\[\?b,\?n\] \(f32\[3,10\] at this call's sizes\), "
                             r"the tensor bound to it is f32\[3,10,1\]"):
        graph(x=np.ones((3, 10), np.float32), y=kiln.tensor(np.ones((3, 10, 1), np.float32)))
    with pytest.raises(kiln.InvalidArgumentError, match=r"size symbol \?b is 3 in input %x but 4 in input %y"):
        graph(x=np.ones((3, 10), np.float32), y=np.ones((4, 10), np.float32))


def test_a_size_that_held_one_value_while_generalizing_generalizes_later():
    """?n first at 0 (a size that specializes), then (6, 7): the kernel generalized from the second
    reading (6, 2) and (6, 7) kept b = 6 compiled in, and every later b compiled its own code. A
    kernel that is no instance of the general one only because such a number differs generalizes
    again, with that number a slot too: one more compile, then none."""
    dev = open_test_device()
    graph = kiln.Graph.parse("kiln.graph v1\ninput %x : f32[?b=5,?n=0]\n%m = mean(%x, axes=[1], keepdim=true)\n"
                             "%s = softmax(%x, axis=-1)\n%d = sub(%s, %m)\n%y = mul(%d, 3.25)\noutput %y\n")
    rng = np.random.default_rng(11)
    compiled = []
    for b, n in [(5, 0), (6, 7), (2, 9), (5, 3), (8, 8), (3, 17), (100, 2)]:
        x = rng.standard_normal((b, n)).astype(np.float32)
        y = np.asarray(graph(x=kiln.tensor(x, device=dev))["y"])
        compiled.append(dev.last_stats().compiled)
        if n:
            e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
            want = (e / e.sum(1, keepdims=True) - x.astype(np.float64).mean(1, keepdims=True)) * 3.25
            assert_close(y, want, np.float32, scale=4)
    assert compiled == [1, 1, 1, 0, 0, 0, 0], compiled


def test_a_size_that_came_back_keeps_the_general_kernel():
    """As above, the general kernel from (6, 7) keeps b = 6. At (2, 2) only b differs from the size
    met before it, (6, 2): a kernel general in b alone would serve fewer sizes than the general
    kernel, so (2, 2) compiles its own and says why, and (6, 5) still runs the general kernel."""
    dev = open_test_device()
    graph = kiln.Graph.parse("kiln.graph v1\ninput %x : f32[?b=5,?n=0]\n%m = mean(%x, axes=[1], keepdim=true)\n"
                             "%s = softmax(%x, axis=-1)\n%d = sub(%s, %m)\n%y = mul(%d, 3.25)\noutput %y\n")
    rng = np.random.default_rng(12)
    compiled, why = [], {}
    for b, n in [(5, 0), (6, 7), (2, 2), (6, 5), (3, 17), (4, 2)]:
        x = rng.standard_normal((b, n)).astype(np.float32)
        y = np.asarray(graph(x=kiln.tensor(x, device=dev))["y"])
        stats = dev.last_stats()
        compiled.append(stats.compiled)
        why[(b, n)] = [r for r in stats.recompiles if not r.startswith("new plan")]
        if n:
            e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
            want = (e / e.sum(1, keepdims=True) - x.astype(np.float64).mean(1, keepdims=True)) * 3.25
            assert_close(y, want, np.float32, scale=4)
    assert compiled == [1, 1, 1, 0, 1, 0], compiled
    assert any("size.0 = 2 (met at size.0 = 6): code of its own at this size (its general kernel keeps a "
               "number that differs here" in r for r in why[(2, 2)]), why[(2, 2)]


def test_an_unrolled_recurrence_compiles_its_step_once():
    """A gated RNN written out step by step, as kiln's ONNX importer unrolls RNN, GRU and LSTM:
    each step's gate kernel reads its own slice of the input projection, so the steps' gate
    kernels differ in offsets only. The first steps compile their own (a plan's few kernels of
    one form keep their own code); from the fourth on one kernel with run-time sizes serves every
    step. Before, 24 steps compiled 24 gate kernels; the results are the same."""
    dev = open_test_device()
    rng = np.random.default_rng(5)
    steps, batch, width = 24, 2, 8
    x = rng.standard_normal((steps, batch, width)).astype(np.float32)
    w = (rng.standard_normal((width, 2 * width)) * 0.3).astype(np.float32)
    xp = kiln.tensor(x, device=dev) * 2.0
    wt = kiln.tensor(w, device=dev)
    h = kiln.zeros((batch, width), np.float32, device=dev)
    hs = []
    for t in range(steps):
        hw = h @ wt  # read through two slices: a buffer of its own
        h = kiln.tanh(xp[t] + hw[:, :width]) * kiln.sigmoid(hw[:, width:])
        hs.append(h)
    got = [np.asarray(v) for v in kiln.realize(*hs)]
    stats = dev.last_stats()
    want, hv = [], np.zeros((batch, width))
    for t in range(steps):
        hw = hv @ w.astype(np.float64)
        hv = np.tanh(2.0 * x[t].astype(np.float64) + hw[:, :width]) / (1 + np.exp(-hw[:, width:]))
        want.append(hv)
    for g, e in zip(got, want):
        assert_close(g, e, np.float32, scale=8)
    assert stats.kernels >= 2 * steps, stats.kernels
    assert stats.compiled <= 8, (stats.compiled, stats.recompiles)
    assert any("run-time sizes from now on" in r for r in stats.recompiles), stats.recompiles
