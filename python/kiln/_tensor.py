"""kiln.Tensor: a handle to a lazy kiln tensor (kiln_tensor), its operators and methods.

Every operation records one C API op and returns a new Tensor at once; nothing runs until a
result is needed (realize(), numpy(), np.asarray(), DLPack), when kiln fuses, compiles and runs
what was recorded. The per-op path is kept short: one ctypes call through a prototype declared
once, one small object with __slots__ (docs/python.md, "Overhead")."""
import builtins
import ctypes
import math
import numbers
import operator

import numpy as np

from . import _dtypes
from ._capi import InvalidOperationError, OwnsHandle, check, error, int64, int64s, lib, string
from ._device import device_of
from ._dlpack import Exported, KDL_CPU, export_capsule

_pyslice = builtins.slice
_c_void_p = ctypes.c_void_p
_byref = ctypes.byref
_NUMPY = _dtypes.NUMPY
# The C functions of the operators, bound once.
_release = lib.kiln_tensor_release
_add, _add_scalar = lib.kiln_add, lib.kiln_add_scalar
_sub, _sub_scalar, _rsub_scalar = lib.kiln_sub, lib.kiln_sub_scalar, lib.kiln_rsub_scalar
_mul, _mul_scalar = lib.kiln_mul, lib.kiln_mul_scalar
_div, _div_scalar, _rdiv_scalar = lib.kiln_div, lib.kiln_div_scalar, lib.kiln_rdiv_scalar
_floor = lib.kiln_floor
_object_new = object.__new__


def new(handle, device):
    """A Tensor owning `handle` (a c_void_p from the C API)."""
    t = object.__new__(Tensor)
    t._h = handle
    t._dev = device
    return t


def unary(fn, x):
    out = _c_void_p()
    status = fn(x._h, _byref(out))
    if status:
        raise error(status)
    t = _object_new(Tensor)  # new(), inlined: this is the per-op path
    t._h, t._dev = out, x._dev
    return t


def is_scalar(v):
    return isinstance(v, (numbers.Real, np.bool_))


# Integers up to 2**53 in magnitude are exact as a C double, the type of kiln_full's value and of
# the C API's scalar ops; a larger one may not be (2**53 + 1 is not).
_EXACT = 1 << 53


def _is_big_int(value):
    """Whether `value` is an integer (a Python or numpy one) past what a double holds exactly."""
    return isinstance(value, numbers.Integral) and not -_EXACT <= value <= _EXACT


def exact_integer(value, code):
    """`value`, an integer, as a Python int that the integer dtype `code` holds: OverflowError if
    it does not fit that dtype at all."""
    v = operator.index(value)
    info = np.iinfo(_NUMPY[code])
    if not info.min <= v <= info.max:
        raise OverflowError(f"{v} does not fit in {_NUMPY[code]}")
    return v


def check_scalar(v, code):
    """A scalar meeting a tensor takes the tensor's dtype `code` (kiln does not promote). For an
    integer dtype: OverflowError past its range, as numpy's, and InvalidOperationError for a
    fraction, NaN or infinity, which the dtype cannot hold; for bool, InvalidOperationError for
    anything but 0 and 1. Other dtypes take any number."""
    advice = "kiln does not promote: cast the tensor first (t.astype(np.float32))"
    if code == _dtypes.BOOL:
        if isinstance(v, (bool, np.bool_)) or v == 0 or v == 1:
            return
        raise InvalidOperationError(f"scalar {v!r} is not a bool value (0 or 1); {advice}")
    if not _dtypes.is_integer(code):
        return
    name = np.dtype(_NUMPY[code]).name
    if isinstance(v, numbers.Integral):
        exact_integer(v, code)
        return
    f = float(v)
    if not math.isfinite(f) or f != math.trunc(f):
        raise InvalidOperationError(f"scalar {v!r} is not representable in {name}; {advice}")
    info = np.iinfo(_NUMPY[code])
    if not info.min <= f <= info.max:
        raise OverflowError(f"{v!r} does not fit in {name}")


def from_host(device, code, a):
    """A tensor of kiln dtype `code` holding a copy of the C-contiguous numpy array `a`."""
    out = _c_void_p()
    check(lib.kiln_tensor_from_host(device._h, code, int64s(a.shape, "shape"), a.ndim,
                                    a.ctypes.data if a.size else None, a.nbytes, _byref(out)))
    return new(out, device)


def full_code(device, shape, value, code):
    shape = tuple(shape)
    if isinstance(value, numbers.Integral) and _dtypes.is_integer(code):
        exact_integer(value, code)  # OverflowError past the dtype, as numpy's
    if _is_big_int(value) and _dtypes.is_integer(code):
        # Past 2**53 a double would round the value (kiln_full takes one): the exact value comes
        # from host bytes, a 0-d tensor, added to zeros of `shape` (kiln_full checks the shape).
        v = exact_integer(value, code)
        if float(v) != v:
            exact = from_host(device, code, np.array(v, _NUMPY[code]))
            return binary(_add, full_code(device, shape, 0, code), exact) if shape else exact
        value = v
    out = _c_void_p()
    check(lib.kiln_full(device._h, code, int64s(shape, "shape"), len(shape), float(value), _byref(out)))
    return new(out, device)


def operand(v, like):
    """`v` as a Tensor next to the tensor `like`: a Python or numpy scalar, a list or a numpy
    array takes the dtype of `like` (as kiln's scalars do) and lives on its device."""
    if isinstance(v, Tensor):
        return v
    code = like._code
    if is_scalar(v):
        check_scalar(v, code)
        return full_code(like._dev, (), v, code)
    if isinstance(v, (str, bytes)) or v is None:
        raise TypeError(f"{type(v).__name__} is not a tensor operand")
    if _dtypes.is_integer(code):
        v = _integer_operand(v, code)
    from ._ops import tensor
    return tensor(v, _dtypes.bfloat16 if code == _dtypes.BF16 else _NUMPY[code], like._dev)


def _integer_operand(v, code):
    """A list or array operand of an integer tensor, held by its dtype as a scalar would be:
    values past the dtype raise OverflowError and fractions or NaN InvalidOperationError, where
    a conversion would wrap or truncate them silently."""
    a = np.asarray(v)
    if a.size == 0 or a.dtype.kind not in "iuf":
        return a
    want = _NUMPY[code]
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.trunc(a))
        if bad.any():
            raise InvalidOperationError(
                f"operand value {a[bad].flat[0]!r} is not representable in {np.dtype(want).name}")
    info = np.iinfo(want)
    lo, hi = a.min(), a.max()
    if lo < info.min or hi > info.max:
        raise OverflowError(f"operand value {lo if lo < info.min else hi!r} does not fit in "
                            f"{np.dtype(want).name}")
    return a


def binary(fn, a, b):
    """fn(a, b), one of them a Tensor, the other a Tensor, a scalar or an array-like."""
    if type(a) is not Tensor:
        if not isinstance(b, Tensor):
            raise TypeError(f"kiln ops take a kiln.Tensor operand, not {type(a).__name__} and {type(b).__name__}")
        a = operand(a, b)
    elif type(b) is not Tensor:
        b = operand(b, a)
    out = _c_void_p()
    status = fn(a._h, b._h, _byref(out))
    if status:
        raise error(status)
    t = _object_new(Tensor)
    t._h, t._dev = out, a._dev
    return t


def _scalar_op(fn, scalar_fn, x, v, _lo=-_EXACT, _hi=_EXACT):
    """x (a Tensor) with v: a Python float, or an int that a double holds exactly, goes to the C
    API's scalar form of the op; anything else (a larger int too, exact as a 0-d tensor of x's
    dtype, full_code) to the op on two tensors. An int past an integer x's dtype is an
    OverflowError."""
    if is_scalar(v):
        check_scalar(v, x._code)
    if type(v) is float or (type(v) is int and _lo <= v <= _hi):
        out = _c_void_p()
        status = scalar_fn(x._h, v, _byref(out))
        if status:
            raise error(status)
        t = _object_new(Tensor)
        t._h, t._dev = out, x._dev
        return t
    return binary(fn, x, v)


def _rscalar_op(fn, scalar_fn, x, v, _lo=-_EXACT, _hi=_EXACT):
    """v with x (a Tensor), the operands swapped: `scalar_fn` is the C API's reversed scalar form
    (rsub, rdiv), `fn` the op on two tensors."""
    if type(v) is float or (type(v) is int and _lo <= v <= _hi):
        return _scalar_op(None, scalar_fn, x, v)
    return binary(fn, v, x)


def axes_of(axis):
    if axis is None:
        return ()
    if isinstance(axis, (tuple, list)):
        return tuple(axis)
    return (axis,)


def _shape_args(shape):
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return shape


def _reduce(fn, x, axis, keepdims):
    axes = axes_of(axis)
    if not axes and axis is not None:
        # axis=() or []: numpy reduces over no axis and gives the input back. The C API's empty
        # list means every axis: an op of a 0-d tensor of x's dtype is recorded only to check
        # that dtype (x itself may have an empty axis, which max and min cannot reduce).
        probe, out = full_code(x._dev, (), 0, x._code), _c_void_p()
        check(fn(probe._h, int64s((), "axis"), 0, 1 if keepdims else 0, _byref(out)))
        new(out, x._dev)
        return x
    out = _c_void_p()
    check(fn(x._h, int64s(axes, "axis"), len(axes), 1 if keepdims else 0, _byref(out)))
    return new(out, x._dev)


def _with_list(fn, x, values, what):
    values = tuple(values)
    out = _c_void_p()
    check(fn(x._h, int64s(values, what), len(values), _byref(out)))
    return new(out, x._dev)


def dtype_name(dtype):
    return dtype.name if dtype is _dtypes.bfloat16 else str(dtype)


class Tensor(OwnsHandle):
    """A lazy kiln tensor. Make one with kiln.tensor(), kiln.from_dlpack(), kiln.full() or
    kiln.arange(), or as the result of an op; it keeps its device alive."""

    __slots__ = ("_h", "_dev")
    _pickle_advice = "take its values with .numpy()"
    __array_ufunc__ = None  # numpy defers to kiln's operators: ndarray + Tensor is a Tensor

    def __init__(self, *args, **kwargs):
        raise TypeError("make tensors with kiln.tensor(), kiln.from_dlpack(), kiln.full() or kiln.arange()")

    def __del__(self):
        try:
            h = self._h
        except AttributeError:  # __init__ refused to make it
            return
        _release(h)


    # ---- what it is -------------------------------------------------------------------------
    @property
    def device(self):
        return self._dev

    @property
    def _code(self):
        """Its dtype as the C API's kiln_dtype value."""
        d = ctypes.c_int()
        check(lib.kiln_tensor_dtype(self._h, _byref(d)))
        return d.value

    @property
    def dtype(self):
        """A numpy dtype (kiln.bfloat16 for bf16)."""
        return _NUMPY[self._code]

    @property
    def shape(self):
        rank = ctypes.c_int32()
        check(lib.kiln_tensor_rank(self._h, _byref(rank)))
        dims = (ctypes.c_int64 * rank.value)()
        check(lib.kiln_tensor_shape(self._h, dims, rank.value))
        return tuple(dims)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for e in self.shape:
            n *= e
        return n

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __repr__(self):
        return f"<kiln.Tensor {dtype_name(self.dtype)}{list(self.shape)} on {self._dev.name}>"

    def __str__(self):
        return str(self._values())

    def __format__(self, spec):
        # A 0-d tensor formats as its value (f"{loss:.4f}"), as numpy's 0-d arrays do.
        if not spec:
            return str(self)
        if self.ndim == 0:
            return format(self.item(), spec)
        raise TypeError(f"unsupported format string {spec!r} for a kiln.Tensor of shape "
                        f"{self.shape}: format its .item() or its values")

    def __hash__(self):
        return id(self)

    # ---- running it and reading it ----------------------------------------------------------
    def mark_dynamic(self, axis, name=None):
        """Marks `axis` dynamic (docs/dynamic-shapes.md): where this tensor is an input of a realize,
        the kernels take that size at run time, so the same computation at another size of the
        axis compiles nothing new. `name` names the size symbol in dumps. Returns self."""
        axis = int64(axis, "mark_dynamic: axis")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"mark_dynamic: name must be a str or None, not {type(name).__name__} ({name!r})")
        check(lib.kiln_tensor_mark_dynamic(self._h, axis, string(name, "mark_dynamic: name") if name else None))
        return self

    def realize(self):
        """Runs what this tensor depends on (once: later ops read the result). Returns self."""
        check(lib.kiln_tensor_realize(self._h))
        return self

    def numpy(self):
        """The result as a read-only numpy array over kiln's buffer (no copy); np.array(t) copies."""
        return self.__array__()

    def __array__(self, dtype=None, copy=None):
        code = self._code
        if code == _dtypes.BF16:
            raise TypeError("numpy has no bfloat16: convert with t.astype(np.float32) first, or hand the "
                            "tensor to torch with torch.from_dlpack(t)")
        a = np.from_dlpack(Exported(export_capsule(self._h, bool_as_uint8=True)))
        if code == _dtypes.BOOL:
            a = a.view(np.bool_)
        a.flags.writeable = False  # kiln's buffer, which later ops read
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return np.array(a) if copy else a

    def _bits(self):
        """The result's bits as a read-only numpy array over kiln's buffer, bf16 as uint16 (numpy
        has no bfloat16), bool as uint8."""
        a = np.from_dlpack(Exported(export_capsule(self._h, bool_as_uint8=True, bf16_as_uint16=True)))
        a.flags.writeable = False
        return a

    def __dlpack__(self, stream=None):
        """The DLPack protocol (numpy.from_dlpack, torch.from_dlpack): realizes the tensor and
        hands out its buffer without a copy."""
        if stream is not None and stream != -1:
            raise BufferError(f"kiln results live in host memory: no stream applies (got stream={stream!r})")
        return export_capsule(self._h)

    def __dlpack_device__(self):
        return (KDL_CPU, 0)

    def _values(self):
        """The values as numpy holds them: bf16 widened to float32 exactly (numpy has no
        bfloat16), every other dtype as numpy()."""
        if self._code == _dtypes.BF16:
            bits = self._bits()
            return (bits.astype(np.uint32).reshape(-1) << 16).view(np.float32).reshape(bits.shape)
        return self.numpy()

    def tolist(self):
        return self._values().tolist()

    def item(self):
        n = self.size
        if n != 1:
            raise ValueError(f"item() of a tensor of {n} elements: it takes exactly one")
        return self._values().reshape(()).item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        n = self.size
        if n != 1:
            raise ValueError(f"the truth value of a tensor of {n} elements is ambiguous; "
                             "compare, then look at .numpy().any() or .all()")
        return bool(self.item())

    def __iter__(self):
        n = len(self)
        return (self[i] for i in range(n))

    # ---- operators --------------------------------------------------------------------------
    def __add__(self, other):
        return _scalar_op(_add, _add_scalar, self, other)

    __radd__ = __add__

    def __sub__(self, other):
        return _scalar_op(_sub, _sub_scalar, self, other)

    def __rsub__(self, other):
        return _rscalar_op(_sub, _rsub_scalar, self, other)

    def __mul__(self, other):
        return _scalar_op(_mul, _mul_scalar, self, other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        self._check_true_division()
        return _scalar_op(_div, _div_scalar, self, other)

    def __rtruediv__(self, other):
        self._check_true_division()
        return _rscalar_op(_div, _rdiv_scalar, self, other)

    def _check_true_division(self):
        code = self._code
        if not _dtypes.is_float(code):
            raise TypeError(f"true division of {dtype_name(_NUMPY[code])} tensors: kiln divides integers by "
                            "floor division; use // (kiln.div), or .astype(np.float32) first")

    def __floordiv__(self, other):
        q = _scalar_op(_div, _div_scalar, self, other)
        return unary(_floor, q) if _dtypes.is_float(self._code) else q

    def __rfloordiv__(self, other):
        q = binary(_div, other, self)
        return unary(_floor, q) if _dtypes.is_float(self._code) else q

    def __pow__(self, other):
        return binary(lib.kiln_pow, self, other)

    def __rpow__(self, other):
        return binary(lib.kiln_pow, other, self)

    def __matmul__(self, other):
        return binary(lib.kiln_matmul, self, other)

    def __rmatmul__(self, other):
        return binary(lib.kiln_matmul, other, self)

    def __neg__(self):
        return unary(lib.kiln_neg, self)

    def __pos__(self):
        return self

    def __abs__(self):
        return unary(lib.kiln_abs, self)

    def __invert__(self):
        return unary(lib.kiln_logical_not, self)

    def __and__(self, other):
        return binary(lib.kiln_logical_and, self, other)

    __rand__ = __and__

    def __or__(self, other):
        return binary(lib.kiln_logical_or, self, other)

    __ror__ = __or__

    def __eq__(self, other):
        if other is None or isinstance(other, (str, bytes)):
            return NotImplemented  # `t == None` is False, as for any object, not an error
        return binary(lib.kiln_eq, self, other)

    def __ne__(self, other):
        if other is None or isinstance(other, (str, bytes)):
            return NotImplemented
        return binary(lib.kiln_ne, self, other)

    def __lt__(self, other):
        return binary(lib.kiln_lt, self, other)

    def __le__(self, other):
        return binary(lib.kiln_le, self, other)

    def __gt__(self, other):
        return binary(lib.kiln_gt, self, other)

    def __ge__(self, other):
        return binary(lib.kiln_ge, self, other)

    def __getitem__(self, key):
        return _getitem(self, key)

    def __setitem__(self, key, value):
        raise TypeError("kiln tensors are immutable values: make a new one (kiln.where, kiln.pad, kiln.concat)")

    # ---- reductions (axis: None for all, an int or a tuple; numpy's keepdims) ---------------
    def sum(self, axis=None, keepdims=False):
        return _reduce(lib.kiln_sum, self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _reduce(lib.kiln_mean, self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _reduce(lib.kiln_max, self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _reduce(lib.kiln_min, self, axis, keepdims)

    def prod(self, axis=None, keepdims=False):
        return _reduce(lib.kiln_prod, self, axis, keepdims)

    def argmax(self, axis=None, keepdims=False):
        """The index (int32) of the first maximum along `axis`; None: of the flattened tensor
        (with keepdims, of shape (1,) * ndim, as numpy's)."""
        return self._arg_reduce(lib.kiln_argmax, "argmax", axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        return self._arg_reduce(lib.kiln_argmin, "argmin", axis, keepdims)

    def _arg_reduce(self, fn, name, axis, keepdims):
        x = self
        if axis is None:
            x, axis = self.reshape(-1), 0
        else:
            axis = int64(axis, f"{name}: axis")
        out = _c_void_p()
        check(fn(x._h, axis, 1 if keepdims else 0, _byref(out)))
        result = new(out, x._dev)
        if keepdims and x is not self:  # numpy's: every axis kept, of extent 1
            result = result.reshape((1,) * self.ndim)
        return result

    # ---- views (free: index expressions of the loads that read them) ------------------------
    def reshape(self, *shape):
        """One extent may be -1."""
        return _with_list(lib.kiln_reshape, self, _shape_args(shape), "shape")

    def permute(self, *dims):
        return _with_list(lib.kiln_permute, self, _shape_args(dims), "dims")

    def transpose(self, *axes):
        """numpy's: without axes it reverses them; else it permutes to `axes`.
        (kiln.transpose(x) swaps the last two, as x.mT does.)"""
        axes = _shape_args(axes)
        return self.permute(axes if axes else tuple(range(self.ndim))[::-1])

    @property
    def T(self):
        return self.permute(tuple(range(self.ndim))[::-1])

    @property
    def mT(self):
        """The last two axes swapped."""
        return unary(lib.kiln_transpose, self)

    def expand(self, *shape):
        """Broadcast to `shape` (numpy's broadcast_to rules)."""
        return _with_list(lib.kiln_expand, self, _shape_args(shape), "shape")

    broadcast_to = expand

    def flip(self, axis=None):
        """Reverses `axis` (None: every axis)."""
        return _with_list(lib.kiln_flip, self, tuple(range(self.ndim)) if axis is None else axes_of(axis), "axis")

    def roll(self, shift, axis):
        shifts, axes = axes_of(shift), axes_of(axis)
        if len(shifts) != len(axes):
            raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
        out = _c_void_p()
        check(lib.kiln_roll(self._h, int64s(shifts, "shift"), int64s(axes, "axis"), len(axes), _byref(out)))
        return new(out, self._dev)

    def pad(self, before, after, value=0.0):
        """Pads axis i with before[i] elements of `value` ahead and after[i] behind; the widths
        are non-negative (kiln refuses a negative one: crop with slicing, t[1:-1])."""
        before, after = tuple(before), tuple(after)
        if len(before) != len(after):
            raise ValueError(f"pad: {len(before)} extents before and {len(after)} after")
        c_before, c_after = int64s(before, "before"), int64s(after, "after")
        exact = None
        if isinstance(value, numbers.Integral) and _dtypes.is_integer(self._code):
            exact_integer(value, self._code)
        if _is_big_int(value):
            code = self._code
            if _dtypes.is_integer(code):
                v = exact_integer(value, code)
                if float(v) != v:  # kiln_pad's value is a double, which would round it
                    exact, value = full_code(self._dev, (), v, code), 0
        out = _c_void_p()
        check(lib.kiln_pad(self._h, c_before, c_after, len(before), float(value), _byref(out)))
        padded = new(out, self._dev)
        if exact is None:
            return padded
        # The value exactly: where a padded mask of x's shape is false, the 0-d exact value.
        mask = full_code(self._dev, self.shape, True, _dtypes.BOOL).pad(before, after, False)
        out = _c_void_p()
        check(lib.kiln_where(mask._h, padded._h, exact._h, _byref(out)))
        return new(out, self._dev)

    def unfold(self, dim, size, step):
        """Windows of `size` elements every `step` along `dim`, as a new last axis (torch's unfold)."""
        out = _c_void_p()
        check(lib.kiln_unfold(self._h, int64(dim, "unfold: dim"), int64(size, "unfold: size"),
                              int64(step, "unfold: step"), _byref(out)))
        return new(out, self._dev)

    def slice(self, axis, start=None, stop=None, step=1):
        """self[start:stop:step] along `axis` (Python's slice rules)."""
        return _slice(self, axis, _pyslice(start, stop, step))

    # ---- conversions and composites ---------------------------------------------------------
    def astype(self, dtype):
        """The tensor converted to `dtype` (a numpy dtype, kiln.bfloat16 or a kiln name: "f32")."""
        out = _c_void_p()
        check(lib.kiln_cast(self._h, _dtypes.code(dtype), _byref(out)))
        return new(out, self._dev)

    cast = astype

    def cumsum(self, axis=None, exclusive=False, reverse=False):
        """The running sum along `axis` (numpy's cumsum; None: of the flattened tensor). exclusive:
        each element sums only the ones before it; reverse: the sums run from the end."""
        x = self
        if axis is None:
            x, axis = self.reshape(-1), 0
        axis = int64(axis, "cumsum: axis")
        out = _c_void_p()
        check(lib.kiln_cumsum(x._h, axis, 1 if exclusive else 0, 1 if reverse else 0, _byref(out)))
        return new(out, self._dev)

    def topk(self, k, axis=-1, largest=True, sorted=True):
        """(values, indices) of the k largest (or smallest) elements along `axis`, best first
        (torch.topk, ONNX TopK); indices are int64, equal values keep ascending index order and NaN
        ranks above every number."""
        values, indices = _c_void_p(), _c_void_p()
        check(lib.kiln_topk(self._h, int64(k, "topk: k"), int64(axis, "topk: axis"), 1 if largest else 0,
                            1 if sorted else 0, _byref(values), _byref(indices)))
        return new(values, self._dev), new(indices, self._dev)

    def softmax(self, axis=-1):
        out = _c_void_p()
        check(lib.kiln_softmax(self._h, int64(axis, "softmax: axis"), _byref(out)))
        return new(out, self._dev)

    def log_softmax(self, axis=-1):
        out = _c_void_p()
        check(lib.kiln_log_softmax(self._h, int64(axis, "log_softmax: axis"), _byref(out)))
        return new(out, self._dev)


def _slice(x, axis, s):
    if s.step == 0:
        raise ValueError("slice step cannot be zero")
    start, stop, step = (None if v is None else int64s((v,), "a slice bound")[0] for v in (s.start, s.stop, s.step))
    axis = int64(axis, "slice: axis")
    out = _c_void_p()
    check(lib.kiln_slice(x._h, axis, start is not None, start or 0, stop is not None, stop or 0,
                         1 if step is None else step, _byref(out)))
    return new(out, x._dev)


def _is_int_index(k):
    return isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_))


def _getitem(x, key):
    """numpy's basic indexing: integers, slices, None (a new axis of extent 1) and one Ellipsis."""
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if not (k is None or k is Ellipsis or isinstance(k, _pyslice) or _is_int_index(k)):
            raise TypeError(f"kiln tensors are indexed by integers, slices, None and ..., not "
                            f"{type(k).__name__}; select elements with kiln.where")
    shape = x.shape
    if builtins.sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(k is not None and k is not Ellipsis for k in key)
    if used > len(shape):
        raise IndexError(f"too many indices for a tensor of {len(shape)} dimensions: {used} were indexed")
    if any(k is Ellipsis for k in key):
        at = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:at] + (_pyslice(None),) * (len(shape) - used) + key[at + 1:]
    else:
        key = key + (_pyslice(None),) * (len(shape) - used)
    kept, axis = [], 0  # each result axis: the input axis it keeps, or None for a new one
    for k in key:
        if k is None:
            kept.append(None)
            continue
        if isinstance(k, _pyslice):
            if k != _pyslice(None):
                x = _slice(x, axis, k)
            kept.append(axis)
        else:
            extent = shape[axis]
            i = k.__index__()
            if not -extent <= i < extent:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {extent}")
            i += extent if i < 0 else 0
            x = _slice(x, axis, _pyslice(i, i + 1))
        axis += 1
    sliced = x.shape
    result = tuple(1 if a is None else sliced[a] for a in kept)
    return x if result == sliced else x.reshape(result)
