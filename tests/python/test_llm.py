"""The LLM decode workload (examples/llm): kiln's tokens equal the numpy reference's, in Python
and through the C++ API, and a decode loop compiles only in its first step (the position is an
input, not a shape: one plan serves every step) and writes its key/value caches in place."""
import importlib.util
import os
import re
import subprocess
import sys

import pytest


def llama_module(source_dir):
    spec = importlib.util.spec_from_file_location("llama", os.path.join(source_dir, "examples", "llm", "llama.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_llama(source_dir, tmp_path, *args):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))  # a cold cache of its own
    r = subprocess.run([sys.executable, os.path.join(source_dir, "examples", "llm", "llama.py"), *args],
                       env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def steps_in_place(out):
    """How many steps wrote every layer's new key/value caches over the old ones (buffer donation)."""
    m = re.search(r"caches updated in place in (\d+) of (\d+) steps", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def compile_counts(out):
    m = re.search(r"(\d+) steps, (\d+) kernels a step, (\d+) kernels compiled in all \(first step (\d+)", out)
    assert m, out
    return tuple(int(g) for g in m.groups())


@pytest.mark.parametrize("topk,traced", [(1, False), (4, False), (4, True)])
def test_python_decoder_matches_numpy_and_compiles_once(source_dir, tmp_path, topk, traced):
    """Also with the step traced once and replayed (kiln.trace): the same tokens, compiles and
    caches written in place."""
    steps = 200 if topk == 4 else 40
    out = run_llama(source_dir, tmp_path, "--steps", str(steps), "--topk", str(topk), *(["--traced"] if traced else []))
    assert f"the {steps} tokens match numpy's" in out, out
    positions, kernels, compiled, first = compile_counts(out)
    assert positions == steps + 7  # the 8 prompt tokens, then one step per generated token but the last
    assert compiled == first > 0, out  # every kernel compiled in the first step, none after
    assert steps_in_place(out) == (positions, positions), out  # the caches are written in place
    tokens = re.search(r"^tokens: (.*)$", out, re.M).group(1).split()
    if topk == 4:
        assert len(set(tokens)) > 50, tokens  # sampling, not one token repeated


def test_cpp_decoder_prints_the_numpy_tokens(source_dir, tmp_path):
    exe = os.environ.get("KILN_LLM_DECODE")
    if not exe:
        pytest.skip("KILN_LLM_DECODE (the kiln_llm_decode program) is not set: ctest sets it")
    steps, topk = 60, 4
    r = subprocess.run([exe, "--steps", str(steps), "--topk", str(topk), "--cache", "none"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    got = [int(t) for t in re.search(r"^tokens: (.*)$", r.stdout, re.M).group(1).split()]
    positions, kernels, compiled, first = compile_counts(r.stdout)
    assert compiled == first > 0, r.stdout
    assert steps_in_place(r.stdout) == (positions, positions), r.stdout
    llama = llama_module(source_dir)
    cfg = llama.Config()
    ref, _ = llama.generate(llama.NumpyDecoder(cfg, llama.weights(cfg)), llama.prompt_tokens(cfg), steps, topk)
    assert got == ref


def test_cpp_decoder_rejects_bad_arguments(tmp_path):
    exe = os.environ.get("KILN_LLM_DECODE")
    if not exe:
        pytest.skip("KILN_LLM_DECODE is not set: ctest sets it")
    for args, what in [(["--steps", "506"], "--steps must be in [1, 505]"), (["--bogus"], "usage:"),
                       (["--device", "nosuch:0"], "nosuch"),
                       # past int64, or not a whole integer: no count (it aborted, or truncated)
                       (["--steps", "9223372036854775807"], "--steps must be in [1, 505]"),
                       (["--steps", "99999999999999999999"], "--steps: expected an integer, got"),
                       (["--steps", "1e2"], "--steps: expected an integer, got '1e2'"),
                       (["--topk", "2.5"], "--topk: expected an integer, got '2.5'")]:
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert r.returncode != 0 and what in r.stderr, (args, r.stderr)


def test_python_decoder_rejects_bad_arguments(source_dir, tmp_path):
    # One-line usage errors before any work (0 and negative steps ran as a passing check, or
    # ended in an IndexError; --topk 0 in a ZeroDivisionError; a bad device in a traceback).
    script = os.path.join(source_dir, "examples", "llm", "llama.py")
    for args, what in [(["--steps", "0"], "--steps must be at least 1, got 0"),
                       (["--steps", "-7"], "--steps must be at least 1, got -7"),
                       (["--steps", "506"], "506 steps after the prompt do not fit a context of 512 (at most 505)"),
                       (["--topk", "0"], "--topk must be in [1, 4096], got 0"),
                       (["--topk", "4097"], "--topk must be in [1, 4096], got 4097"),
                       (["--steps", "2", "--device", "nosuch"], "llama.py: unknown device 'nosuch'")]:
        r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path)
        assert r.returncode != 0 and what in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr, (args, r.stderr)
