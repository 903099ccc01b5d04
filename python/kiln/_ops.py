"""kiln's functions: making tensors, and every op of the C API as a function (numpy's names where
numpy has the op). Each records the op and returns a lazy Tensor (kiln/_tensor.py)."""
import builtins
import ctypes
import numbers

import numpy as np

from . import _dtypes
from ._capi import BINARY, UNARY, check, int64, int64s, lib
from ._device import device_of
from ._dlpack import import_object
from ._tensor import Tensor, binary, from_host, full_code, new, operand, unary

_c_void_p = ctypes.c_void_p
_byref = ctypes.byref


def _tensor_arg(x, what="x"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{what} must be a kiln.Tensor, not {type(x).__name__} (kiln.tensor() makes one)")
    return x


def _handles(tensors, what):
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        _tensor_arg(t, f"{what}[{i}]")
    return tensors, (_c_void_p * len(tensors))(*(t._h.value for t in tensors))


# ---- making tensors ---------------------------------------------------------------------------

def tensor(data, dtype=None, device=None):
    """A tensor holding a copy of `data`: a numpy array, or anything np.asarray takes, or a kiln
    Tensor of any dtype (bf16 too), copied onto `device`, by default the tensor's own. `dtype`
    converts it first. kiln.from_dlpack shares memory instead of copying."""
    if isinstance(data, Tensor):
        dev = data._dev if device is None else device_of(device)
        code = None if dtype is None else _dtypes.code(dtype)
        if data._code == _dtypes.BF16:  # numpy has no bfloat16: its bits, or exactly as float32
            if code is None or code == _dtypes.BF16:
                return from_host(dev, _dtypes.BF16, np.ascontiguousarray(data._bits()))
            data = data.astype(np.float32)
    else:
        dev = device_of(device)
        code = None if dtype is None else _dtypes.code(dtype)
    if code == _dtypes.BF16:
        return tensor(data, np.float32, dev).astype(_dtypes.bfloat16)
    a = np.asarray(data)
    if a.dtype.kind not in "biuf":  # numbers only: no complex, strings or objects, converted or not
        raise TypeError(f"kiln has no {a.dtype} dtype (kiln's: {_dtypes.SUPPORTED})")
    if code is not None:
        a = np.asarray(a, dtype=_dtypes.NUMPY[code])
    if a.dtype.byteorder not in "=|":
        a = a.astype(a.dtype.newbyteorder("="))
    if code is None:
        code = _dtypes.code(a.dtype)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return from_host(dev, code, a)


def from_dlpack(x, device=None):
    """A tensor over the memory of a DLPack producer (a numpy array, a torch CPU tensor, ...),
    without a copy when it is compact and aligned. kiln reads that memory when a realize runs:
    the producer must not change it meanwhile. Other strides are copied at once."""
    dev = device_of(device)
    if isinstance(x, np.ndarray) and x.dtype == np.bool_:
        try:
            return new(import_object(dev._h, x), dev)
        except BufferError:  # numpy < 1.25 exports no bool: read its bytes in place as uint8
            return new(import_object(dev._h, x.view(np.uint8)), dev).astype(np.bool_)
    return new(import_object(dev._h, x), dev)


def full(shape, value, dtype=np.float32, device=None):
    """A tensor of `shape` filled with `value` (a constant of the graph: no memory until used)."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    return full_code(device_of(device), shape, value, _dtypes.code(dtype))


def zeros(shape, dtype=np.float32, device=None):
    return full(shape, 0.0, dtype, device)


def ones(shape, dtype=np.float32, device=None):
    return full(shape, 1.0, dtype, device)


def arange(start, stop=None, step=1, dtype=np.int32, device=None):
    """[start, stop) by `step` (integers), of an integer or float dtype; arange(n) is [0, n)."""
    if stop is None:
        start, stop = 0, start
    dev = device_of(device)
    a = int64s((start, stop, step), "arange's start, stop and step")
    out = _c_void_p()
    check(lib.kiln_arange(dev._h, a[0], a[1], a[2], _dtypes.code(dtype), _byref(out)))
    return new(out, dev)


def realize(*tensors):
    """Realizes tensors of one device in one request (one plan: values they share are computed
    once). Returns the tensor, or the tuple of them."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    tensors, handles = _handles(tensors, "tensors")
    check(lib.kiln_realize(handles, len(tensors)))
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


# ---- elementwise: one function per row of kiln/ops.def ----------------------------------------

def _make_unary(name):
    fn = getattr(lib, "kiln_" + name)

    def op(x):
        return unary(fn, _tensor_arg(x))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name} (its meaning: docs/graph-format.md)."
    return op


def _make_binary(name):
    fn = getattr(lib, "kiln_" + name)

    def op(a, b):
        return binary(fn, a, b)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"Elementwise {name}, broadcasting like numpy; a scalar or array operand takes the dtype "
                  "of the tensor operand (kiln does not promote dtypes).")
    return op


ELEMENTWISE = {name: _make_unary(name) for name in UNARY}
ELEMENTWISE.update({name: _make_binary(name) for name in BINARY})
globals().update(ELEMENTWISE)
for _name in UNARY:  # t.exp(), t.relu(), ... as methods too
    setattr(Tensor, _name, ELEMENTWISE[_name])


def where(cond, a, b):
    """a where `cond` (bool) holds, else b, broadcasting like numpy; one of a and b may be a
    scalar or an array, taking the other's dtype."""
    cond = _tensor_arg(cond, "cond")
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    if like is None:
        raise TypeError("where needs a kiln.Tensor for a or b")
    a, b = operand(a, like), operand(b, like)
    out = _c_void_p()
    check(lib.kiln_where(cond._h, a._h, b._h, _byref(out)))
    return new(out, like._dev)


def cast(x, dtype):
    return _tensor_arg(x).astype(dtype)


# ---- reductions, views, composites: the methods of Tensor as functions -----------------------

def sum(x, axis=None, keepdims=False):  # numpy's names, shadowing the builtins here only
    return _tensor_arg(x).sum(axis, keepdims)


def mean(x, axis=None, keepdims=False):
    return _tensor_arg(x).mean(axis, keepdims)


def max(x, axis=None, keepdims=False):
    return _tensor_arg(x).max(axis, keepdims)


def min(x, axis=None, keepdims=False):
    return _tensor_arg(x).min(axis, keepdims)


def prod(x, axis=None, keepdims=False):
    return _tensor_arg(x).prod(axis, keepdims)


def argmax(x, axis=None, keepdims=False):
    return _tensor_arg(x).argmax(axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    return _tensor_arg(x).argmin(axis, keepdims)


def reshape(x, shape):
    return _tensor_arg(x).reshape(shape)


def permute(x, dims):
    return _tensor_arg(x).permute(dims)


def transpose(x, axes=None):
    """Without axes, the last two swapped (kiln's transpose, x.mT); with axes, x permuted."""
    x = _tensor_arg(x)
    return x.mT if axes is None else x.permute(axes)


def expand(x, shape):
    return _tensor_arg(x).expand(shape)


broadcast_to = expand


def slice(x, axis, start=None, stop=None, step=1):
    """x[start:stop:step] along `axis` (Python's slice rules)."""
    return _tensor_arg(x).slice(axis, start, stop, step)


def pad(x, before, after, value=0.0):
    return _tensor_arg(x).pad(before, after, value)


def flip(x, axis=None):
    return _tensor_arg(x).flip(axis)


def roll(x, shift, axis):
    return _tensor_arg(x).roll(shift, axis)


def unfold(x, dim, size, step):
    return _tensor_arg(x).unfold(dim, size, step)


def concat(xs, axis=0):
    """The tensors joined along `axis`."""
    xs, handles = _handles(xs, "xs")
    out = _c_void_p()
    check(lib.kiln_concat(handles, len(xs), int64(axis, "concat: axis"), _byref(out)))
    return new(out, xs[0]._dev)


concatenate = concat


def matmul(a, b):
    """numpy's matmul (1-D operands promoted, batch axes broadcast)."""
    return binary(lib.kiln_matmul, a, b)


def _indices(indices, x):
    """`indices` as an index tensor on x's device: a kiln Tensor as it is, else integers (int32
    arrays stay int32, other integer arrays become int64)."""
    if isinstance(indices, Tensor):
        return indices
    a = np.asarray(indices)
    if a.size == 0 and a.dtype.kind == "f":  # [] (numpy's default float64 for an empty list)
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, not {a.dtype}")
    if a.dtype == np.uint64:
        # Past int64 an index is out of range on every axis: kept so (int64's largest), where a
        # cast would wrap 2**63 to -2**63, an index from the end.
        a = np.minimum(a, np.uint64(np.iinfo(np.int64).max))
    return tensor(a if a.dtype == np.int32 else a.astype(np.int64), device=x._dev)


def _indexed(fn, name, x, indices, axis):
    x = _tensor_arg(x)
    axis = int64(axis, f"{name}: axis")
    idx = _indices(indices, x)
    out = _c_void_p()
    check(fn(x._h, idx._h, axis, _byref(out)))
    return new(out, x._dev)


def gather(x, indices, axis=0):
    """numpy's take along `axis` (ONNX Gather): the result's shape is x.shape[:axis] +
    indices.shape + x.shape[axis+1:]. An index i < 0 reads i + n, then indices are clamped into
    [0, n) (numpy's mode="clip" after wrapping negatives once; numpy's default raises instead)."""
    return _indexed(lib.kiln_gather, "gather", x, indices, axis)


def gather_elements(x, indices, axis=0):
    """numpy's take_along_axis (ONNX GatherElements, torch.gather): indices have x's rank, and
    the result their shape. Out-of-range indices are wrapped once and clamped, as in gather."""
    return _indexed(lib.kiln_gather_elements, "gather_elements", x, indices, axis)


def cumsum(x, axis=None, exclusive=False, reverse=False):
    """numpy's cumsum (axis None: of the flattened tensor), with ONNX CumSum's exclusive and reverse."""
    return _tensor_arg(x).cumsum(axis, exclusive, reverse)


def topk(x, k, axis=-1, largest=True, sorted=True):
    """torch.topk / ONNX TopK: (values, indices) of the k largest (or smallest) elements along
    `axis`, best first; indices are int64. Equal values keep ascending index order; NaN ranks
    above every number. The result is always sorted (sorted=False is accepted)."""
    return _tensor_arg(x).topk(k, axis, largest, sorted)


def clip(x, min=None, max=None):
    """numpy's clip (ONNX Clip): minimum(maximum(x, min), max), a bound of None not applied. A
    NaN in x or a bound gives NaN; min > max gives max; scalar bounds take x's dtype."""
    x = _tensor_arg(x)
    lo = None if min is None else operand(min, x)
    hi = None if max is None else operand(max, x)
    out = ctypes.c_void_p()
    check(lib.kiln_clip(x._h, None if lo is None else lo._h, None if hi is None else hi._h,
                        ctypes.byref(out)))
    return new(out, x._dev)


def trilu(x, k=0, upper=True):
    """ONNX Trilu: the upper (numpy triu) or lower (numpy tril) triangle of the last two axes
    relative to diagonal k, zeros elsewhere. One primitive, fused like an elementwise op."""
    x = _tensor_arg(x)
    out = ctypes.c_void_p()
    check(lib.kiln_trilu(x._h, int64(k, "trilu: k"), 1 if upper else 0, ctypes.byref(out)))
    return new(out, x._dev)


def triu(x, k=0):
    """numpy's triu: x[..., i, j] where j - i >= k, zeros elsewhere."""
    return trilu(x, k, True)


def tril(x, k=0):
    """numpy's tril: x[..., i, j] where j - i <= k, zeros elsewhere."""
    return trilu(x, k, False)


def resize(x, size, mode="nearest", coordinate_transformation_mode="half_pixel",
           nearest_mode="round_prefer_floor"):
    """x resampled to `size` (one entry per axis), as ONNX Resize with sizes: mode "nearest",
    "linear" (n-linear) or "cubic"; coordinate_transformation_mode and nearest_mode take ONNX's
    names. torch.nn.functional.interpolate's nearest is (mode="nearest",
    coordinate_transformation_mode="asymmetric", nearest_mode="floor"), its nearest-exact
    ("nearest", "half_pixel", "round_prefer_ceil"), its (bi)linear ("linear", "pytorch_half_pixel",
    or "align_corners" for align_corners=True). One resize op of kiln's op table per axis, which
    fuses with its neighbours like a view."""
    x = _tensor_arg(x)
    size = tuple(size)
    out = ctypes.c_void_p()
    check(lib.kiln_resize(x._h, int64s(size, "resize: size"), len(size), str(mode).encode(),
                          str(coordinate_transformation_mode).encode(), str(nearest_mode).encode(),
                          ctypes.byref(out)))
    return new(out, x._dev)


def scatter_elements(x, indices, updates, axis=0, reduction="none"):
    """ONNX ScatterElements (numpy's put_along_axis for reduction "none", torch's scatter /
    scatter_reduce): a copy of x with updates[p] written at p with p[axis] = indices[p] ("none"),
    or combined with the element there ("add", "mul", "max", "min"). indices and updates have one
    shape and x's rank. An index i < 0 means i + n, once; an index still out of range drops its
    update; with "none" the last of duplicate indices along the axis wins."""
    x = _tensor_arg(x)
    axis = int64(axis, "scatter_elements: axis")
    idx = _indices(indices, x)
    upd = updates if isinstance(updates, Tensor) else tensor(np.asarray(updates, dtype=x.dtype), device=x._dev)
    out = _c_void_p()
    check(lib.kiln_scatter_elements(x._h, idx._h, upd._h, axis, str(reduction).encode(), _byref(out)))
    return new(out, x._dev)


def softmax(x, axis=-1):
    return _tensor_arg(x).softmax(axis)


def log_softmax(x, axis=-1):
    return _tensor_arg(x).log_softmax(axis)


def layernorm(x, gamma, beta, axis=-1, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * gamma + beta over `axis`."""
    x = _tensor_arg(x)
    gamma, beta = operand(gamma, x), operand(beta, x)
    out = _c_void_p()
    check(lib.kiln_layernorm(x._h, gamma._h, beta._h, int64(axis, "layernorm: axis"), builtins.float(eps),
                             _byref(out)))
    return new(out, x._dev)


def attention(q, k, v, causal=False, scale=None):
    """softmax(q @ k^T * scale, with a causal mask if asked) @ v; scale: 1/sqrt(head dimension)
    by default."""
    q, k, v = _tensor_arg(q, "q"), _tensor_arg(k, "k"), _tensor_arg(v, "v")
    out = _c_void_p()
    check(lib.kiln_attention(q._h, k._h, v._h, 1 if causal else 0, scale is not None,
                             0.0 if scale is None else builtins.float(scale), _byref(out)))
    return new(out, q._dev)


__all__ = ["tensor", "from_dlpack", "full", "zeros", "ones", "arange", "realize", "where", "cast", "sum", "mean",
           "max", "min", "prod", "argmax", "argmin", "reshape", "permute", "transpose", "expand", "broadcast_to",
           "slice", "pad", "flip", "roll", "unfold", "concat", "concatenate", "matmul", "cumsum", "topk", "gather", "scatter_elements",
           "gather_elements", "clip", "trilu", "triu", "tril", "resize", "softmax", "log_softmax",
           "layernorm", "attention"] + list(ELEMENTWISE)
