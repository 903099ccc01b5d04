"""DLPack (dlpack/dlpack.h) both ways, without a copy, through PyCapsules named "dltensor".

In: a producer's capsule (numpy's, torch's) is handed to kiln_tensor_from_dlpack; once kiln has
taken the DLManagedTensor the capsule is renamed "used_dltensor", so the producer's capsule
destructor leaves it to kiln, which calls its deleter when the last tensor reading it is gone.
Out: kiln_tensor_to_dlpack's DLManagedTensor goes into a capsule whose destructor is the C API's
kiln_dlpack_capsule_destructor: it calls the deleter if no consumer took the capsule, and, being
C, keeps a pending exception intact (a ctypes callback returning with one set would replace it)."""
import ctypes

from ._capi import lib

KDL_CPU = 1
_KDL_UINT = 1
_KDL_BFLOAT = 4
_KDL_BOOL = 6


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p))]


def _python_function(name, restype, *argtypes):
    """A private prototype of a Python C API function: ctypes.pythonapi's attributes are shared
    with every other user of ctypes, who may set their argtypes differently."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_incref = _python_function("Py_IncRef", None, ctypes.py_object)
_capsule_new = _python_function("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p)
_capsule_is_valid = _python_function("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
_capsule_get_pointer = _python_function("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object,
                                        ctypes.c_void_p)
_capsule_set_name = _python_function("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_void_p)


def _permanent(text):
    """A C string that outlives every capsule naming it (capsules keep the pointer, not a copy,
    and may be freed during interpreter shutdown): referenced once more and never released."""
    buffer = ctypes.create_string_buffer(text)
    _incref(buffer)
    return ctypes.addressof(buffer)


_DLTENSOR = _permanent(b"dltensor")
_USED_DLTENSOR = _permanent(b"used_dltensor")
_destructor = ctypes.cast(lib.kiln_dlpack_capsule_destructor, ctypes.c_void_p).value


def export_capsule(handle, bool_as_uint8=False, bf16_as_uint16=False):
    """A "dltensor" capsule holding the realized buffer of a kiln tensor handle. With
    `bool_as_uint8`, a bool tensor is described as uint8 (same bytes), for consumers that predate
    DLPack's kDLBool (numpy < 1.25, torch < 2); with `bf16_as_uint16`, a bf16 tensor as uint16
    (its bits, for numpy, which has no bfloat16)."""
    from ._capi import check
    managed = ctypes.c_void_p()
    check(lib.kiln_tensor_to_dlpack(handle, ctypes.byref(managed)))
    if bool_as_uint8 or bf16_as_uint16:
        t = DLManagedTensor.from_address(managed.value).dl_tensor
        if (t.code == _KDL_BOOL and bool_as_uint8) or (t.code == _KDL_BFLOAT and bf16_as_uint16):
            t.code = _KDL_UINT
    return _capsule_new(managed, _DLTENSOR, _destructor)


class Exported:
    """The DLPack protocol over one capsule, for numpy.from_dlpack."""

    __slots__ = ("_capsule",)

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None):
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("this DLPack export was consumed already")
        return capsule

    def __dlpack_device__(self):
        return (KDL_CPU, 0)


def import_object(device_handle, x):
    """A kiln tensor handle over a DLPack producer's memory (x.__dlpack__()), zero-copy when
    kiln can use it in place. Raises what kiln or the producer says when it cannot."""
    from ._capi import check
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"{type(x).__name__} does not support DLPack (no __dlpack__); kiln.tensor() copies "
                        "array-likes")
    if hasattr(x, "__dlpack_device__"):
        device_type, _ = x.__dlpack_device__()
        if device_type != KDL_CPU:
            from ._capi import UnsupportedError
            raise UnsupportedError(f"kiln takes DLPack tensors in host memory (kDLCPU, 1), not device type "
                                   f"{device_type}; copy it to the CPU first")
    try:
        capsule = x.__dlpack__()
    except BufferError as e:  # numpy's: a read-only array (kiln's own results too), a broadcast view
        raise BufferError(f"{type(x).__name__}.__dlpack__() refused to export it ({e}); kiln.tensor() copies "
                          "it instead") from e
    if not _capsule_is_valid(capsule, _DLTENSOR):
        raise TypeError(f"{type(x).__name__}.__dlpack__() did not return an unused capsule named 'dltensor'")
    managed = _capsule_get_pointer(capsule, _DLTENSOR)
    out = ctypes.c_void_p()
    check(lib.kiln_tensor_from_dlpack(device_handle, managed, ctypes.byref(out)))
    _capsule_set_name(capsule, _USED_DLTENSOR)  # kiln owns it now: its destructor must not free it
    return out
