"""Devices: kiln_device_open with the C API's options, their realize statistics, and the default
device that functions use when given none."""
import collections
import collections.abc
import ctypes
import os
import threading

from ._capi import OwnsHandle, byref, check, lib, string


def python_defaults():
    """What a device takes where its options do not say (docs/python.md, "Devices"), two of kiln's
    defaults that do not suit a library in a Python process:
    - the cache scope `target` keeps the cache beside the running executable, which is the
      interpreter's directory (/usr/bin): kernels, plans and tuning decisions go to the user's
      cache instead, where kiln's `global` scope is ($XDG_CACHE_HOME/kiln/cache.sqlite for an
      absolute XDG_CACHE_HOME, else ~/.cache/kiln/cache.sqlite);
    - the autotuner reports on stdout, which is the program's own output: it reports on stderr,
      as kiln's other loggers do."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    root = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    store = "file=" + os.path.join(root, "kiln", "cache.sqlite")
    return {"compilation.cache": store, "autotune.cache": store, "autotune.logger.targets": "stderr"}


Stats = collections.namedtuple(
    "Stats", "kernels compiled compile_ms run_ms plan_cache_hit dynamic_kernels donated plan_source recompiles")
Stats.__doc__ = """Statistics of a device's most recent realize: kernels launched, of them compiled
(not found in a cache), compile and run times in milliseconds, whether the plan was in the
device's memory from an earlier realize (plan_source "memory"), the kernels taking sizes at run
time, the results written in place, where the plan came from ("memory", "disk", "symbolic" or
"built"), and the lines saying why it compiled for a graph run before at other sizes."""


class _CStats(ctypes.Structure):  # kiln_realize_stats
    _fields_ = [("kernels", ctypes.c_int32), ("compiled", ctypes.c_int32), ("compile_ms", ctypes.c_double),
                ("run_ms", ctypes.c_double), ("plan_cache_hit", ctypes.c_int32)]


def _setting(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Device(OwnsHandle):
    """A kiln device: "cpu", "reference" (the f64 interpreter), "vulkan:N" or "cuda:N".

    `options` maps kiln.toml keys by dotted name to values ({"autotune.enabled": False,
    "compilation.cache": "none", "threads": 4}); each is checked at once, so a misspelt key
    raises kiln.InvalidArgumentError naming the closest one. Without `use_config` the device reads
    neither kiln.toml nor the KILN_* environment; with it, both are read first (kiln.toml found
    upward from `config_dir`, default the working directory) and `options` apply over them.
    """

    __slots__ = ("_h", "name", "__weakref__")
    _pickle_advice = "open the device by name where it is needed"

    def __init__(self, name="cpu", options=None, *, use_config=False, config_dir=None):
        self._h = None
        self.name = name
        settings = {} if use_config else python_defaults()
        if options is not None:
            if not isinstance(options, collections.abc.Mapping):
                raise TypeError(f"options must be a mapping of kiln.toml keys to values, not {type(options).__name__}")
            settings.update(options)
        o = ctypes.c_void_p()
        check(lib.kiln_options_create(byref(o)))
        try:
            if use_config:
                check(lib.kiln_options_use_config(o, None if config_dir is None else string(config_dir, "config_dir")))
            for key, value in settings.items():
                check(lib.kiln_options_set(o, string(key, "an option key"), string(_setting(value), f"option {key}")))
            h = ctypes.c_void_p()
            check(lib.kiln_device_open(string(name, "the device name"), o, byref(h)))
        finally:
            lib.kiln_options_release(o)
        self._h = h

    def __del__(self, _release=lib.kiln_device_release):
        h = getattr(self, "_h", None)
        if h:
            _release(h)

    def last_stats(self):
        """Stats of the most recent realize on this device (from whichever thread)."""
        s = _CStats()
        check(lib.kiln_device_last_stats(self._h, byref(s)))
        dynamic = ctypes.c_int32()
        check(lib.kiln_device_last_dynamic_kernels(self._h, byref(dynamic)))
        donated = ctypes.c_int32()
        check(lib.kiln_device_last_donated(self._h, byref(donated)))
        source = ctypes.c_char_p()
        check(lib.kiln_device_last_plan_source(self._h, byref(source)))
        # Sized first, then copied: another thread's realize may change the text between the two
        # calls, so the second is cut to the first's length at most (a line cut short, perhaps
        # inside a character, never a fault).
        length = ctypes.c_size_t()
        check(lib.kiln_device_last_recompiles(self._h, None, 0, byref(length)))
        buf = ctypes.create_string_buffer(length.value + 1)
        check(lib.kiln_device_last_recompiles(self._h, buf, len(buf), None))
        text = buf.value.decode("utf-8", "replace")
        return Stats(s.kernels, s.compiled, s.compile_ms, s.run_ms, bool(s.plan_cache_hit), dynamic.value,
                     donated.value, source.value.decode("utf-8", "replace"), text.split("\n") if text else [])

    def __repr__(self):
        return f"kiln.Device({self.name!r})"


_default = None
_default_lock = threading.Lock()


def default_device():
    """The device of functions given none: kiln.set_default_device's, else Device("cpu")."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Device("cpu")
    return _default


def set_default_device(device):
    """Makes `device` (a Device, or a name to open with default options) the default; returns it."""
    global _default
    if not isinstance(device, Device):
        device = Device(device)
    with _default_lock:
        _default = device
    return device


def device_of(device):
    if device is None:
        return _default if _default is not None else default_device()
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        raise TypeError(f"device must be a kiln.Device (open it with kiln.Device({device!r}, options)), not a str")
    raise TypeError(f"device must be a kiln.Device, not {type(device).__name__}")
