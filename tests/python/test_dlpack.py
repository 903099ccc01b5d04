"""DLPack both ways with numpy and torch: the same memory (equal data pointers), the lifetimes
(each side keeps the other's buffer alive as long as it needs it, and frees it after), every
dtype, and the capsules nobody consumed."""
import ctypes
import gc
import sys

import numpy as np
import pytest

import kiln
from kiln._dlpack import DLManagedTensor

torch = pytest.importorskip("torch", reason="python3-torch is not installed")


def address(x):
    """The data pointer of a numpy array or a torch tensor."""
    return x.ctypes.data if isinstance(x, np.ndarray) else x.data_ptr()


def test_numpy_to_kiln_to_numpy_is_one_buffer():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = kiln.from_dlpack(a)
    back = np.from_dlpack(t)
    assert address(back) == address(a)
    assert address(np.asarray(t)) == address(a)
    np.testing.assert_array_equal(back, a)
    # kiln reads the array's memory when it realizes, not when the tensor was made.
    y = t * 2
    a[0, 0] = 100
    assert np.asarray(y)[0, 0] == 200


def test_kiln_to_numpy_and_torch_is_one_buffer():
    y = kiln.exp(kiln.tensor(np.linspace(-1, 1, 10, dtype=np.float32)))
    n = np.from_dlpack(y)
    tt = torch.from_dlpack(y)
    assert address(n) == address(tt) == address(np.asarray(y))
    np.testing.assert_allclose(n, np.exp(np.linspace(-1, 1, 10, dtype=np.float32)), rtol=1e-6)
    assert tt.dtype == torch.float32 and tt.shape == (10,)
    np.testing.assert_array_equal(tt.numpy(), n)


def test_torch_to_kiln_to_torch_is_one_buffer():
    x = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4)
    k = kiln.from_dlpack(x)
    assert k.shape == (2, 3, 4) and k.dtype == np.float64
    assert address(torch.from_dlpack(k)) == address(x)
    y = kiln.tanh(k) * 2
    ty = torch.from_dlpack(y)
    assert address(ty) == address(np.asarray(y))
    torch.testing.assert_close(ty, torch.tanh(x) * 2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8, np.bool_])
def test_every_dtype_round_trips(dtype):
    a = (np.arange(20) % 7).astype(dtype).reshape(4, 5)
    t = kiln.from_dlpack(a)
    assert t.dtype == np.dtype(dtype)
    b = np.asarray(t)
    assert b.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(b, a)
    if dtype == np.bool_:
        # numpy < 1.25 exports no bool through DLPack: kiln reads the bytes in place as uint8 and
        # casts them, so the result is a new buffer. (torch < 2 takes no kDLBool either.)
        np.testing.assert_array_equal(np.asarray(t & True), a)
        return
    assert address(b) == address(a)
    tt = torch.from_dlpack(t)
    assert address(tt) == address(a)
    np.testing.assert_array_equal(tt.numpy(), a)


def test_bfloat16_goes_to_torch_and_back():
    x = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
    k = kiln.from_dlpack(x)
    assert k.dtype is kiln.bfloat16
    y = torch.from_dlpack(k * 2)
    assert y.dtype == torch.bfloat16
    assert y.tolist() == [3.0, -4.5, 6.0]
    np.testing.assert_array_equal(np.asarray(k.astype(np.float32)), [1.5, -2.25, 3.0])
    with pytest.raises(TypeError, match="numpy has no bfloat16"):
        np.asarray(k)


def test_strided_producers_are_copied():
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    view = a[:, ::2]
    t = kiln.from_dlpack(view)
    assert address(np.asarray(t)) != address(view)
    np.testing.assert_array_equal(np.asarray(t), view)
    tt = torch.arange(12.0).reshape(3, 4).t()
    np.testing.assert_array_equal(np.asarray(kiln.from_dlpack(tt)), tt.numpy())


def test_each_side_keeps_the_buffer_as_long_as_it_needs_it():
    a = np.full((64,), 3.0)
    base = sys.getrefcount(a)
    t = kiln.from_dlpack(a)
    assert sys.getrefcount(a) == base + 1  # kiln holds the array through its DLPack tensor
    y = t + 1
    del t
    gc.collect()
    assert sys.getrefcount(a) == base + 1  # y still reads it
    y.realize()
    del y
    gc.collect()
    assert sys.getrefcount(a) == base  # released once nothing reads it

    z = kiln.sqrt(kiln.full((1000,), 16.0, np.float64))
    n = np.asarray(z)
    del z
    gc.collect()
    _ = [kiln.tensor(np.ones(1000)).realize() for _ in range(20)]  # reuse freed memory, if any was
    assert np.all(n == 4.0)  # numpy's array kept kiln's buffer


def test_a_capsule_nobody_consumed_frees_the_tensor():
    a = np.ones(16)
    base = sys.getrefcount(a)
    t = kiln.from_dlpack(a)
    capsule = t.__dlpack__()
    del t
    gc.collect()
    assert sys.getrefcount(a) == base + 1  # the capsule holds kiln's buffer, which holds the array
    del capsule
    gc.collect()
    assert sys.getrefcount(a) == base


class AsBfloat16:
    """A numpy uint16 array's DLPack export, described as bfloat16 (same size): a kiln bf16 tensor
    over the array's own memory, which holds the array as long as kiln holds the tensor."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        capsule = self.array.__dlpack__()
        api = ctypes.pythonapi
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        managed = DLManagedTensor.from_address(api.PyCapsule_GetPointer(capsule, b"dltensor"))
        managed.dl_tensor.code = 4  # kDLBfloat
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_a_consumer_that_refuses_keeps_its_own_error():
    """numpy refuses bfloat16 after it took the capsule: numpy's exception comes out, not one the
    capsule's destructor raised, and the refused tensor is freed all the same."""
    a = np.array([0x3FC0, 0xC010], np.uint16)  # 1.5, -2.25 as bfloat16
    base = sys.getrefcount(a)
    k = kiln.from_dlpack(AsBfloat16(a))
    assert k.dtype is kiln.bfloat16
    np.testing.assert_array_equal(np.asarray(k.astype(np.float32)), [1.5, -2.25])
    assert sys.getrefcount(a) == base + 1
    with pytest.raises(Exception) as refused:
        np.from_dlpack(k)
    assert not isinstance(refused.value, SystemError), refused.value
    assert "dtype" in str(refused.value).lower(), refused.value
    del k, refused
    gc.collect()
    assert sys.getrefcount(a) == base


def test_producers_on_another_device_are_refused():
    class OnGpu:
        def __dlpack__(self, stream=None):
            raise AssertionError("kiln must not ask for the capsule")

        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

    with pytest.raises(kiln.UnsupportedError, match="host memory"):
        kiln.from_dlpack(OnGpu())
    with pytest.raises(TypeError, match="does not support DLPack"):
        kiln.from_dlpack([1, 2, 3])


def test_torch_tensors_that_need_gradients_say_so():
    with pytest.raises(RuntimeError, match="detach"):
        kiln.from_dlpack(torch.ones(3, requires_grad=True))


def test_a_read_only_array_says_that_kiln_tensor_copies_it():
    """numpy exports no read-only array through DLPack (kiln's own results are read-only, and so
    is a broadcast view): the refusal names the producer and the way that works."""
    ro = np.ones(3, np.float32)
    ro.setflags(write=False)
    for x in (ro, np.broadcast_to(np.float32(2), (3,)), (kiln.tensor(np.ones(3, np.float32)) * 2).numpy()):
        with pytest.raises(BufferError, match=r"ndarray.__dlpack__\(\) refused to export it \(.*\); "
                                              r"kiln.tensor\(\) copies it instead"):
            kiln.from_dlpack(x)
        np.testing.assert_array_equal(np.asarray(kiln.tensor(x)), np.asarray(x))
