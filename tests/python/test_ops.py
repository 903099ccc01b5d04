"""Every op of the package against numpy, computed in float64 (and again in float32 and float16
for the elementwise ops), within each dtype's tolerance; the operators, indexing and the views;
and the op table: every elementwise row of kiln/ops.def is a function here."""
import math
import os
import re

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import kiln
from conftest import assert_close

rng = np.random.default_rng(17)
erf = np.vectorize(math.erf, otypes=[np.float64])


def data(shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name: (numpy in float64, the input's range)
UNARY = {
    "neg": (np.negative, (-2, 2)), "abs": (np.abs, (-2, 2)), "exp": (np.exp, (-2, 2)),
    "log": (np.log, (0.25, 4)), "sqrt": (np.sqrt, (0.25, 4)), "rsqrt": (lambda a: 1 / np.sqrt(a), (0.25, 4)),
    "recip": (lambda a: 1 / a, (0.25, 4)), "sin": (np.sin, (-4, 4)), "cos": (np.cos, (-4, 4)),
    "tanh": (np.tanh, (-3, 3)), "sigmoid": (lambda a: 1 / (1 + np.exp(-a)), (-4, 4)),
    "relu": (lambda a: np.maximum(a, 0), (-2, 2)),
    "gelu": (lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))), (-3, 3)),
    "erf": (erf, (-2, 2)), "floor": (np.floor, (-4, 4)), "ceil": (np.ceil, (-4, 4)), "sign": (np.sign, (-2, 2)),
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
FLOATS = [np.float64, np.float32, np.float16]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    ref, (low, high) = UNARY[name]
    a = data((3, 17), low, high).astype(dtype)
    got = getattr(kiln, name)(kiln.tensor(a))
    assert got.dtype == np.dtype(dtype) and got.shape == (3, 17)
    assert_close(got, ref(a.astype(np.float64)), dtype)
    assert_close(getattr(kiln.tensor(a), name)(), ref(a.astype(np.float64)), dtype)  # the method


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting(name, dtype):
    low = 0.25 if name == "pow" else -2.0
    a, b = data((4, 1, 5), low).astype(dtype), data((3, 1), low).astype(dtype)
    if name == "div":
        b = np.where(np.abs(b) < 0.25, 0.5, b).astype(dtype)
    got = getattr(kiln, name)(kiln.tensor(a), kiln.tensor(b))
    assert got.shape == (4, 3, 5)
    assert_close(got, BINARY[name](a.astype(np.float64), b.astype(np.float64)), dtype, scale=10)


@pytest.mark.parametrize("name", sorted(COMPARE))
def test_comparisons(name):
    a, b = rng.integers(-3, 3, (5, 6)).astype(np.float64), rng.integers(-3, 3, (6,)).astype(np.float64)
    got = getattr(kiln, name)(kiln.tensor(a), kiln.tensor(b))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(got), COMPARE[name](a, b))


def test_logical_ops_and_where():
    p, q = rng.random((4, 5)) < 0.5, rng.random((5,)) < 0.5
    tp, tq = kiln.tensor(p), kiln.tensor(q)
    np.testing.assert_array_equal(np.asarray(kiln.logical_and(tp, tq)), p & q)
    np.testing.assert_array_equal(np.asarray(kiln.logical_or(tp, tq)), p | q)
    np.testing.assert_array_equal(np.asarray(kiln.logical_not(tp)), ~p)
    np.testing.assert_array_equal(np.asarray(tp & tq), p & q)
    np.testing.assert_array_equal(np.asarray(tp | tq), p | q)
    np.testing.assert_array_equal(np.asarray(~tp), ~p)
    a, b = data((4, 5)), data((4, 1))
    assert_close(kiln.where(tp, kiln.tensor(a), kiln.tensor(b)), np.where(p, a, b))
    assert_close(kiln.where(tp, kiln.tensor(a), 0.5), np.where(p, a, 0.5))  # a scalar takes a's dtype


def test_integer_ops():
    a, b = rng.integers(-50, 50, (6, 7)).astype(np.int32), rng.integers(1, 9, (7,)).astype(np.int32)
    ta, tb = kiln.tensor(a), kiln.tensor(b)
    np.testing.assert_array_equal(np.asarray(ta + tb), a + b)
    np.testing.assert_array_equal(np.asarray(ta * 3 - 1), a * 3 - 1)
    np.testing.assert_array_equal(np.asarray(ta // tb), a // b)  # floor division, as numpy's
    np.testing.assert_array_equal(np.asarray(kiln.div(ta, tb)), a // b)
    np.testing.assert_array_equal(np.asarray(kiln.maximum(ta, tb)), np.maximum(a, b))
    np.testing.assert_array_equal(np.asarray(abs(ta)), np.abs(a))
    np.testing.assert_array_equal(np.asarray(kiln.sign(ta)), np.sign(a))
    np.testing.assert_array_equal(np.asarray(ta.sum(axis=1)), a.sum(axis=1))
    assert kiln.tensor(a).dtype == np.int32 and (ta + tb).dtype == np.int32


@pytest.mark.parametrize("to", [np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8, np.bool_])
def test_cast(to):
    a = data((4, 6), 0, 9)
    got = kiln.tensor(a).astype(to)
    assert got.dtype == np.dtype(to)
    want = a.astype(to)
    if np.dtype(to).kind == "f":
        assert_close(got, want, to)
    else:
        np.testing.assert_array_equal(np.asarray(got), want)


def test_bfloat16_round_trips_through_float32():
    a = data((3, 4)).astype(np.float32)
    b = kiln.tensor(a, dtype=kiln.bfloat16)
    assert b.dtype is kiln.bfloat16
    back = np.asarray(b.astype(np.float32))
    np.testing.assert_allclose(back, a, rtol=1 / 128)  # bf16 keeps 8 bits of mantissa
    assert not np.array_equal(back, a)  # and it did round
    # Its values print and read back through float32 (numpy has no bfloat16): str, tolist, item.
    c = kiln.tensor(np.float32([1, 2.5, -0.375]), dtype=kiln.bfloat16)
    assert str(c) == str(np.float32([1, 2.5, -0.375]))
    assert c.tolist() == [1.0, 2.5, -0.375]
    assert c[1].item() == 2.5 and float(c.sum()) == 3.125
    assert f"{c.sum():.2f}" == "3.12" and f"{kiln.tensor(np.float32(0.5)):.3f}" == "0.500"
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{c:.2f}"


def test_half_means_and_layernorms_are_taken_in_float32():
    """f16 and bf16 means scale in f32: 1/n as an f16 constant made a mean of 10^6 ones 1.0137,
    of 5000 x 5000 ones 1.49 and of 2^25 ones 0. A layernorm whose variance passes f16's 65504
    (stored between two of its kernels) gave beta for the whole column."""
    assert float(kiln.tensor(np.ones(1_000_000, np.float16)).mean()) == 1.0
    assert float(kiln.ones((5000, 5000), np.float16).mean()) == 1.0
    assert float(kiln.ones((1 << 25,), np.float16).mean()) == 1.0
    ones = kiln.tensor(np.ones(1000, np.float32), dtype=kiln.bfloat16)
    assert float(ones.mean().astype(np.float32)) == 1.0
    x = np.zeros((4, 257), np.float16)
    x[0], x[1:3], x[3] = -0.5, 1, 1000
    y = np.asarray(kiln.layernorm(kiln.tensor(x), kiln.ones((), np.float16), kiln.zeros((), np.float16),
                                  axis=0)).astype(np.float64)
    xd = x.astype(np.float64)
    want = (xd - xd.mean(0)) / np.sqrt(xd.var(0) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=2e-3, atol=2e-3)


def test_copies_are_the_object_itself():
    # A copy that owned the C handle too released it twice (wrong values, then an abort).
    import copy
    import pickle
    t = kiln.tensor(np.float32([0, 1, 2]))
    g = kiln.Graph.parse("kiln.graph v1\ninput %x : f32[3]\n%y = relu(%x)\noutput %y\n")
    for c in (copy.copy(t), copy.deepcopy(t), copy.copy(t.device), copy.copy(g)):
        del c
    assert g.inputs[0].name == "x" and copy.deepcopy(g) is g
    assert copy.copy(t) is t and copy.deepcopy([t])[0] is t
    np.testing.assert_array_equal((t + 1).numpy(), [1, 2, 3])
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(t)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(t.device)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
def test_reductions(name, axis, keepdims):
    a = data((3, 4, 5), 0.5, 1.5)
    got = getattr(kiln, name)(kiln.tensor(a), axis=axis, keepdims=keepdims)
    assert_close(got, getattr(np, name)(a, axis=axis, keepdims=keepdims))
    assert_close(getattr(kiln.tensor(a), name)(axis, keepdims), getattr(np, name)(a, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions(name):
    a = data((4, 7))
    for axis in (0, 1, -1):
        got = getattr(kiln, name)(kiln.tensor(a), axis)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(got), getattr(np, name)(a, axis=axis))
    got = getattr(kiln.tensor(a), name)(axis=1, keepdims=True)
    np.testing.assert_array_equal(np.asarray(got), getattr(np, name)(a, axis=1)[:, None])
    assert int(getattr(kiln.tensor(a), name)()) == getattr(np, name)(a)  # flattened


def test_reductions_over_no_axis_give_the_input_back():
    a = data((2, 3))
    t = kiln.tensor(a)
    for name in ("sum", "mean", "max", "min", "prod"):
        for axis in ((), []):
            for keepdims in (False, True):
                got = getattr(kiln, name)(t, axis=axis, keepdims=keepdims)
                want = getattr(np, name)(a, axis=(), keepdims=keepdims)
                assert got.shape == want.shape == (2, 3), (name, axis, got.shape)
                assert_close(got, want)
    i = kiln.tensor(np.int32([1, 2]))
    assert kiln.sum(i, axis=()).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(kiln.sum(i, axis=())), [1, 2])
    with pytest.raises(kiln.InvalidOperationError, match="mean: needs a floating dtype"):
        kiln.mean(i, axis=())  # the dtype is still checked
    # A tensor with an empty axis too: max and min over no axis reduce nothing, so nothing empty.
    empty = kiln.tensor(np.zeros((0, 3), np.float32))
    for name in ("max", "min", "sum"):
        assert getattr(kiln, name)(empty, axis=()).shape == (0, 3), name


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_keepdims_without_an_axis_keep_every_axis(name):
    for shape in [(), (5,), (4, 7), (2, 3, 4)]:
        a = data(shape)
        got = getattr(kiln.tensor(a), name)(keepdims=True)
        want = getattr(np, name)(a, keepdims=True)
        assert got.shape == want.shape == (1,) * len(shape), (shape, got.shape)
        np.testing.assert_array_equal(np.asarray(got), want)
        assert getattr(kiln, name)(kiln.tensor(a)).shape == ()


BIG = 2 ** 53 + 1  # the first integer a double cannot hold: it would round to 2**53


def test_int64_scalars_past_2_53_are_exact():
    a = np.array([BIG - 1, BIG, BIG + 1, -BIG], np.int64)
    t = kiln.tensor(a)

    def same(got, want):
        got = np.asarray(got)
        assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
        np.testing.assert_array_equal(got, want)

    same(kiln.full((2, 3), BIG, np.int64), np.full((2, 3), BIG, np.int64))
    same(kiln.full((), -BIG, np.int64), np.array(-BIG, np.int64))
    same(kiln.full((2, 0), BIG, np.int64), np.zeros((2, 0), np.int64))
    for v in (BIG, np.int64(BIG), -BIG, 2 ** 62 + 1):
        w = np.int64(v)
        same(t == v, a == w)
        same(t != v, a != w)
        same(t < v, a < w)
        same(t >= v, a >= w)
        same(t - v, a - w)
        same(v - t, w - a)
        same(t + v, a + w)
        same(v + t, w + a)
        same(kiln.maximum(t, v), np.maximum(a, w))
        same(kiln.where(t > 0, v, t), np.where(a > 0, w, a))
        same(kiln.where(t > 0, t, v), np.where(a > 0, a, w))
        same(kiln.clip(t, max=v), np.clip(a, None, w))
        same(kiln.clip(t, min=v), np.clip(a, w, None))
    ones = kiln.tensor(np.int64([1, 0, -1]))
    same(ones * BIG, np.int64([BIG, 0, -BIG]))
    same(kiln.tensor(np.int64([2 * BIG, -2 * BIG])) // BIG, np.int64([2, -2]))
    same(kiln.tensor(np.int64([[1, 2]])).pad((1, 0), (0, 1), BIG),
         np.pad(np.int64([[1, 2]]), [(1, 0), (0, 1)], constant_values=BIG))
    same(kiln.tensor(np.int64([7])).pad((2,), (1,), -BIG), np.int64([-BIG, -BIG, 7, -BIG]))
    same(kiln.full(2, -2 ** 63, np.int64), np.full(2, -2 ** 63, np.int64))  # past 2**53, exact as a double
    # Floats are unchanged: a float tensor rounds the integer as numpy does.
    same(kiln.tensor(np.float64([0])) + BIG, np.float64([0]) + BIG)
    # An integer that the dtype cannot hold at all.
    for fn in (lambda: t + 2 ** 63, lambda: t == 2 ** 64, lambda: kiln.full(2, 2 ** 64, np.int64),
               lambda: t.pad((1,), (0,), 2 ** 64), lambda: kiln.where(t > 0, t, -2 ** 63 - 1),
               lambda: t - np.uint64(2 ** 64 - 1), lambda: kiln.tensor(np.int32([1])) + 2 ** 60):
        with pytest.raises(OverflowError, match="does not fit in int"):
            fn()
    # Small ones too: past int8 or uint8 is numpy's OverflowError, whichever op takes the int.
    i8, u8 = kiln.tensor(np.int8([1, 2])), kiln.tensor(np.uint8([1, 2]))
    for fn, message in ((lambda: i8 + 300, "300 does not fit in int8"),
                        (lambda: i8 * -129, "-129 does not fit in int8"),
                        (lambda: i8 < 128, "128 does not fit in int8"),
                        (lambda: kiln.full(2, 256, np.uint8), "256 does not fit in uint8"),
                        (lambda: u8 - -1, "-1 does not fit in uint8"),
                        (lambda: 1000 - u8, "1000 does not fit in uint8"),
                        (lambda: u8.pad((1,), (0,), 256), "256 does not fit in uint8"),
                        (lambda: kiln.where(i8 > 1, i8, np.int64(-200)), "-200 does not fit in int8")):
        with pytest.raises(OverflowError, match=message):
            fn()
    same(i8 + 127 - 1, np.int8([127, -128]))  # in range, and wrapping as numpy's does
    # A list or array operand is held as a scalar is (it wrapped: i8 + [300] gave 44, and
    # i8 + [1.5] truncated).
    for fn, error, message in ((lambda: i8 + [1, 300], OverflowError, "300 does not fit in int8"),
                               (lambda: u8 - np.int64([-1, 0]), OverflowError, "-1 does not fit in uint8"),
                               (lambda: i8 + [1.5, 2], kiln.InvalidOperationError, "1.5 is not representable in int8"),
                               (lambda: i8 * np.float32([np.nan, 1]), kiln.InvalidOperationError, "nan is not representable")):
        with pytest.raises(error, match=message):
            fn()
    same(i8 + [2.0, -3], np.int8([3, -1]))  # whole floats in range are the integers
    # A float scalar is held the same way, whichever op takes it: a fraction, NaN or infinity is
    # no integer (the message named kiln_full or kiln_add_scalar, an op the user never called),
    # a whole float past the dtype is numpy's OverflowError as the int is, and a bool tensor
    # takes 0 and 1 only.
    i32 = kiln.tensor(np.int32([0, 1, 2, -3]))
    for fn, error, message in ((lambda: i32 < 0.5, kiln.InvalidOperationError,
                                r"scalar 0.5 is not representable in int32; kiln does not promote"),
                               (lambda: i32 + 2.5, kiln.InvalidOperationError, r"scalar 2.5 is not representable in int32"),
                               (lambda: kiln.maximum(i32, np.float64(0.5)), kiln.InvalidOperationError,
                                r"scalar 0.5 is not representable in int32"),
                               (lambda: kiln.where(i32 > 0, i32, float("inf")), kiln.InvalidOperationError,
                                r"scalar inf is not representable in int32"),
                               (lambda: 1.5 - i32, kiln.InvalidOperationError, r"scalar 1.5 is not representable"),
                               (lambda: i8 + 1000.0, OverflowError, r"1000.0 does not fit in int8"),
                               (lambda: kiln.tensor(np.array([True])) == 2, kiln.InvalidOperationError,
                                r"scalar 2 is not a bool value \(0 or 1\)")):
        with pytest.raises(error, match=message):
            fn()
    same(i32 * 2.0, np.int32([0, 2, 4, -6]))  # a whole float is the integer
    same(kiln.tensor(np.array([True, False])) == 1, np.array([True, False]))


def test_pad_takes_non_negative_widths():
    assert "negative: crops" not in kiln.Tensor.pad.__doc__ and "non-negative" in kiln.Tensor.pad.__doc__
    with pytest.raises(kiln.InvalidOperationError, match="padding must be non-negative"):
        kiln.tensor(np.ones((2, 3), np.float32)).pad((0, -1), (0, 0))


def test_a_bfloat16_tensor_is_copied_by_kiln_tensor():
    a = np.float32([1.5, -2.0, 3.0e38, 0.0])
    b = kiln.tensor(a).astype(kiln.bfloat16)
    want = np.asarray(b.astype(np.float32))
    c = kiln.tensor(b)
    assert c is not b and c.dtype is kiln.bfloat16 and c.device is b.device
    np.testing.assert_array_equal(np.asarray(c.astype(np.float32)), want)
    np.testing.assert_array_equal(np.asarray(kiln.tensor(b, np.float64)), want.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(kiln.tensor(b, kiln.bfloat16).astype(np.float32)), want)
    from conftest import open_test_device
    other = open_test_device()
    d = kiln.tensor(b, device=other)
    assert d.device is other and d.dtype is kiln.bfloat16
    np.testing.assert_array_equal(np.asarray(d.astype(np.float32)), want)
    e = kiln.tensor(kiln.tensor(a), device=other)  # any other dtype as well
    assert e.device is other and np.array_equal(np.asarray(e), a)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64])
def test_cumsum(dtype):
    a = data((3, 4, 5)) if np.dtype(dtype).kind == "f" else rng.integers(-50, 50, (3, 4, 5))
    a = a.astype(dtype)
    t = kiln.tensor(a)
    for axis in (0, 1, 2, -1):
        want = np.cumsum(a, axis=axis, dtype=dtype)
        rev = np.flip(np.cumsum(np.flip(a, axis), axis=axis, dtype=dtype), axis)
        got = kiln.cumsum(t, axis)
        assert got.dtype == dtype
        if np.dtype(dtype).kind == "f":
            assert_close(got, want, dtype, scale=5)
            assert_close(t.cumsum(axis, reverse=True), rev, dtype, scale=5)
            assert_close(kiln.cumsum(t, axis, exclusive=True), want - a, dtype, scale=5)
            assert_close(kiln.cumsum(t, axis, exclusive=True, reverse=True), rev - a, dtype,
                         scale=5)
        else:
            np.testing.assert_array_equal(np.asarray(got), want)
            np.testing.assert_array_equal(np.asarray(t.cumsum(axis, reverse=True)), rev)
            np.testing.assert_array_equal(np.asarray(kiln.cumsum(t, axis, exclusive=True)), want - a)
            np.testing.assert_array_equal(np.asarray(kiln.cumsum(t, axis, True, True)), rev - a)
    np.testing.assert_allclose(np.asarray(kiln.cumsum(t)), np.cumsum(a), rtol=1e-5, atol=1e-4)  # flattened


def test_cumsum_errors():
    with pytest.raises(kiln.InvalidOperationError, match=r"cumsum: axis 3 is out of range for shape \[2,3\]"):
        kiln.cumsum(kiln.tensor(data((2, 3))), 3)
    with pytest.raises(kiln.InvalidOperationError, match="cumsum: needs a numeric dtype, got bool"):
        kiln.cumsum(kiln.tensor(np.array([True, False])), 0)


def numpy_topk(a, k, axis, largest):
    """ONNX TopK by numpy: a stable sort (ties keep index order) of the negated values for largest,
    of the values for smallest; NaN ranks above every number (first when largest, last when
    smallest, where numpy's argsort already puts it)."""
    f = a.astype(np.float64)
    nan = np.isnan(f)
    if largest:  # np.lexsort is stable; its last key is the primary one: NaN first
        order = np.lexsort((np.where(nan, 0.0, -f), ~nan), axis=axis)
    else:
        order = np.argsort(f, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(a, idx, axis), idx


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64, np.int8,
                                   np.uint8])
def test_topk(dtype):
    a = (data((3, 4, 6)) if np.dtype(dtype).kind == "f" else rng.integers(0, 6, (3, 4, 6))).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a[0, 1, 2] = a[0, 1, 4] = a[2, 0, 0] = np.nan  # NaN, and ties of NaN
        a[1, 2, :3] = a[1, 2, 3]  # ties
    t = kiln.tensor(a)
    for axis in (0, 1, 2, -1):
        n = a.shape[axis]
        for k in (0, 1, 3 if n >= 3 else n, n):
            for largest in (True, False):
                want_v, want_i = numpy_topk(a, k, axis, largest)
                v, i = kiln.topk(t, k, axis=axis, largest=largest)
                assert v.dtype == dtype and i.dtype == np.int64
                np.testing.assert_array_equal(np.asarray(i), want_i, err_msg=f"{axis} {k} {largest}")
                np.testing.assert_array_equal(np.asarray(v), want_v)
    v, i = t.topk(2)
    want_v, want_i = numpy_topk(a, 2, -1, True)
    np.testing.assert_array_equal(np.asarray(i), want_i)
    np.testing.assert_array_equal(np.asarray(v), want_v)


def test_topk_against_torch():
    torch = pytest.importorskip("torch")
    a = rng.integers(-3, 4, (5, 40)).astype(np.float32)  # many ties
    for largest in (True, False):
        v, i = kiln.topk(kiln.tensor(a), 7, largest=largest)
        tv, _ = torch.topk(torch.from_numpy(a), 7, largest=largest, sorted=True)
        np.testing.assert_array_equal(np.asarray(v), tv.numpy())
        want_v, want_i = numpy_topk(a, 7, -1, largest)
        np.testing.assert_array_equal(np.asarray(i), want_i)


def test_topk_errors():
    with pytest.raises(kiln.InvalidOperationError,
                       match=r"topk_indices: k = 4 is out of range \[0, 3\] for axis 1 of shape \[2,3\]"):
        kiln.topk(kiln.tensor(data((2, 3))), 4)
    with pytest.raises(kiln.InvalidOperationError, match=r"topk_indices: axis 2 is out of range"):
        kiln.topk(kiln.tensor(data((2, 3))), 1, axis=2)
    with pytest.raises(kiln.InvalidOperationError, match="topk_indices: needs a numeric dtype, got bool"):
        kiln.topk(kiln.tensor(np.array([True, False])), 1)


def test_views():
    a = data((2, 3, 4))
    t = kiln.tensor(a)
    assert_close(t.reshape(6, 4), a.reshape(6, 4))
    assert_close(kiln.reshape(t, (4, -1)), a.reshape(4, -1))
    assert_close(t.permute(2, 0, 1), a.transpose(2, 0, 1))
    assert_close(t.transpose(), a.transpose())
    assert_close(t.T, a.T)
    assert_close(t.mT, np.swapaxes(a, -1, -2))
    assert_close(kiln.transpose(t), np.swapaxes(a, -1, -2))
    assert_close(kiln.transpose(t, (1, 0, 2)), a.transpose(1, 0, 2))
    assert_close(kiln.tensor(a[:, :1]).expand(3, 2, 5, 4), np.broadcast_to(a[:, :1], (3, 2, 5, 4)))
    assert_close(kiln.slice(t, 2, 1, None, 2), a[:, :, 1::2])
    assert_close(kiln.pad(t, (0, 1, 2), (1, 0, 0), value=3.5),
                 np.pad(a, [(0, 1), (1, 0), (2, 0)], constant_values=3.5))
    assert_close(kiln.flip(t, 1), np.flip(a, 1))
    assert_close(t.flip(), np.flip(a))
    assert_close(kiln.roll(t, (1, -2), (0, 2)), np.roll(a, (1, -2), (0, 2)))
    windows = np.take(sliding_window_view(a, 2, axis=2), np.arange(0, 3, 2), axis=2)
    assert_close(kiln.unfold(t, 2, 2, 2), windows)
    b = data((2, 1, 4))
    assert_close(kiln.concat([t, kiln.tensor(b)], axis=1), np.concatenate([a, b], axis=1))


def clipped(idx, n):
    """kiln's rule for out-of-range indices: negatives wrap once, then everything is clamped."""
    idx = np.asarray(idx)
    return np.clip(np.where(idx < 0, idx + n, idx), 0, n - 1)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gather_is_numpy_take(index_dtype):
    a = data((4, 5, 6))
    t = kiln.tensor(a)
    for axis in range(-3, 3):
        n = a.shape[axis]
        for shape in [(), (3,), (2, 3), (0,)]:
            idx = rng.integers(-n, n, shape).astype(index_dtype)
            got = kiln.gather(t, kiln.tensor(idx), axis)
            assert got.shape == np.take(a, idx, axis=axis).shape
            assert_close(got, np.take(a, idx, axis=axis))
    # indices given as a list or array; integer data and bool data
    assert_close(kiln.gather(t, [3, -1, 0], axis=1), np.take(a, [3, -1, 0], axis=1))
    assert_close(kiln.gather(t, [], axis=1), np.take(a, [], axis=1))  # [] is float64 to numpy
    ints = rng.integers(-100, 100, (6, 3)).astype(np.int64)
    assert_close(kiln.gather(kiln.tensor(ints), np.array([5, 0, -2], index_dtype)), ints[[5, 0, -2]])
    flags = rng.integers(0, 2, (7,)).astype(bool)
    assert_close(kiln.gather(kiln.tensor(flags), [6, 1, 1]), flags[[6, 1, 1]])
    # out of range: wrapped once and clamped (numpy's take would raise)
    wild = np.array([-100, -5, 4, 9, 1 << 40], np.int64)
    assert_close(kiln.gather(t, wild, axis=0), np.take(a, clipped(wild, 4), axis=0))
    # uint64 past int64 is past the end, clamped to the last, not wrapped to an index from the end
    huge = np.array([2 ** 63, 2 ** 64 - 1, 2], np.uint64)
    assert_close(kiln.gather(t, huge, axis=0), np.take(a, [3, 3, 2], axis=0))


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gather_elements_is_numpy_take_along_axis(index_dtype):
    a = data((4, 5, 6))
    t = kiln.tensor(a)
    for axis in range(-3, 3):
        n = a.shape[axis]
        shape = list(a.shape)
        shape[axis] = 7  # the gathered axis may be longer than the data's
        idx = rng.integers(-n, n, shape).astype(index_dtype)
        assert_close(kiln.gather_elements(t, kiln.tensor(idx), axis), np.take_along_axis(a, idx, axis))
    short = rng.integers(0, 6, (2, 3, 6)).astype(index_dtype)  # other axes may be shorter
    assert_close(kiln.gather_elements(t, short, 2), np.take_along_axis(a[:2, :3], short, 2))
    wild = np.full((1, 5, 6), 1 << 20, index_dtype)
    wild[0, 0, 0] = -9
    assert_close(kiln.gather_elements(t, wild, 0), np.take_along_axis(a, clipped(wild, 4), 0))


def test_gather_fuses_with_elementwise():
    table = data((50, 8))
    ids = rng.integers(0, 50, (3, 4))
    got = kiln.tanh(kiln.gather(kiln.tensor(table), ids) * 2.0 + 1.0)
    assert_close(got, np.tanh(table[ids] * 2.0 + 1.0))


def scatter_loop(a, idx, upd, axis, reduction):
    """ONNX ScatterElements by a loop in C order of the indices: a negative index wraps once, an
    index still out of range is dropped."""
    out = a.copy()
    n = a.shape[axis]
    for p in np.ndindex(*idx.shape):
        j = int(idx[p])
        j = j + n if j < 0 else j
        if not 0 <= j < n:
            continue
        q = list(p)
        q[axis] = j
        q = tuple(q)
        u = upd[p]
        if reduction == "none":
            out[q] = u
        elif reduction == "add":
            out[q] = out[q] + u
        elif reduction == "mul":
            out[q] = out[q] * u
        elif reduction == "max":
            out[q] = np.maximum(out[q], u)
        else:
            out[q] = np.minimum(out[q], u)
    return out


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_scatter_elements_is_numpy_put_along_axis(index_dtype):
    a = data((4, 5, 6))
    t = kiln.tensor(a)
    for axis in range(-3, 3):
        n = a.shape[axis]
        shape = list(a.shape)
        shape[axis] = 3
        # distinct indices along the axis (numpy's put_along_axis order for duplicates is the
        # loop's too, checked below)
        idx = np.argsort(rng.random(a.shape), axis=axis)[tuple(slice(0, s) for s in shape)]
        idx = (idx - n * (rng.random(shape) < 0.5)).astype(index_dtype)  # some negative
        upd = data(tuple(shape))
        want = a.copy()
        np.put_along_axis(want, idx.astype(np.int64) % n, upd, axis)
        assert_close(kiln.scatter_elements(t, idx, kiln.tensor(upd), axis), want)
    # duplicates (the last wins, like numpy) and an out-of-range index (dropped)
    idx = np.array([[0, 2, 0, 9, -1]], index_dtype)
    upd = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)
    x = np.zeros((3, 4), np.float32)
    want = scatter_loop(x, idx, upd, 1, "none")
    assert want[0].tolist() == [3.0, 0.0, 2.0, 5.0]
    assert_close(kiln.scatter_elements(kiln.tensor(x), idx, upd, axis=1), want)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_elements_reductions(reduction):
    a = data((5, 6))
    for axis in (0, 1, -1):
        shape = (9, 6) if axis == 0 else (5, 9)
        idx = rng.integers(-8, 8, shape).astype(np.int64)  # duplicates, negatives, out of range
        upd = data(shape)
        got = kiln.scatter_elements(kiln.tensor(a), idx, upd, axis, reduction)
        assert_close(got, scatter_loop(a, idx, upd, axis, reduction))
    ints = rng.integers(-100, 100, (4, 3)).astype(np.int32)
    iu = rng.integers(-3, 3, (6, 3)).astype(np.int32)
    idx = rng.integers(0, 4, (6, 3))
    got = kiln.scatter_elements(kiln.tensor(ints), idx, kiln.tensor(iu), 0, reduction)
    assert np.array_equal(got.numpy(), scatter_loop(ints, idx, iu, 0, reduction))


def test_scatter_elements_errors_and_fusion():
    t = kiln.tensor(data((3, 4)))
    with pytest.raises(kiln.InvalidOperationError, match="reduction must be none, add, mul, max or min, got 'sum'"):
        kiln.scatter_elements(t, [[0]], [[1.0]], 0, "sum")
    with pytest.raises(kiln.InvalidOperationError, match="updates \\[1,2\\] and indices \\[1,1\\] differ in shape"):
        kiln.scatter_elements(t, [[0]], kiln.tensor(np.zeros((1, 2))), 0)
    a = data((8, 16))
    idx = rng.integers(0, 16, (8, 5))
    upd = data((8, 5))
    got = kiln.exp(kiln.scatter_elements(kiln.tanh(kiln.tensor(a)), idx, kiln.tensor(upd) * 2.0, 1, "add"))
    assert_close(got, np.exp(scatter_loop(np.tanh(a), idx, upd * 2.0, 1, "add")))


def test_indexing():
    a = data((4, 5, 6))
    t = kiln.tensor(a)
    for key in [1, -1, (slice(1, 3),), (slice(None), 2), (..., 3), (slice(None, None, -1),),
                (slice(3, 0, -2), None, slice(1, None)), (None, 0, ..., slice(2, 5)), (2, 3, 4),
                (np.int64(1), slice(-3, None)), ()]:
        assert_close(t[key], a[key])
    assert t[2, 3, 4].shape == () and float(t[2, 3, 4]) == a[2, 3, 4]


def test_matmul():
    for sa, sb in [((3, 4), (4, 5)), ((2, 3, 4), (4, 6)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 3)), ((3, 4), (4,))]:
        a, b = data(sa), data(sb)
        assert_close(kiln.matmul(kiln.tensor(a), kiln.tensor(b)), a @ b)
        assert_close(kiln.tensor(a) @ kiln.tensor(b), a @ b)
    a, b = data((3, 4)), data((4, 2))
    assert_close(a @ kiln.tensor(b), a @ b)  # numpy defers to kiln's operator


def test_composites():
    a = data((3, 8))
    assert_close(kiln.softmax(kiln.tensor(a)), softmax(a))
    assert_close(kiln.tensor(a).softmax(0), softmax(a, 0))
    assert_close(kiln.log_softmax(kiln.tensor(a)), np.log(softmax(a)))
    g, b = data((8,)), data((8,))
    mu = a.mean(-1, keepdims=True)
    var = ((a - mu) ** 2).mean(-1, keepdims=True)
    assert_close(kiln.layernorm(kiln.tensor(a), kiln.tensor(g), kiln.tensor(b), eps=1e-5),
                 (a - mu) / np.sqrt(var + 1e-5) * g + b)
    q, k, v = data((2, 5, 4)), data((2, 6, 4)), data((2, 6, 3))
    s = q @ np.swapaxes(k, -1, -2) / 2.0
    assert_close(kiln.attention(kiln.tensor(q), kiln.tensor(k), kiln.tensor(v)), softmax(s) @ v)
    s = q @ np.swapaxes(k, -1, -2) * 0.3
    mask = np.arange(6)[None, :] <= np.arange(5)[:, None]
    assert_close(kiln.attention(kiln.tensor(q), kiln.tensor(k), kiln.tensor(v), causal=True, scale=0.3),
                 softmax(np.where(mask, s, -np.inf)) @ v)


def test_sources():
    assert_close(kiln.full((2, 3), 2.5, np.float64), np.full((2, 3), 2.5))
    assert_close(kiln.zeros(4), np.zeros(4), np.float32)
    assert kiln.ones((2,), np.int64).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(kiln.arange(5)), np.arange(5))
    np.testing.assert_array_equal(np.asarray(kiln.arange(2, 11, 3, dtype=np.int64)), np.arange(2, 11, 3))
    assert_close(kiln.arange(0, 4, dtype=np.float64), np.arange(4.0))


def test_operators_with_scalars_and_arrays():
    a = data((3, 4)).astype(np.float32)
    t = kiln.tensor(a)
    for got, want in [(t + 1, a + 1), (1 + t, 1 + a), (t - 0.5, a - 0.5), (2 - t, 2 - a), (t * 3, a * 3),
                      (3 * t, 3 * a), (t / 4, a / 4), (1 / (t * t + 1), 1 / (a * a + 1)), (-t, -a), (+t, a),
                      (t ** 2, a ** 2), (2.0 ** t, 2.0 ** a), (t // 0.5, a // 0.5), (abs(t), np.abs(a)),
                      (t + a[0], a + a[0]), (a[0] - t, a[0] - a), (t * np.float32(2), a * 2), (t + [1, 2, 3, 4], a + [1, 2, 3, 4])]:
        assert got.dtype == np.float32
        assert_close(got, want.astype(np.float32), np.float32)
    np.testing.assert_array_equal(np.asarray(t > 0), a > 0)
    np.testing.assert_array_equal(np.asarray(0 < t), 0 < a)
    np.testing.assert_array_equal(np.asarray(t == t), np.ones_like(a, bool))
    np.testing.assert_array_equal(np.asarray(t != 0.5), a != 0.5)
    assert (t == None) is False and (t != None) is True and t not in [None, "t"]  # noqa: E711


def test_reading_results():
    a = data((2, 3))
    t = kiln.tensor(a)
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2 and t.dtype == np.float64
    assert t.tolist() == a.tolist()
    assert [r.tolist() for r in t] == a.tolist()
    assert kiln.sum(t).item() == pytest.approx(a.sum(), rel=1e-12)
    assert float(t[1, 2]) == a[1, 2] and int(kiln.tensor(np.int64(7))) == 7
    assert bool(kiln.tensor(1.0) > 0)
    assert t.realize() is t
    assert "kiln.Tensor float64[2, 3] on cpu" in repr(t)
    assert str(kiln.tensor(np.arange(3))) == str(np.arange(3))
    scalar = kiln.tensor(3.5)
    assert scalar.shape == () and np.asarray(scalar) == 3.5
    empty = kiln.tensor(np.zeros((0, 3), np.float32))
    assert empty.shape == (0, 3) and np.asarray(empty + 1).shape == (0, 3)


def test_every_elementwise_row_of_the_op_table_is_a_function(source_dir):
    """kiln/ops.def's `api` column lists the C API's elementwise functions; each is kiln.<name>."""
    table = open(os.path.join(source_dir, "include", "kiln", "ops.def")).read()
    api = re.findall(r"^KILN_ELEMENTWISE\([^;]*?(unary|binary|ternary|member)\((\w+)\)\)", table, re.M)
    assert len(api) > 30, "the op table's rows were not found"
    for form, name in api:
        if form == "member":
            assert hasattr(kiln.Tensor, name), name  # cast: Tensor.cast / astype
        else:
            assert callable(getattr(kiln, name, None)), f"kiln.{name} ({form}) is missing"
        if form == "unary":
            assert callable(getattr(kiln.Tensor, name, None)), f"Tensor.{name} is missing"


@pytest.mark.parametrize("k", [-5, -1, 0, 2, 6])
@pytest.mark.parametrize("shape", [(4, 4), (3, 6), (2, 5, 3)])
def test_trilu_matches_numpy_triu_and_tril(k, shape):
    x = data(shape)
    np.testing.assert_array_equal(np.asarray(kiln.trilu(kiln.tensor(x), k)), np.triu(x, k))
    np.testing.assert_array_equal(np.asarray(kiln.trilu(kiln.tensor(x), k, upper=False)), np.tril(x, k))
    np.testing.assert_array_equal(np.asarray(kiln.triu(kiln.tensor(x), k)), np.triu(x, k))
    np.testing.assert_array_equal(np.asarray(kiln.tril(kiln.tensor(x), k)), np.tril(x, k))


def test_trilu_of_integers_and_bools_and_its_fusion():
    i = rng.integers(-9, 9, (5, 5)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(kiln.tril(kiln.tensor(i), -1)), np.tril(i, -1))
    b = i > 0
    np.testing.assert_array_equal(np.asarray(kiln.triu(kiln.tensor(b))), np.triu(b))
    x = data((6, 6))
    y = kiln.exp(kiln.tril(kiln.tensor(x) * 2.0))
    assert_close(y, np.exp(np.tril(x * 2)))
    assert kiln.default_device().last_stats().kernels == 1
    with pytest.raises(kiln.InvalidOperationError, match=r"trilu: needs a tensor of rank 2 or more, got \[3\]"):
        kiln.trilu(kiln.tensor(np.zeros(3)))


def test_clip_matches_numpy_with_its_nan_rule():
    x = np.array([-3.0, -0.5, np.nan, 0.25, 2.0, np.inf, -np.inf])
    np.testing.assert_array_equal(np.asarray(kiln.clip(kiln.tensor(x), -1.0, 1.0)), np.clip(x, -1.0, 1.0))
    np.testing.assert_array_equal(np.asarray(kiln.clip(kiln.tensor(x), None, 0.0)), np.minimum(x, 0.0))
    np.testing.assert_array_equal(np.asarray(kiln.clip(kiln.tensor(x), 0.0)), np.maximum(x, 0.0))
    np.testing.assert_array_equal(np.asarray(kiln.clip(kiln.tensor(x))), x)
    # A NaN bound gives NaN everywhere (numpy's maximum, torch.clamp; this numpy's np.clip ignores
    # it instead); lo > hi gives hi (ONNX Clip, numpy).
    np.testing.assert_array_equal(np.asarray(kiln.clip(kiln.tensor(x), np.nan, 1.0)),
                                  np.minimum(np.maximum(x, np.nan), 1.0))
    assert np.isnan(np.asarray(kiln.clip(kiln.tensor(x), np.nan, 1.0))).all()
    np.testing.assert_array_equal(np.asarray(kiln.clip(kiln.tensor(x), 2.0, 1.0)), np.clip(x, 2.0, 1.0))
    # Tensor bounds broadcast; integers clip exactly.
    lo, hi = data((3, 1)), data((4,)) + 1
    m = data((3, 4), -4, 4)
    np.testing.assert_array_equal(np.asarray(kiln.clip(kiln.tensor(m), kiln.tensor(lo), kiln.tensor(hi))),
                                  np.clip(m, lo, hi))
    i = np.array([-128, -5, 0, 7, 127], np.int8)
    np.testing.assert_array_equal(np.asarray(kiln.clip(kiln.tensor(i), -6, 6)), np.clip(i, -6, 6))
    with pytest.raises(kiln.InvalidOperationError, match=r"clip: needs a numeric dtype, got bool"):
        kiln.clip(kiln.tensor(np.array([True])), 0, 1)


@pytest.mark.parametrize("device", ["cpu", "vulkan:0"])
def test_odd_functions_keep_the_sign_of_zero(device):
    """sin, tanh and erf of -0 are -0 as libm's (numpy's) are: the cpu's f32 sin flipped the sign on
    x < 0, which -0 is not; vulkan's tanh and its f64 helpers gave +0."""
    try:
        dev = kiln.Device(device, {"compilation.cache": "none", "autotune.cache": "none", "autotune.enabled": False})
    except kiln.DeviceError:
        pytest.skip(f"{device} is not available")
    for dtype in (np.float32, np.float64, np.float16):
        x = kiln.tensor(np.array([-0.0, 0.0, -1.5], dtype), device=dev)
        for name in ("sin", "tanh", "erf"):
            got = np.asarray(getattr(kiln, name)(x))
            assert list(np.signbit(got)) == [True, False, True], (device, np.dtype(dtype).name, name, got)
