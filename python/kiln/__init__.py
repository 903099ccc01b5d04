"""kiln from Python: lazy tensors that kiln fuses, compiles and runs when a result is needed.

    import kiln, numpy as np
    x = kiln.tensor(np.ones((2, 3), np.float32))
    print(kiln.softmax(x).numpy())

A pure-Python package over kiln's C API (libkiln.so, through ctypes); docs/python.md has the
whole story: devices and options, numpy and DLPack (zero-copy both ways), errors, threads, .kg
graphs and dumps."""
from ._capi import (DeviceError, Error, InvalidArgumentError, InvalidOperationError, UnsupportedError,
                    lib as _lib)
from ._device import Device, Stats, default_device, set_default_device
from ._dtypes import bfloat16
from ._graph import Graph, GraphInput, dump, run_graph
from ._ops import *  # noqa: F401,F403 (every op: _ops.__all__)
from ._ops import __all__ as _ops_all
from ._tensor import Tensor
from ._trace import Traced, trace

__version__ = _lib.kiln_version().decode()

__all__ = sorted(["Device", "Stats", "default_device", "set_default_device", "Tensor", "Graph", "GraphInput",
                  "dump", "run_graph", "bfloat16", "Error", "InvalidArgumentError", "InvalidOperationError",
                  "DeviceError", "UnsupportedError", "trace", "Traced"] + _ops_all)
