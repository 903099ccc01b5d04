"""Devices: options reach the device, statistics of each realize, the default device, kiln.toml
and the environment on request, and the cache a Python process keeps by default."""
import os
import subprocess
import sys

import numpy as np

import kiln
from conftest import open_test_device


def three_ops(device):
    x = kiln.arange(0, 1000, dtype=np.float32, device=device)
    return kiln.sqrt(kiln.exp(x * 1e-3) * x)


def test_options_reach_the_device():
    fused, unfused = open_test_device(), open_test_device(**{"fusion.enabled": False, "threads": 1})
    three_ops(fused).realize()
    three_ops(unfused).realize()
    assert fused.last_stats().kernels == 1
    assert unfused.last_stats().kernels == 4  # one per op: mul, exp, mul, sqrt
    np.testing.assert_array_equal(np.asarray(three_ops(fused)), np.asarray(three_ops(unfused)))


def test_stats_of_each_realize():
    d = open_test_device()
    y = three_ops(d).realize()
    s = d.last_stats()
    assert isinstance(s, kiln.Stats)
    assert (s.kernels, s.compiled, s.plan_cache_hit) == (1, 1, False)
    assert s.compile_ms > 0 and s.run_ms >= 0
    three_ops(d).realize()  # the same graph again: its plan, nothing compiled
    s = d.last_stats()
    assert (s.kernels, s.compiled, s.plan_cache_hit) == (1, 0, True)
    assert y.device is d and repr(d) == "kiln.Device('cpu')"


def test_the_default_device():
    mine = kiln.default_device()
    assert kiln.tensor([1.0]).device is mine
    other = open_test_device()
    try:
        assert kiln.set_default_device(other) is other
        assert kiln.tensor([1.0]).device is other and kiln.zeros(2).device is other
    finally:
        kiln.set_default_device(mine)
    assert kiln.tensor([1.0], device=other).device is other


def test_the_reference_device_computes_in_float64():
    ref = open_test_device("reference")
    a = np.linspace(-2, 2, 7)
    np.testing.assert_allclose(np.asarray(kiln.tanh(kiln.tensor(a, device=ref))), np.tanh(a), rtol=1e-15)


def run_python(code, cwd, env=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_") or k == "KILN_LIBRARY"}
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=full_env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


PROBE = """
import kiln, numpy as np
d = kiln.Device("cpu"{args})
x = kiln.arange(0, 1000, dtype=np.float32, device=d)
kiln.sqrt(kiln.exp(x * 1e-3) * x).realize()
print(d.last_stats().kernels)
"""


def test_kiln_toml_and_the_environment_on_request(tmp_path):
    # No cache anywhere: kiln.toml's default scope, `target`, is a file beside the interpreter.
    (tmp_path / "kiln.toml").write_text('[fusion]\nenabled = false\n[compilation]\ncache = "none"\n'
                                        '[autotune]\nenabled = false\ncache = "none"\n')
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    assert run_python(PROBE.format(args=", use_config=True"), tmp_path, env).strip() == "4"
    # Without use_config, neither kiln.toml nor KILN_* is read.
    assert run_python(PROBE.format(args=""), tmp_path, {**env, "KILN_FUSION_ENABLED": "false"}).strip() == "1"
    assert run_python(PROBE.format(args=", use_config=True"), tmp_path.parent,
                      {**env, "KILN_CONFIG": str(tmp_path / "kiln.toml")}).strip() == "4"
    quiet = {"KILN_COMPILATION_CACHE": "none", "KILN_AUTOTUNE_CACHE": "none", "KILN_AUTOTUNE_ENABLED": "false"}
    assert run_python(PROBE.format(args=", use_config=True"), tmp_path.parent,
                      {**env, **quiet, "KILN_FUSION_ENABLED": "false"}).strip() == "4"


def test_a_python_process_keeps_its_cache_in_the_user_s_cache_directory(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    run_python(PROBE.format(args=", {'autotune.enabled': False}"), tmp_path, env)
    assert (tmp_path / "cache" / "kiln" / "cache.sqlite").exists()
    # A second process finds the plan there: nothing is compiled.
    code = PROBE.format(args=", {'autotune.enabled': False}") + "print(d.last_stats().compiled)\n"
    assert run_python(code, tmp_path, env).split() == ["1", "0"]
