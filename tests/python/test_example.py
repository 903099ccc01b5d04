"""examples/python/train_mlp.py runs, checks its own results and prints what it promises."""
import os
import subprocess
import sys


def test_the_example_runs(source_dir, tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))  # its cache, not the user's
    r = subprocess.run([sys.executable, os.path.join(source_dir, "examples", "python", "train_mlp.py")],
                       env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["[[0.33333334 0.33333334 0.33333334]", " [0.33333334 0.33333334 0.33333334]]"], lines[:2]
    assert "kernel k0" in r.stdout and "plan from cache: True" in r.stdout
    assert lines[-1] == "ok"
    assert (tmp_path / "kiln" / "cache.sqlite").exists()
