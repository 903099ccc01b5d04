"""`.kg` graph files (docs/graph-format.md) called on tensors, and the text of `kiln dump`'s
stages for a graph or for pending tensors."""
import collections
import ctypes
import os

import numpy as np

from . import _dtypes
from ._capi import OwnsHandle, check, lib, string, take_string
from ._device import device_of
from ._ops import tensor
from ._tensor import Tensor, new


class GraphInput(collections.namedtuple("GraphInput", "name dtype shape")):
    """An input a graph declares: its name (no '%'), numpy dtype and shape, and `symbols`: per
    axis, its size symbol ("b" for `?b` in `.kg`, an ONNX input's dim_param) or "" for a fixed
    size. A call may bind a tensor of any size at a symbol's axis; `shape` holds the size the file
    declares there (an ONNX model's: 1, or the first size it reads at, docs/onnx.md)."""

    def __new__(cls, name, dtype, shape, symbols=None):
        self = super().__new__(cls, name, dtype, shape)
        self.symbols = tuple(symbols) if symbols is not None else ("",) * len(shape)
        return self

STAGES = ("graph", "groups", "kernels", "analyze", "source")


class Graph(OwnsHandle):
    """A `.kg` graph, read once: call it on tensors like an op (from any thread), or dump it.

        g = kiln.Graph.load("examples/mlp.kg")
        outs = g(x=x, W1=w1, ...)        # {"y": Tensor}, recorded, not run
        print(g.dump("groups", why=True))
    """

    __slots__ = ("_h", "path", "inputs", "outputs")
    _pickle_advice = "load it again from its file"

    def __init__(self, path):
        """Reads the .kg file at `path`; its errors say FILE:LINE:COL and what was expected."""
        self._h = None
        self.path = os.fspath(path)
        h = ctypes.c_void_p()
        check(lib.kiln_graph_load(string(path, "path"), ctypes.byref(h)))
        self._adopt(h)

    @classmethod
    def load(cls, path):
        return cls(path)

    @classmethod
    def parse(cls, text, filename=None):
        """A graph from .kg text; `filename` names it in error messages."""
        g = object.__new__(cls)
        g._h = None
        g.path = filename
        h = ctypes.c_void_p()
        check(lib.kiln_graph_parse(string(text, "text"), None if filename is None else string(filename, "filename"),
                                   ctypes.byref(h)))
        g._adopt(h)
        return g

    @classmethod
    def _owning(cls, h, name):
        """A Graph that owns `h`, a graph handle from the C API (kiln_graph_trace's), shown as
        `name`."""
        g = object.__new__(cls)
        g._h = None
        g.path = name
        g._adopt(h)
        return g

    def _adopt(self, h):
        self._h = h
        n_in, n_out = ctypes.c_int32(), ctypes.c_int32()
        check(lib.kiln_graph_counts(h, ctypes.byref(n_in), ctypes.byref(n_out)))
        inputs = []
        for i in range(n_in.value):
            name, code, rank = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_int32()
            check(lib.kiln_graph_input(h, i, ctypes.byref(name), ctypes.byref(code), ctypes.byref(rank)))
            dims = (ctypes.c_int64 * rank.value)()
            check(lib.kiln_graph_input_shape(h, i, dims, rank.value))
            symbols = []
            for axis in range(rank.value):
                symbol = ctypes.c_char_p()
                check(lib.kiln_graph_input_symbol(h, i, axis, ctypes.byref(symbol)))
                symbols.append(symbol.value.decode())
            inputs.append(GraphInput(name.value.decode(), _dtypes.NUMPY[code.value], tuple(dims), symbols))
        outputs = []
        for i in range(n_out.value):
            name = ctypes.c_char_p()
            check(lib.kiln_graph_output(h, i, ctypes.byref(name)))
            outputs.append(name.value.decode())
        self.inputs, self.outputs = inputs, outputs

    def __del__(self, _release=lib.kiln_graph_release):
        h = getattr(self, "_h", None)
        if h:
            _release(h)

    def __repr__(self):
        ins = ", ".join(f"%{i.name}: {_dtypes_str(i.dtype)}[{', '.join(_axis(d, s) for d, s in zip(i.shape, i.symbols))}]"
                        for i in self.inputs)
        return f"<kiln.Graph {self.path or '(text)'} ({ins}) -> {', '.join('%' + o for o in self.outputs)}>"

    def __call__(self, *args, device=None, **kwargs):
        """The outputs, {name: Tensor} in the graph's order, recorded over the inputs: given in
        declaration order, or by name (kwargs, or one dict). Tensors are bound as they are (their
        dtype and shape must be the declared ones); arrays and lists are copied in as the
        declared dtype. Nothing runs until the outputs are realized."""
        if len(args) == 1 and isinstance(args[0], collections.abc.Mapping) and not kwargs:
            kwargs, args = dict(args[0]), ()
        if args and kwargs:
            raise TypeError("give the graph's inputs in order or by name, not both")
        if device is None:
            given = list(args) + list(kwargs.values())
            device = next((t.device for t in given if isinstance(t, Tensor)), None)
        dev = device_of(device)
        by_name = {i.name: i for i in self.inputs}
        if kwargs:
            names = [n[1:] if n.startswith("%") else n for n in kwargs]
            values = list(kwargs.values())
        else:
            names, values = [i.name for i in self.inputs[:len(args)]], list(args)
            if len(args) != len(self.inputs):
                raise TypeError(f"the graph takes {len(self.inputs)} inputs "
                                f"({', '.join('%' + i.name for i in self.inputs) or 'none'}), {len(args)} given")
        for n, v in zip(names, values):
            if v is None:  # np.asarray would make it a 0-d NaN (or object) array
                raise TypeError(f"input %{n}: expected a Tensor or an array, got None")
        tensors = [v if isinstance(v, Tensor) else
                   tensor(np.asarray(v, dtype=_input_dtype(by_name, n, v)), device=dev) for n, v in zip(names, values)]
        c_names = (ctypes.c_char_p * len(names))(*(string(n, "an input name") for n in names))
        handles = (ctypes.c_void_p * len(tensors))(*(t._h.value for t in tensors))
        outs = (ctypes.c_void_p * len(self.outputs))()
        check(lib.kiln_graph_call(dev._h, self._h, c_names, handles, len(tensors), outs, len(self.outputs)))
        return {name: new(ctypes.c_void_p(outs[i]), dev) for i, name in enumerate(self.outputs)}

    def dump(self, stage="groups", why=False, device=None):
        """What realizing the graph's outputs runs on `device`, as `kiln dump --stage STAGE` shows
        it: "graph", "groups" (with `why`, the reason for each kernel boundary), "kernels",
        "analyze" or "source" (the generated LLVM IR, CUDA C or GLSL)."""
        dev = device_of(device)
        out = ctypes.c_void_p()
        check(lib.kiln_graph_dump(dev._h, self._h, string(stage, "stage"), 1 if why else 0, ctypes.byref(out)))
        return take_string(out)


def _axis(size, symbol):
    """An axis as the repr shows it: its size, or `?symbol=size` for a size symbol's."""
    return f"?{symbol}={size}" if symbol else str(size)


def _dtypes_str(dtype):
    return dtype.name if dtype is _dtypes.bfloat16 else str(dtype)


def _input_dtype(by_name, name, value):
    """The dtype an array-like for input `name` is copied in as: the declared one (an unknown name
    is left to kiln, whose message lists the inputs)."""
    declared = by_name.get(name)
    if declared is None or declared.dtype is _dtypes.bfloat16:
        return None
    return declared.dtype


def run_graph(graph, inputs=(), device=None):
    """Runs a .kg graph (a path or a kiln.Graph) on `inputs` (by name in a dict, or in order)
    and returns its outputs, realized together, as {name: Tensor}."""
    g = graph if isinstance(graph, Graph) else Graph(graph)
    outs = g(inputs, device=device) if isinstance(inputs, collections.abc.Mapping) else g(*inputs, device=device)
    if outs:
        from ._ops import realize
        realize(list(outs.values()))
    return outs


def dump(what, stage="groups", why=False, device=None):
    """The text of a `kiln dump` stage ("graph", "groups", "kernels", "analyze", "source") for a
    .kg graph (a path or a kiln.Graph, planned on `device`) or for what realizing tensors (one, or
    a list) would compute now; nothing is realized."""
    if isinstance(what, Graph):
        return what.dump(stage, why, device)
    if isinstance(what, (str, os.PathLike)):
        return Graph(what).dump(stage, why, device)
    tensors = [what] if isinstance(what, Tensor) else list(what)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"dump takes a .kg path, a kiln.Graph or kiln.Tensors, not {type(t).__name__}")
    handles = (ctypes.c_void_p * len(tensors))(*(t._h.value for t in tensors))
    out = ctypes.c_void_p()
    check(lib.kiln_dump(handles, len(tensors), string(stage, "stage"), 1 if why else 0, ctypes.byref(out)))
    return take_string(out)
