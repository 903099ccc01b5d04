"""Shared by the Python package's suites: a cpu device with the options every kiln test uses (no
persistent cache, no autotuning, so results and kernel counts never depend on earlier runs),
made the default device for the whole session."""
import os

import numpy as np
import pytest

import kiln

TEST_OPTIONS = {"compilation.cache": "none", "autotune.cache": "none", "autotune.enabled": False}

# Each float dtype's tolerance against numpy's float64: (rtol, atol).
TOLERANCE = {np.float64: (1e-12, 1e-12), np.float32: (2e-6, 2e-6), np.float16: (2e-3, 2e-3)}


def open_test_device(name="cpu", **extra):
    return kiln.Device(name, {**TEST_OPTIONS, **extra})


@pytest.fixture(scope="session", autouse=True)
def dev():
    return kiln.set_default_device(open_test_device())


@pytest.fixture(scope="session")
def source_dir():
    """The kiln source tree: $KILN_SOURCE_DIR (ctest sets it), else the tree these tests are in."""
    path = os.environ.get("KILN_SOURCE_DIR") or os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if not os.path.isfile(os.path.join(path, "include", "kiln", "ops.def")):
        pytest.fail(f"{path} is not the kiln source tree (no include/kiln/ops.def): set KILN_SOURCE_DIR")
    return path


def assert_close(got, want, dtype=np.float64, scale=1.0):
    """kiln's result `got` (a Tensor) against numpy's `want` within `dtype`'s tolerance."""
    rtol, atol = TOLERANCE[np.dtype(dtype).type]
    g = np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_allclose(g.astype(np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol * scale)
