#!/usr/bin/env python3
"""DLPack with numpy through the C API (ctypes over libkiln.so): np.from_dlpack of a kiln tensor
and kiln_tensor_from_dlpack of a numpy array, both without a copy (the same address).
Usage: dlpack_numpy.py LIBKILN"""
import ctypes
import sys

import numpy as np

lib = ctypes.CDLL(sys.argv[1])
P = ctypes.c_void_p
for name, args in {"kiln_device_open": [ctypes.c_char_p, P, ctypes.POINTER(P)],
                   "kiln_arange": [P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.POINTER(P)],
                   "kiln_mul_scalar": [P, ctypes.c_double, ctypes.POINTER(P)],
                   "kiln_tensor_to_dlpack": [P, ctypes.POINTER(P)],
                   "kiln_tensor_from_dlpack": [P, P, ctypes.POINTER(P)],
                   "kiln_options_create": [ctypes.POINTER(P)],
                   "kiln_options_set": [P, ctypes.c_char_p, ctypes.c_char_p],
                   "kiln_options_release": [P],
                   "kiln_tensor_release": [P], "kiln_device_release": [P]}.items():
    getattr(lib, name).argtypes = args
lib.kiln_last_error.restype = ctypes.c_char_p
capi = ctypes.pythonapi
capi.PyCapsule_New.restype = ctypes.py_object
capi.PyCapsule_New.argtypes = [P, ctypes.c_char_p, P]
capi.PyCapsule_GetPointer.restype = P
capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


def ok(status):
    if status != 0:
        raise SystemExit(f"kiln: {lib.kiln_last_error().decode()}")


def data_pointer(managed):  # DLManagedTensor starts with DLTensor, which starts with void* data
    return ctypes.cast(managed, ctypes.POINTER(P))[0]


# No persistent cache: the default scope would keep one beside the python3 executable.
options = P()
ok(lib.kiln_options_create(ctypes.byref(options)))
for key, value in [(b"compilation.cache", b"none"), (b"autotune.cache", b"none"),
                   (b"autotune.enabled", b"false")]:
    ok(lib.kiln_options_set(options, key, value))
dev = P()
ok(lib.kiln_device_open(b"cpu", options, ctypes.byref(dev)))
lib.kiln_options_release(options)

# kiln -> numpy.
x, y, managed = P(), P(), P()
ok(lib.kiln_arange(dev, 0, 12, 1, 0, ctypes.byref(x)))  # KILN_F32
ok(lib.kiln_mul_scalar(x, 0.5, ctypes.byref(y)))
ok(lib.kiln_tensor_to_dlpack(y, ctypes.byref(managed)))
kiln_address = data_pointer(managed)


class Exported:
    def __dlpack__(self, stream=None):
        return capi.PyCapsule_New(managed, b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


a = np.from_dlpack(Exported())
assert a.ctypes.data == kiln_address, (hex(a.ctypes.data), hex(kiln_address))
assert a.tolist() == [i * 0.5 for i in range(12)], a
lib.kiln_tensor_release(x)
lib.kiln_tensor_release(y)
assert a.sum() == 33.0  # numpy's array keeps kiln's buffer alive
print(f"kiln -> numpy: same address {hex(kiln_address)}: {a[:4]} ...")

# numpy -> kiln.
b = np.arange(6, dtype=np.float32).reshape(2, 3) * 2
capsule = b.__dlpack__()
taken = capi.PyCapsule_GetPointer(capsule, b"dltensor")
t, out = P(), P()
ok(lib.kiln_tensor_from_dlpack(dev, taken, ctypes.byref(t)))
capi.PyCapsule_SetName(capsule, b"used_dltensor")  # kiln owns it now
ok(lib.kiln_tensor_to_dlpack(t, ctypes.byref(out)))
assert data_pointer(out) == b.ctypes.data, (hex(data_pointer(out)), hex(b.ctypes.data))
c = np.from_dlpack(type("Back", (), {"__dlpack__": lambda self, stream=None: capi.PyCapsule_New(out, b"dltensor", None),
                                     "__dlpack_device__": lambda self: (1, 0)})())
assert c.ctypes.data == b.ctypes.data and (c == b).all()
lib.kiln_tensor_release(t)
lib.kiln_device_release(dev)
print(f"numpy -> kiln -> numpy: same address {hex(b.ctypes.data)}")
