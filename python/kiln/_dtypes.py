"""kiln's dtypes as numpy dtypes (bf16, which numpy lacks, as kiln.bfloat16), and their C values."""
import numpy as np

F32, F64, F16, BF16, I32, I64, I8, U8, BOOL = range(9)  # enum kiln_dtype (kiln/kiln_c.h)


class _BFloat16:
    """kiln's bf16 (numpy has no bfloat16): a tensor's `dtype` when it holds bf16. Convert such a
    tensor with `.astype(np.float32)` before handing it to numpy; DLPack gives it to torch as is."""

    name = "bfloat16"
    kiln_name = "bf16"
    itemsize = 2

    def __repr__(self):
        return "kiln.bfloat16"

    def __reduce__(self):
        return "bfloat16"


bfloat16 = _BFloat16()

# Each kiln dtype's numpy dtype, by its C value.
NUMPY = {F32: np.dtype(np.float32), F64: np.dtype(np.float64), F16: np.dtype(np.float16),
         BF16: bfloat16, I32: np.dtype(np.int32), I64: np.dtype(np.int64), I8: np.dtype(np.int8),
         U8: np.dtype(np.uint8), BOOL: np.dtype(np.bool_)}
_FROM_NUMPY = {d: code for code, d in NUMPY.items() if d is not bfloat16}
_NAMES = {"f32": F32, "f64": F64, "f16": F16, "bf16": BF16, "bfloat16": BF16, "i32": I32, "i64": I64,
          "i8": I8, "u8": U8, "bool": BOOL}
SUPPORTED = "float32, float64, float16, kiln.bfloat16, int32, int64, int8, uint8, bool"


def code(dtype):
    """The C value of a dtype given as a numpy dtype (or anything np.dtype() takes: np.float32,
    "float32", float), kiln.bfloat16, or kiln's own name ("f32", "bf16", ...)."""
    if dtype is bfloat16:
        return BF16
    if isinstance(dtype, str) and dtype in _NAMES:
        return _NAMES[dtype]
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{dtype!r} is not a dtype (kiln's: {SUPPORTED})") from None
    try:
        return _FROM_NUMPY[d]
    except KeyError:
        raise TypeError(f"kiln has no {d} dtype (kiln's: {SUPPORTED})") from None


def is_float(c):
    return c in (F32, F64, F16, BF16)


def is_integer(c):
    return c in (I32, I64, I8, U8)
