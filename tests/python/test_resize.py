"""kiln.resize against torch.nn.functional.interpolate and against a direct numpy loop of ONNX
Resize's coordinate rules (every nearest_mode and coordinate_transformation_mode), its errors, and
its fusion with the elementwise ops around it."""
import math

import numpy as np
import pytest

import kiln
from conftest import assert_close

torch = pytest.importorskip("torch")
F = torch.nn.functional
rng = np.random.default_rng(5)


def source(mode, x, n_in, n_out):
    """ONNX Resize's input coordinate of output position x (sizes given, roi the whole axis)."""
    s = n_out / n_in
    if mode == "half_pixel":
        return (x + 0.5) / s - 0.5
    if mode == "pytorch_half_pixel":
        return -0.5 if n_out == 1 else (x + 0.5) / s - 0.5
    if mode == "align_corners":
        return 0.0 if n_out == 1 else x * (n_in - 1) / (n_out - 1)
    if mode == "asymmetric":
        return x / s
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / s
    raise ValueError(mode)


def rounded(v, nearest):
    f = math.floor(v)
    frac = v - f
    if nearest == "floor" or frac == 0:
        return f
    if nearest == "ceil":
        return f + 1
    if nearest == "round_prefer_floor":
        return f + (frac > 0.5)
    return f + (frac >= 0.5)  # round_prefer_ceil


def numpy_resize(x, size, mode, coord, nearest):
    """A direct loop: each axis in turn, nearest or linear, edge positions repeated."""
    y = x
    for axis, n_out in enumerate(size):
        n_in = y.shape[axis]
        rows = []
        for i in range(n_out):
            v = source(coord, i, n_in, n_out)
            if mode == "nearest":
                rows.append(np.take(y, min(max(rounded(v, nearest), 0), n_in - 1), axis=axis))
            else:
                f = math.floor(v)
                w = v - f
                lo, hi = min(max(f, 0), n_in - 1), min(max(f + 1, 0), n_in - 1)
                rows.append((1 - w) * np.take(y, lo, axis=axis) + w * np.take(y, hi, axis=axis))
        y = np.stack(rows, axis=axis)
    return y


NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"]


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("nearest", NEAREST)
@pytest.mark.parametrize("size", [(2, 7, 9), (2, 3, 2), (1, 10, 1), (2, 5, 4)])
def test_nearest_matches_a_direct_loop(coord, nearest, size):
    x = rng.uniform(-2, 2, (2, 5, 4))
    got = kiln.resize(kiln.tensor(x), size, "nearest", coord, nearest)
    np.testing.assert_array_equal(np.asarray(got), numpy_resize(x, size, "nearest", coord, nearest))


@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("size", [(3, 8, 11), (3, 2, 3), (3, 1, 1), (3, 6, 2)])
def test_linear_matches_a_direct_loop(coord, size):
    x = rng.uniform(-2, 2, (3, 4, 5))
    got = kiln.resize(kiln.tensor(x), size, "linear", coord)
    assert_close(got, numpy_resize(x, size, "linear", coord, None))


def test_nearest_keeps_integer_and_bool_data_exactly():
    x = rng.integers(-100, 100, (3, 4)).astype(np.int32)
    got = kiln.resize(kiln.tensor(x), (7, 9), "nearest", "asymmetric", "floor")
    np.testing.assert_array_equal(np.asarray(got), numpy_resize(x, (7, 9), "nearest", "asymmetric", "floor"))
    b = x > 0
    got = kiln.resize(kiln.tensor(b), (6, 2), "nearest")
    np.testing.assert_array_equal(np.asarray(got), numpy_resize(b, (6, 2), "nearest", "half_pixel", "round_prefer_floor"))


# (torch mode, align_corners, kiln mode, coordinate_transformation_mode, nearest_mode)
TORCH = [
    ("nearest", None, "nearest", "asymmetric", "floor"),
    ("nearest-exact", None, "nearest", "half_pixel", "round_prefer_ceil"),
    ("bilinear", False, "linear", "pytorch_half_pixel", "round_prefer_floor"),
    ("bilinear", True, "linear", "align_corners", "round_prefer_floor"),
    ("bicubic", False, "cubic", "half_pixel", "round_prefer_floor"),
    ("bicubic", True, "cubic", "align_corners", "round_prefer_floor"),
]


@pytest.mark.parametrize("torch_mode,align,mode,coord,nearest", TORCH)
@pytest.mark.parametrize("size", [(13, 7), (3, 5), (4, 4), (8, 3)])
def test_2d_matches_torch_interpolate(torch_mode, align, mode, coord, nearest, size):
    x = rng.uniform(-1, 1, (2, 3, 6, 5)).astype(np.float32)
    want = F.interpolate(torch.from_numpy(x), size=size, mode=torch_mode, align_corners=align).numpy()
    got = kiln.resize(kiln.tensor(x), (2, 3) + size, mode, coord, nearest)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("align,coord", [(False, "pytorch_half_pixel"), (True, "align_corners")])
def test_trilinear_and_linear_match_torch(align, coord):
    x = rng.uniform(-1, 1, (1, 2, 3, 4, 5)).astype(np.float32)
    want = F.interpolate(torch.from_numpy(x), size=(5, 2, 9), mode="trilinear", align_corners=align).numpy()
    got = kiln.resize(kiln.tensor(x), (1, 2, 5, 2, 9), "linear", coord)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    x1 = x.reshape(2, 3, 20)
    want = F.interpolate(torch.from_numpy(x1), size=7, mode="linear", align_corners=align).numpy()
    got = kiln.resize(kiln.tensor(x1), (2, 3, 7), "linear", coord)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_same_size_is_the_input_and_empty_sizes_work():
    x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(kiln.resize(kiln.tensor(x), (2, 3), "linear")), x)
    assert kiln.resize(kiln.tensor(x), (0, 3)).shape == (0, 3)


def test_an_upsample_fuses_with_the_ops_around_it():
    x = kiln.tensor(rng.uniform(-1, 1, (1, 2, 4, 4)).astype(np.float32))
    np.asarray(x)
    # One resized axis: its gathers, weights and the activation are one kernel.
    y = kiln.relu(kiln.resize(x, (1, 2, 4, 8), "linear", "half_pixel") * 2.0)
    want = np.maximum(numpy_resize(np.asarray(x).astype(np.float64), (1, 2, 4, 8), "linear", "half_pixel", None) * 2, 0)
    assert_close(y, want, np.float32)
    assert kiln.default_device().last_stats().kernels == 1
    # Two: the second axis reads the first's result twice per element, which the cost model may
    # materialize once instead of recomputing, but never more kernels than axes.
    y = kiln.relu(kiln.resize(x, (1, 2, 8, 8), "linear", "half_pixel") * 2.0)
    want = np.maximum(numpy_resize(np.asarray(x).astype(np.float64), (1, 2, 8, 8), "linear", "half_pixel", None) * 2, 0)
    assert_close(y, want, np.float32)
    assert kiln.default_device().last_stats().kernels <= 2


def test_errors():
    x = kiln.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(kiln.InvalidOperationError, match=r"resize: 1 sizes for x of shape \[2,3\]"):
        kiln.resize(x, (4,))
    with pytest.raises(kiln.InvalidOperationError, match=r"resize: unknown mode 'area'"):
        kiln.resize(x, (4, 6), "area")
    with pytest.raises(kiln.InvalidOperationError, match=r"unknown coordinate_transformation_mode 'centre'"):
        kiln.resize(x, (4, 6), "linear", "centre")
    with pytest.raises(kiln.InvalidOperationError, match=r"unknown nearest_mode 'up'"):
        kiln.resize(x, (4, 6), "nearest", "half_pixel", "up")
    with pytest.raises(kiln.InvalidOperationError, match=r"resize: mode linear needs a floating dtype, got i32"):
        kiln.resize(kiln.tensor(np.zeros((2, 3), np.int32)), (4, 6), "linear")
    with pytest.raises(kiln.InvalidOperationError, match=r"resize: sizes 3 -> -1 are negative"):
        kiln.resize(x, (2, -1))
