"""`.kg` graphs from Python: run_graph on files and inputs by name, Graph objects called like ops,
and the dump stages as text, for graphs and for pending tensors."""
import numpy as np
import pytest

import kiln
from conftest import assert_close, open_test_device

MLP = """kiln.graph v1
# a small MLP with two outputs
input %x : f32[4,8]
input %w : f32[8,16]
input %b : f32[16]
%h0 = matmul(%x, %w)
%h1 = add(%h0, %b)
%h = relu(%h1)
%p = softmax(%h, axis=-1)
%s = sum(%h, axes=[1])
output %p
output %s
"""

rng = np.random.default_rng(3)


def mlp_inputs():
    return {"x": rng.standard_normal((4, 8)).astype(np.float32), "w": rng.standard_normal((8, 16)).astype(np.float32),
            "b": rng.standard_normal(16).astype(np.float32)}


def mlp_numpy(x, w, b):
    h = np.maximum(x.astype(np.float64) @ w + b, 0)
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True), h.sum(1)


def test_run_graph_on_a_file(tmp_path):
    path = tmp_path / "mlp.kg"
    path.write_text(MLP)
    ins = mlp_inputs()
    outs = kiln.run_graph(str(path), ins)
    assert list(outs) == ["p", "s"]
    p, s = mlp_numpy(**ins)
    assert_close(outs["p"], p, np.float32)
    assert_close(outs["s"], s, np.float32, scale=10)
    assert kiln.default_device().last_stats().kernels >= 1
    # Inputs in declaration order, and as kiln tensors (a Path works as well as a str).
    outs = kiln.run_graph(path, [kiln.tensor(ins["x"]), ins["w"], ins["b"]])
    assert_close(outs["p"], p, np.float32)


def test_a_graph_is_called_like_an_op_any_number_of_times():
    g = kiln.Graph.parse(MLP, "mlp.kg")
    assert [tuple(i) for i in g.inputs] == [("x", np.float32, (4, 8)), ("w", np.float32, (8, 16)),
                                             ("b", np.float32, (16,))]
    assert g.outputs == ["p", "s"]
    assert "%x: float32[4, 8]" in repr(g)
    d = open_test_device()
    for _ in range(3):
        ins = mlp_inputs()
        outs = g(device=d, **{k: kiln.tensor(v, device=d) for k, v in ins.items()})
        y = outs["p"] * 2 + 1  # the outputs are lazy tensors like any other
        p, _ = mlp_numpy(**ins)
        assert_close(y, p * 2 + 1, np.float32)
    assert d.last_stats().plan_cache_hit  # the same graph each time: one plan
    assert d.last_stats().compiled == 0


def test_graph_input_errors_say_what_the_graph_expects():
    g = kiln.Graph.parse(MLP, "mlp.kg")
    ins = mlp_inputs()
    with pytest.raises(kiln.InvalidArgumentError, match=r"the graph has no input %y \(its inputs: %x: f32\[4,8\]"):
        g(y=ins["x"], w=ins["w"], b=ins["b"])
    # An extra name is named too, not only counted ("takes 3 inputs, 4 given").
    with pytest.raises(kiln.InvalidArgumentError, match=r"the graph has no input %z \(its inputs: %x"):
        g(x=ins["x"], w=ins["w"], b=ins["b"], z=ins["x"])
    with pytest.raises(kiln.InvalidArgumentError,
                       match=r"input %x is declared f32\[4,8\], the tensor bound to it is f64\[4,8\]"):
        g(kiln.tensor(ins["x"].astype(np.float64)), ins["w"], ins["b"])
    with pytest.raises(kiln.InvalidArgumentError, match=r"input %w is declared f32\[8,16\].*f32\[16,8\]"):
        g(ins["x"], ins["w"].T, ins["b"])
    with pytest.raises(TypeError, match="the graph takes 3 inputs"):
        g(ins["x"])
    with pytest.raises(TypeError, match=r"input %x: expected a Tensor or an array, got None"):
        g(x=None, w=ins["w"], b=ins["b"])
    with pytest.raises(TypeError, match=r"input %b: expected a Tensor or an array, got None"):
        g(ins["x"], ins["w"], None)
    with pytest.raises(TypeError, match=r"input %w: expected a Tensor or an array, got None"):
        kiln.run_graph(g, {"x": ins["x"], "w": None, "b": ins["b"]})
    with pytest.raises(kiln.InvalidArgumentError, match=r"bad.kg:3:\d+: error"):
        kiln.Graph.parse("kiln.graph v1\ninput %x : f32[4]\n%y = nosuchop(%x)\noutput %y\n", "bad.kg")
    with pytest.raises(kiln.InvalidArgumentError, match="kiln_graph_load: .*no/such.kg"):
        kiln.run_graph("no/such.kg", {})


def test_dump_stages_of_a_graph(source_dir):
    g = kiln.Graph(f"{source_dir}/examples/layernorm.kg")
    groups = g.dump("groups", why=True)
    assert "kernel k0" in groups and "why (" in groups and "total:" in groups
    graph = kiln.dump(f"{source_dir}/examples/layernorm.kg", "graph")
    assert graph.startswith("kiln.graph v1") and "output %" in graph
    # The optimized graph is a .kg graph itself, with the same inputs.
    assert [i.name for i in kiln.Graph.parse(graph).inputs] == [i.name for i in g.inputs]
    kernels = g.dump("kernels")
    assert "kernel k0" in kernels and "param %0" in kernels
    source = g.dump("source")
    assert "define void @" in source and "parameters: %" in source
    assert g.dump("analyze").strip()
    with pytest.raises(kiln.InvalidArgumentError, match=r"unknown stage 'ptx' \(graph, groups, kernels, analyze, source\)"):
        g.dump("ptx")
    with pytest.raises(kiln.DeviceError, match="the reference device interprets graphs and builds no kernels"):
        g.dump("groups", device=open_test_device("reference"))


def test_dump_of_pending_tensors_runs_nothing():
    d = open_test_device()
    x = kiln.tensor(rng.standard_normal((8, 32)).astype(np.float32), device=d).realize()
    y = kiln.softmax(kiln.exp(x) * 2) + x
    before = d.last_stats()
    groups = kiln.dump(y, "groups", why=True)
    graph = kiln.dump([y, x.sum()], "graph")
    assert d.last_stats() == before  # no realize ran
    assert "kernel k0" in groups and "exp(" in groups
    assert graph.count("output %") == 2 and "input %" in graph
    xs = np.asarray(x)
    e = np.exp(xs.astype(np.float64)) * 2
    assert_close(y, np.exp(e - e.max(-1, keepdims=True)) / np.exp(e - e.max(-1, keepdims=True)).sum(-1, keepdims=True) + xs,
                 np.float32)
    with pytest.raises(TypeError, match="dump takes a .kg path, a kiln.Graph or kiln.Tensors"):
        kiln.dump([y, 3])


ONNX_DATA = "/usr/share/libonnx-testdata/data"


def _read_tensor_pb(path):
    """A float32 TensorProto with raw_data (as ONNX's test data stores it), read by hand: dims
    (field 1), data_type (2, must be 1 = FLOAT), raw_data (9)."""
    b = open(path, "rb").read()
    pos, dims, raw, dtype = 0, [], None, None

    def varint():
        nonlocal pos
        v, shift = 0, 0
        while True:
            byte = b[pos]
            pos += 1
            v |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return v

    while pos < len(b):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            v = varint()
            if field == 1:
                dims.append(v)
            elif field == 2:
                dtype = v
        elif wire == 2:
            n = varint()
            chunk, pos = b[pos:pos + n], pos + n
            if field == 9:
                raw = chunk
            elif field == 1:  # packed dims
                save, b2 = pos, b
                b, pos = chunk, 0
                while pos < len(b):
                    dims.append(varint())
                b, pos = b2, save
        else:
            raise AssertionError(f"unexpected wire type {wire} in {path}")
    assert dtype == 1 and raw is not None, path
    return np.frombuffer(raw, dtype=np.float32).reshape(dims)


@pytest.mark.parametrize("case", ["test_Conv2d", "test_Linear"])
def test_run_graph_on_an_onnx_model_with_initializers(case):
    import os
    d = f"{ONNX_DATA}/pytorch-converted/{case}"
    if not os.path.exists(f"{d}/model.onnx"):
        pytest.skip("libonnx-testdata is not installed")
    g = kiln.Graph(f"{d}/model.onnx")
    assert len(g.inputs) == 1, "the model's initializers are bound by the graph, not the caller"
    x = _read_tensor_pb(f"{d}/test_data_set_0/input_0.pb")
    want = _read_tensor_pb(f"{d}/test_data_set_0/output_0.pb")
    dev = open_test_device()
    outs = kiln.run_graph(g, {g.inputs[0].name: x}, device=dev)
    assert list(outs) == g.outputs
    got = np.asarray(outs[g.outputs[0]])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def _onnx_mlp(path, W, bias):
    """relu(x @ W + bias) as ONNX bytes, x declared [batch, K] (a dim_param), W and bias initializers."""
    def varint(v):
        out = b""
        while True:
            byte, v = v & 0x7F, v >> 7
            out += bytes([byte | 0x80 if v else byte])
            if not v:
                return out

    def num(field, v):
        return varint(field << 3) + varint(v)

    def msg(field, b):
        b = b.encode() if isinstance(b, str) else b
        return varint(field << 3 | 2) + varint(len(b)) + b

    def value_info(name, dims):
        shape = b"".join(msg(1, num(1, d) if isinstance(d, int) else msg(2, d)) for d in dims)
        return msg(1, name) + msg(2, msg(1, num(1, 1) + msg(2, shape)))

    def node(op, ins, outs):
        return b"".join(msg(1, i) for i in ins) + b"".join(msg(2, o) for o in outs) + msg(3, op.lower()) + msg(4, op)

    def tensor(name, a):
        return b"".join(num(1, d) for d in a.shape) + num(2, 1) + msg(8, name) + msg(9, a.astype(np.float32).tobytes())

    graph = b"".join(msg(1, n) for n in (node("MatMul", ["x", "W"], ["h"]), node("Add", ["h", "b"], ["z"]),
                                          node("Relu", ["z"], ["y"])))
    graph += msg(2, "mlp") + msg(5, tensor("W", W)) + msg(5, tensor("b", bias))
    graph += msg(11, value_info("x", ["batch", W.shape[0]])) + msg(12, value_info("y", ["batch", W.shape[1]]))
    path.write_bytes(num(1, 8) + msg(8, msg(1, "") + num(2, 17)) + msg(7, graph))


def test_symbolic_input_dimensions_are_named_and_serve_any_size(tmp_path):
    g = kiln.Graph.parse("kiln.graph v1\ninput %x : f32[?b=4,8]\ninput %w : f32[8]\n%y = mul(%x, %w)\noutput %y\n")
    assert g.inputs[0].symbols == ("b", "") and g.inputs[1].symbols == ("",)
    assert tuple(g.inputs[0]) == ("x", np.float32, (4, 8)), "a GraphInput is still a (name, dtype, shape) tuple"
    assert "%x: float32[?b=4, 8]" in repr(g)
    rng = np.random.default_rng(3)
    W, bias = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    _onnx_mlp(tmp_path / "mlp.onnx", W, bias)
    m = kiln.Graph(str(tmp_path / "mlp.onnx"))
    assert [tuple(i) for i in m.inputs] == [("x", np.float32, (1, 6))]
    assert m.inputs[0].symbols == ("batch", "")
    dev = open_test_device()
    for b in (3, 5, 9, 1):
        x = rng.standard_normal((b, 6)).astype(np.float32)
        got = np.asarray(kiln.run_graph(m, {"x": x}, device=dev)["y"])
        np.testing.assert_allclose(got, np.maximum(x @ W + bias, 0), rtol=1e-5, atol=1e-5)
