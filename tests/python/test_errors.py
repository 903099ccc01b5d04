"""Errors: each raises a Python exception of the right class carrying kiln's message (what failed,
where, what was expected), and no input, however malformed, takes the interpreter down."""
import itertools
import math

import numpy as np
import pytest

import kiln
from conftest import open_test_device


def test_ops_on_operands_they_do_not_accept():
    a, b = kiln.tensor(np.ones(3, np.float32)), kiln.tensor(np.ones(4, np.float32))
    with pytest.raises(kiln.InvalidOperationError, match=r"kiln_add: .*\[3\].*\[4\]") as e:
        a + b
    assert isinstance(e.value, ValueError) and e.value.status == "KILN_ERROR_INVALID_OPERATION"
    with pytest.raises(kiln.InvalidOperationError, match="dtypes f32 and f64 do not match"):
        a + kiln.tensor(np.ones(3))
    with pytest.raises(kiln.InvalidOperationError, match="exp: needs a floating dtype, got i32"):
        kiln.exp(kiln.tensor(np.ones(3, np.int32)))
    with pytest.raises(kiln.InvalidOperationError, match=r"cannot reshape \[3\] \(3 elements\) into \[4\]"):
        a.reshape(4)
    with pytest.raises(kiln.InvalidOperationError, match=r"axis 5 is out of range for shape \[3\]"):
        a.sum(axis=5)
    with pytest.raises(kiln.InvalidOperationError, match="matmul"):
        kiln.tensor(np.ones((2, 3))) @ kiln.tensor(np.ones((2, 3)))
    with pytest.raises(kiln.InvalidOperationError, match="step must not be 0"):
        kiln.arange(0, 10, 0)
    with pytest.raises(kiln.InvalidOperationError, match=r"gather: indices must be i32 or i64, got f32\[3\]"):
        kiln.gather(a, a)
    with pytest.raises(kiln.InvalidOperationError, match=r"gather: axis 1 is out of range for shape \[3\]"):
        kiln.gather(a, [0], axis=1)
    with pytest.raises(kiln.InvalidOperationError,
                       match=r"gather_elements: indices \[2,2\] and data \[3\] differ in rank"):
        kiln.gather_elements(a, np.zeros((2, 2), np.int64))
    with pytest.raises(TypeError, match="indices must be integers, not float64"):
        kiln.gather(a, [0.5])
    with pytest.raises(kiln.InvalidOperationError, match="different devices"):
        a + kiln.tensor(np.ones(3, np.float32), device=open_test_device())


def test_bad_arguments():
    with pytest.raises(kiln.InvalidArgumentError, match="extent 0 of the shape is -1"):
        kiln.full((-1,), 1.0)
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        kiln.full((2 ** 70,), 1.0)
    with pytest.raises(TypeError, match="shape must be integers, not float"):
        kiln.full((2.5,), 1.0)
    with pytest.raises(TypeError, match="kiln has no complex64 dtype"):
        kiln.tensor(np.zeros(3, np.complex64))
    with pytest.raises(TypeError, match="kiln has no int16 dtype"):
        kiln.ones(3, dtype=np.int16)
    with pytest.raises(TypeError, match="true division of int32 tensors"):
        kiln.tensor(np.ones(3, np.int32)) / 2
    with pytest.raises(TypeError, match="device must be a kiln.Device"):
        kiln.tensor([1.0], device="cpu")
    with pytest.raises(TypeError, match="kiln.tensor"):
        kiln.Tensor()
    with pytest.raises(TypeError, match="immutable"):
        kiln.tensor([1.0])[0] = 2
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        kiln.tensor([1.0, 2.0])[::0]


def test_integer_arguments_are_checked_before_c():
    """Every integer argument (an axis, k, a size, a step) is an int or a numpy integer: anything
    else is a TypeError naming the argument, an integer past 64 bits an OverflowError (neither a
    ctypes.ArgumentError nor a value wrapped modulo 2**64)."""
    x = kiln.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    calls = {
        "softmax: axis": lambda v: x.softmax(v),
        "log_softmax: axis": lambda v: kiln.log_softmax(x, v),
        "argmax: axis": lambda v: x.argmax(v),
        "argmin: axis": lambda v: kiln.argmin(x, v),
        "cumsum: axis": lambda v: x.cumsum(v),
        "topk: k": lambda v: x.topk(v),
        "topk: axis": lambda v: kiln.topk(x, 1, v),
        "concat: axis": lambda v: kiln.concat([x, x], v),
        "gather: axis": lambda v: kiln.gather(x, [0], v),
        "gather_elements: axis": lambda v: kiln.gather_elements(x, [[0]], v),
        "scatter_elements: axis": lambda v: kiln.scatter_elements(x, [[0]], [[1.0]], v),
        "slice: axis": lambda v: kiln.slice(x, v, 0, 2),
        "unfold: dim": lambda v: x.unfold(v, 2, 1),
        "unfold: size": lambda v: x.unfold(1, v, 1),
        "unfold: step": lambda v: kiln.unfold(x, 1, 2, v),
        "trilu: k": lambda v: kiln.triu(x, v),
        "layernorm: axis": lambda v: kiln.layernorm(x, 1.0, 0.0, v),
        "mark_dynamic: axis": lambda v: kiln.tensor(np.ones(3)).mark_dynamic(v),
        "resize: size": lambda v: kiln.resize(x, (2, v)),
        "axis": lambda v: x.sum(axis=(0, v)),
        "shape": lambda v: x.reshape(v, 6),
    }
    for what, call in calls.items():
        for bad in (1.0, 1.9, np.float64(1.0), "0", None, (0, 1), True):
            if what in ("axis", "shape", "resize: size") and bad is True:
                continue  # lists of integers take bools as numpy's shapes do
            if bad is None and what in ("argmax: axis", "argmin: axis", "cumsum: axis"):
                continue  # None: of the flattened tensor
            with pytest.raises(TypeError, match=f"{what} must be (an integer|integers), not") as e:
                call(bad)
            assert not isinstance(e.value, kiln.Error), (what, bad)
        for big in (2 ** 64 + 1, 2 ** 63, -2 ** 63 - 1, 2 ** 100):
            with pytest.raises(OverflowError, match=f"{what}: {big} does not fit in 64 bits"):
                call(big)
    # numpy integers are integers
    assert x.softmax(np.int64(1)).shape == (2, 3) and x.topk(np.int32(2), np.int8(1))[0].shape == (2, 2)
    assert x.argmax(np.uint8(1)).shape == (2,) and kiln.concat([x, x], np.int64(0)).shape == (4, 3)
    with pytest.raises(TypeError, match=r"mark_dynamic: name must be a str or None, not int"):
        kiln.tensor(np.ones(3)).mark_dynamic(0, 5)
    with pytest.raises(TypeError, match=r"mark_dynamic: name must be a str or None, not bytes"):
        kiln.tensor(np.ones(3)).mark_dynamic(0, b"n")
    with pytest.raises(ValueError, match="NUL"):
        kiln.tensor(np.ones(3)).mark_dynamic(0, "a\0")
    assert kiln.tensor(np.ones(3)).mark_dynamic(np.int64(0), "n").shape == (3,)


def test_indexing_errors_are_numpy_s():
    t = kiln.tensor(np.ones((2, 3)))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 2"):
        t[5]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., 0, ...]
    with pytest.raises(TypeError, match="indexed by integers, slices, None and"):
        t[[0, 1]]
    with pytest.raises(TypeError, match="indexed by integers"):
        t[t > 0]


def test_device_and_option_errors():
    with pytest.raises(kiln.InvalidArgumentError, match=r"unknown key \(did you mean autotune.level\?\)"):
        kiln.Device("cpu", {"autotune.levle": "full"})
    with pytest.raises(kiln.InvalidArgumentError, match="minimal, balanced, extensive, full"):
        kiln.Device("cpu", {"autotune.level": "fast"})
    with pytest.raises(kiln.DeviceError, match="vulkan"):
        kiln.Device("vulkan:99")
    with pytest.raises(kiln.DeviceError, match="cpu"):
        kiln.Device("tpu")
    with pytest.raises(TypeError, match="options must be a mapping"):
        kiln.Device("cpu", ["threads", 1])


def test_running_out_of_memory_is_an_error():
    x = kiln.zeros((1 << 40,)) + 1  # 4 TiB
    with pytest.raises(kiln.DeviceError, match="cannot allocate 4398046511104 bytes"):
        x.realize()
    with pytest.raises(kiln.DeviceError):
        np.asarray(x)  # the failure is kept, not a crash on the second try
    assert float(kiln.ones(()) + 1) == 2.0  # the device still works


def test_errors_name_the_thread_s_own_failure():
    import threading
    messages = {}

    def fail(n):
        try:
            kiln.tensor(np.ones(n, np.float32)) + kiln.tensor(np.ones(n + 1, np.float32))
        except kiln.InvalidOperationError as e:
            messages[n] = str(e)

    threads = [threading.Thread(target=fail, args=(n,)) for n in range(2, 10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in range(2, 10):
        assert f"[{n}]" in messages[n] and f"[{n + 1}]" in messages[n], messages[n]


# Values no function should take, each of which must come back as a Python exception.
STRANGE = [None, "x", b"\0", -1, 2 ** 64, -2 ** 63 - 1, 1e300, math.nan, math.inf, (), (-5,), (1 << 40,) * 3,
           [1, [2]], object(), {"a": 1}, np.ones(2, np.complex128), np.array(["a"]), np.empty((0,)),
           slice(None), Ellipsis, lambda: 0, 3.5, True]


def call_quietly(fn, *args, **kwargs):
    """Runs fn; a result is fine, so is any ordinary exception: only a crash would fail."""
    try:
        r = fn(*args, **kwargs)
        if isinstance(r, kiln.Tensor) and r.size < 1 << 20:
            np.asarray(r)
    except Exception:
        pass


@pytest.mark.parametrize("name", ["tensor", "full", "zeros", "arange", "exp", "add", "where", "sum", "argmax",
                                  "reshape", "permute", "expand", "slice", "pad", "flip", "roll", "unfold",
                                  "concat", "matmul", "gather", "gather_elements", "scatter_elements", "resize", "softmax", "layernorm",
                                  "attention", "cast", "from_dlpack",
                                  "realize", "dump", "run_graph"])
def test_no_input_crashes(name):
    fn = getattr(kiln, name)
    t = kiln.tensor(np.arange(6.0).reshape(2, 3))
    for v in STRANGE:
        call_quietly(fn, v)
        call_quietly(fn, t, v)
        call_quietly(fn, v, t)
    for v, w in itertools.product(STRANGE[:12], repeat=2):
        call_quietly(fn, t, v, w)
    for v in STRANGE:
        call_quietly(t.__getitem__, v)
        call_quietly(t.__getitem__, (v, v))
        call_quietly(t.reshape, v)
        call_quietly(t.astype, v)
        call_quietly(lambda: t + v)
        call_quietly(lambda: v * t)
        call_quietly(lambda: t @ v)
        call_quietly(lambda: t > v)
        call_quietly(kiln.Device, v)
        call_quietly(kiln.Device, "cpu", {"threads": v})
        call_quietly(kiln.Graph.parse, v)
    # And the interpreter still computes.
    assert float((t * 2).sum()) == 30.0
