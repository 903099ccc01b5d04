"""libkiln.so through ctypes: the C API (include/kiln/kiln_c.h) with its prototypes declared once,
and kiln's statuses turned into Python exceptions carrying kiln's message.

ctypes releases the GIL around every call into libkiln, so Python threads record, realize and
copy at the same time, as the C API allows (docs/python.md, "Threads")."""
import ctypes
import os

import numpy as _np

from ctypes import POINTER, byref, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t, c_void_p

ABI_VERSION = 1  # KILN_C_ABI_VERSION this package speaks


class OwnsHandle:
    """A Python object that owns one C handle (a tensor, device or graph): a copy is the object
    itself, never a second owner that would release the handle twice; pickling says why it
    cannot (`_pickle_advice`)."""

    __slots__ = ()
    _pickle_advice = ""

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError(f"a kiln.{type(self).__name__} cannot be pickled: {self._pickle_advice}")


class Error(Exception):
    """A kiln failure: the message is kiln's (what failed and why); `status` is the C API's
    status name ("KILN_ERROR_INVALID_OPERATION", ...)."""

    status = "KILN_ERROR"


class InvalidArgumentError(Error, ValueError):
    """A bad argument: a shape, a dtype, a size, an option, a graph input."""

    status = "KILN_ERROR_INVALID_ARGUMENT"


class InvalidOperationError(Error, ValueError):
    """An op on dtypes or shapes it does not accept (the message names the op and its operands)."""

    status = "KILN_ERROR_INVALID_OPERATION"


class DeviceError(Error, RuntimeError):
    """Opening a device, compiling or running failed, or memory ran out."""

    status = "KILN_ERROR_DEVICE"


class UnsupportedError(Error, TypeError):
    """A DLPack tensor kiln cannot take: its device, dtype or layout."""

    status = "KILN_ERROR_UNSUPPORTED"


for _cls in (Error, InvalidArgumentError, InvalidOperationError, DeviceError, UnsupportedError):
    _cls.__module__ = "kiln"  # raised as kiln.InvalidOperationError, ...

_ERRORS = {1: InvalidArgumentError, 2: InvalidOperationError, 3: DeviceError, 4: UnsupportedError}


def _load():
    """libkiln.so: $KILN_LIBRARY, else the one this package was built or installed with
    (_location.py, written by CMake), else the dynamic loader's search path."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = []
    if os.environ.get("KILN_LIBRARY"):
        candidates.append(os.environ["KILN_LIBRARY"])
    else:
        try:
            from . import _location
            path = _location.LIBRARY
            candidates.append(path if os.path.isabs(path) else os.path.normpath(os.path.join(here, path)))
        except ImportError:
            pass
        candidates.append("libkiln.so.0")
    tried = []
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("kiln: cannot load libkiln.so; tried " + "; ".join(tried) +
                      ". Set KILN_LIBRARY to its path, or install kiln with `cmake --install build`.")


lib = _load()

_T = c_void_p           # every opaque handle
_OUT = POINTER(c_void_p)
_I64S = POINTER(c_int64)

# name: (restype, argtypes). Every other kiln_* function used is an op, declared below.
_PROTOTYPES = {
    "kiln_version": (c_char_p, []),
    "kiln_abi_version": (c_int, []),
    "kiln_last_error": (c_char_p, []),
    "kiln_dtype_size": (c_size_t, [c_int]),
    "kiln_options_create": (c_int, [_OUT]),
    "kiln_options_release": (None, [_T]),
    "kiln_options_set": (c_int, [_T, c_char_p, c_char_p]),
    "kiln_options_use_config": (c_int, [_T, c_char_p]),
    "kiln_device_open": (c_int, [c_char_p, _T, _OUT]),
    "kiln_device_release": (None, [_T]),
    "kiln_device_last_stats": (c_int, [_T, c_void_p]),
    "kiln_tensor_from_host": (c_int, [_T, c_int, _I64S, c_int32, c_void_p, c_size_t, _OUT]),
    "kiln_full": (c_int, [_T, c_int, _I64S, c_int32, c_double, _OUT]),
    "kiln_arange": (c_int, [_T, c_int64, c_int64, c_int64, c_int, _OUT]),
    "kiln_tensor_release": (None, [_T]),
    "kiln_tensor_dtype": (c_int, [_T, POINTER(c_int)]),
    "kiln_tensor_rank": (c_int, [_T, POINTER(c_int32)]),
    "kiln_tensor_shape": (c_int, [_T, _I64S, c_int32]),
    "kiln_tensor_realize": (c_int, [_T]),
    "kiln_tensor_mark_dynamic": (c_int, [_T, c_int64, c_char_p]),
    "kiln_device_last_dynamic_kernels": (c_int, [_T, POINTER(c_int32)]),
    "kiln_device_last_donated": (c_int, [_T, POINTER(c_int32)]),
    "kiln_device_last_plan_source": (c_int, [_T, POINTER(c_char_p)]),
    "kiln_device_last_recompiles": (c_int, [_T, c_char_p, c_size_t, POINTER(c_size_t)]),
    "kiln_realize": (c_int, [POINTER(c_void_p), c_size_t]),
    "kiln_tensor_to_host": (c_int, [_T, c_void_p, c_size_t]),
    "kiln_tensor_from_dlpack": (c_int, [_T, c_void_p, _OUT]),
    "kiln_tensor_to_dlpack": (c_int, [_T, _OUT]),
    "kiln_add_scalar": (c_int, [_T, c_double, _OUT]),
    "kiln_sub_scalar": (c_int, [_T, c_double, _OUT]),
    "kiln_rsub_scalar": (c_int, [_T, c_double, _OUT]),
    "kiln_mul_scalar": (c_int, [_T, c_double, _OUT]),
    "kiln_div_scalar": (c_int, [_T, c_double, _OUT]),
    "kiln_rdiv_scalar": (c_int, [_T, c_double, _OUT]),
    "kiln_cast": (c_int, [_T, c_int, _OUT]),
    "kiln_argmax": (c_int, [_T, c_int64, c_int, _OUT]),
    "kiln_argmin": (c_int, [_T, c_int64, c_int, _OUT]),
    "kiln_reshape": (c_int, [_T, _I64S, c_int32, _OUT]),
    "kiln_permute": (c_int, [_T, _I64S, c_int32, _OUT]),
    "kiln_transpose": (c_int, [_T, _OUT]),
    "kiln_expand": (c_int, [_T, _I64S, c_int32, _OUT]),
    "kiln_slice": (c_int, [_T, c_int64, c_int, c_int64, c_int, c_int64, c_int64, _OUT]),
    "kiln_pad": (c_int, [_T, _I64S, _I64S, c_int32, c_double, _OUT]),
    "kiln_flip": (c_int, [_T, _I64S, c_int32, _OUT]),
    "kiln_roll": (c_int, [_T, _I64S, _I64S, c_int32, _OUT]),
    "kiln_unfold": (c_int, [_T, c_int64, c_int64, c_int64, _OUT]),
    "kiln_concat": (c_int, [POINTER(c_void_p), c_int32, c_int64, _OUT]),
    "kiln_matmul": (c_int, [_T, _T, _OUT]),
    "kiln_gather": (c_int, [_T, _T, c_int64, _OUT]),
    "kiln_gather_elements": (c_int, [_T, _T, c_int64, _OUT]),
    "kiln_scatter_elements": (c_int, [_T, _T, _T, c_int64, c_char_p, _OUT]),
    "kiln_cumsum": (c_int, [_T, c_int64, c_int, c_int, _OUT]),
    "kiln_topk": (c_int, [_T, c_int64, c_int64, c_int, c_int, _OUT, _OUT]),
    "kiln_clip": (c_int, [_T, c_void_p, c_void_p, _OUT]),
    "kiln_trilu": (c_int, [_T, c_int64, c_int, _OUT]),
    "kiln_resize": (c_int, [_T, _I64S, c_int32, c_char_p, c_char_p, c_char_p, _OUT]),
    "kiln_softmax": (c_int, [_T, c_int64, _OUT]),
    "kiln_log_softmax": (c_int, [_T, c_int64, _OUT]),
    "kiln_layernorm": (c_int, [_T, _T, _T, c_int64, c_double, _OUT]),
    "kiln_attention": (c_int, [_T, _T, _T, c_int, c_int, c_double, _OUT]),
    "kiln_dlpack_capsule_destructor": (None, [c_void_p]),
    "kiln_graph_load": (c_int, [c_char_p, _OUT]),
    "kiln_graph_parse": (c_int, [c_char_p, c_char_p, _OUT]),
    "kiln_graph_trace": (c_int, [POINTER(c_void_p), c_int32, POINTER(c_void_p), c_int32, _OUT]),
    "kiln_graph_release": (None, [_T]),
    "kiln_graph_counts": (c_int, [_T, POINTER(c_int32), POINTER(c_int32)]),
    "kiln_graph_input": (c_int, [_T, c_int32, POINTER(c_char_p), POINTER(c_int), POINTER(c_int32)]),
    "kiln_graph_input_shape": (c_int, [_T, c_int32, _I64S, c_int32]),
    "kiln_graph_input_symbol": (c_int, [_T, c_int32, c_int32, POINTER(c_char_p)]),
    "kiln_graph_output": (c_int, [_T, c_int32, POINTER(c_char_p)]),
    "kiln_graph_call": (c_int, [_T, _T, POINTER(c_char_p), POINTER(c_void_p), c_int32, POINTER(c_void_p), c_int32]),
    "kiln_graph_dump": (c_int, [_T, _T, c_char_p, c_int, _OUT]),
    "kiln_dump": (c_int, [POINTER(c_void_p), c_size_t, c_char_p, c_int, _OUT]),
    "kiln_string_release": (None, [c_void_p]),
}
for _name in ("sum", "mean", "max", "min", "prod"):
    _PROTOTYPES[f"kiln_{_name}"] = (c_int, [_T, _I64S, c_int32, c_int, _OUT])

# The elementwise rows of kiln/ops.def (its `api` column); tests/python/test_ops.py checks that
# these are all of them.
UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "recip", "sin", "cos", "tanh", "sigmoid", "relu",
         "gelu", "erf", "floor", "ceil", "sign", "logical_not")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or")
TERNARY = ("where",)
for _name in UNARY:
    _PROTOTYPES[f"kiln_{_name}"] = (c_int, [_T, _OUT])
for _name in BINARY:
    _PROTOTYPES[f"kiln_{_name}"] = (c_int, [_T, _T, _OUT])
for _name in TERNARY:
    _PROTOTYPES[f"kiln_{_name}"] = (c_int, [_T, _T, _T, _OUT])

for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes

if lib.kiln_abi_version() != ABI_VERSION:
    raise ImportError(f"kiln: libkiln.so ({lib._name}) has C ABI version {lib.kiln_abi_version()}; "
                      f"this package speaks version {ABI_VERSION}")

_last_error = lib.kiln_last_error


def error(status):
    """The exception for a failed call's `status`, with this thread's last message."""
    message = (_last_error() or b"").decode("utf-8", "replace")
    return _ERRORS.get(status, Error)(message)


def check(status):
    if status:
        raise error(status)


def int64s(values, what):
    """A C array of int64 from Python integers (numpy integers too), each checked to fit."""
    out = (c_int64 * len(values))()
    for i, v in enumerate(values):
        try:
            v = v.__index__()
        except (AttributeError, TypeError):
            raise TypeError(f"{what} must be integers, not {type(v).__name__} ({v!r})") from None
        if not -(1 << 63) <= v < (1 << 63):
            raise OverflowError(f"{what}: {v} does not fit in 64 bits")
        out[i] = v
    return out


_INT64_MIN, _INT64_END = -(1 << 63), 1 << 63


def int64(value, what):
    """One integer argument of a C function (an axis, k, a size, a step) as a Python int that fits
    int64: a Python or numpy integer. Anything else (a float, even 1.0; None; a str; a tuple; a
    bool, as numpy refuses for an axis) raises TypeError naming `what`, and an integer past 64
    bits OverflowError, before ctypes could wrap it or raise its own ArgumentError."""
    if type(value) is int and _INT64_MIN <= value < _INT64_END:  # the common case, kept short
        return value
    if isinstance(value, (bool, _np.bool_)):
        raise TypeError(f"{what} must be an integer, not bool ({value!r})")
    try:
        v = value.__index__()
    except (AttributeError, TypeError):
        raise TypeError(f"{what} must be an integer, not {type(value).__name__} ({value!r})") from None
    if not _INT64_MIN <= v < _INT64_END:
        raise OverflowError(f"{what}: {v} does not fit in 64 bits")
    return v


def string(text, what):
    """UTF-8 bytes for a C string argument (str or bytes, no NUL inside)."""
    if isinstance(text, os.PathLike):
        text = os.fspath(text)
    if isinstance(text, str):
        text = text.encode("utf-8")
    if not isinstance(text, bytes):
        raise TypeError(f"{what} must be a str, not {type(text).__name__}")
    if b"\0" in text:
        raise ValueError(f"{what} holds a NUL character")
    return text


def take_string(pointer):
    """The text of a char* that kiln handed out, released afterwards."""
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        lib.kiln_string_release(pointer)


__all__ = ["lib", "check", "error", "int64", "int64s", "string", "take_string", "byref", "Error",
           "InvalidArgumentError", "InvalidOperationError", "DeviceError", "UnsupportedError",
           "UNARY", "BINARY", "TERNARY"]
