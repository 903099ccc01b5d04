"""A float sum adds in one order: the same bits on every x86-64 instruction set, at every tuning of
its kernel, and whether its kernel has its sizes fixed or takes them at run time. Left to LLVM, AVX2
(8 lanes) and AVX-512 (16) summed a row of 1000 float32 in different orders, up to 2.3e-5 apart, and
so did a tuned kernel and an untuned one on one machine."""
import numpy as np
import pytest

import kiln
from conftest import TEST_OPTIONS

# Row lengths around the 16 lanes times 4 accumulators a reduction runs in, and past the sum
# blocks' 128 and 16384 terms.
LENGTHS = [9, 17, 63, 64, 65, 100, 129, 1000, 4096, 40000]

SETUPS = {
    "host": {},
    "x86-64-v3": {"compilation.cpu_target": "x86-64-v3"},
    "tuned": {"autotune.enabled": True},
    "dynamic": {"shapes.policy": "dynamic"},
}


def inputs():
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((3, n)).astype(np.float32) for n in LENGTHS]
    xs.append(rng.standard_normal((3, 1000)))  # float64
    return xs, rng.standard_normal((4, 33, 77)).astype(np.float32)


def results(setup):
    """Each sum's label and result on a device of `setup`."""
    dev = kiln.Device("cpu", {**TEST_OPTIONS, **SETUPS[setup]})
    rows, cube = inputs()
    out = []
    for x in rows:
        t = kiln.tensor(x, device=dev)
        label = f"{x.dtype}[3,{x.shape[1]}]"
        out += [(f"sum {label}", kiln.sum(t, axis=-1)), (f"sum all {label}", kiln.sum(t)),
                (f"mean {label}", kiln.mean(t * t, axis=-1)), (f"softmax {label}", kiln.softmax(t, axis=-1))]
    t = kiln.tensor(cube, device=dev)
    out += [("sum (1,2)", kiln.sum(t, axis=(1, 2))), ("sum (0,2)", kiln.sum(t, axis=(0, 2))),
            ("sum 0", kiln.sum(t, axis=0))]
    return [(label, np.asarray(r)) for label, r in out]


@pytest.fixture(scope="module")
def host():
    return results("host")


@pytest.mark.parametrize("setup", ["x86-64-v3", "tuned", "dynamic"])
def test_a_sum_has_the_same_bits_everywhere(host, setup):
    other = results(setup)
    assert [label for label, _ in other] == [label for label, _ in host]
    differ = [label for (label, a), (_, b) in zip(host, other) if a.tobytes() != b.tobytes()]
    assert not differ, f"{setup}: {len(differ)} of {len(host)} results differ from the host's untuned ones: {differ}"


def test_the_sums_are_sums(host):
    rows, _ = inputs()
    got = dict(host)
    for x in rows:
        want = x.astype(np.float64).sum(-1)
        np.testing.assert_allclose(got[f"sum {x.dtype}[3,{x.shape[1]}]"], want, rtol=1e-5, atol=1e-4)
