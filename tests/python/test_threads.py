"""Python threads on one device: recording, realizing (at the same time: ctypes lets go of the GIL
around every call), reading results and DLPack, on tensors of their own and on shared ones."""
import threading

import numpy as np

import kiln
from conftest import assert_close, open_test_device

THREADS, ROUNDS = 8, 12


def run_threads(work):
    errors = []

    def guarded(i):
        try:
            work(i)
        except BaseException as e:  # noqa: B902 (reported below, with its thread)
            errors.append((i, e))

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    assert not errors, errors


def test_threads_compute_their_own_graphs_on_one_device():
    d = open_test_device()
    rng = np.random.default_rng(1)
    data = [rng.standard_normal((16, 24)) for _ in range(THREADS)]

    def work(i):
        a = data[i]
        for r in range(ROUNDS):
            t = kiln.tensor(a, device=d)
            y = kiln.softmax(t * (r + 1), axis=1) + kiln.tanh(t).sum(axis=0, keepdims=True)
            z = a * (r + 1)
            e = np.exp(z - z.max(1, keepdims=True))
            assert_close(y, e / e.sum(1, keepdims=True) + np.tanh(a).sum(0, keepdims=True))

    run_threads(work)


def test_threads_share_tensors_and_realize_them_once():
    d = open_test_device()
    base = kiln.tensor(np.linspace(0, 1, 4096), device=d)
    shared = kiln.exp(base) * 2  # realized by whichever thread gets there first; the others wait
    want = np.exp(np.linspace(0, 1, 4096)) * 2
    results = [None] * THREADS

    def work(i):
        results[i] = np.asarray(shared)  # realizes, or waits for the realize under way
        mine = shared + i
        assert_close(mine, want + i)
        assert_close(np.from_dlpack(kiln.sqrt(mine)), np.sqrt(want + i))

    run_threads(work)
    addresses = {r.ctypes.data for r in results}
    assert len(addresses) == 1  # one buffer: the shared tensor was computed once
    for r in results:
        np.testing.assert_array_equal(r, results[0])


def test_threads_import_and_export_through_dlpack():
    d = open_test_device()

    def work(i):
        for r in range(ROUNDS):
            a = np.full((32, 8), float(i * 100 + r), np.float32)
            t = kiln.from_dlpack(a, device=d)
            assert np.from_dlpack(t).ctypes.data == a.ctypes.data
            out = np.asarray(kiln.sum(t, axis=1))
            np.testing.assert_array_equal(out, np.full(32, 8.0 * (i * 100 + r), np.float32))

    run_threads(work)
