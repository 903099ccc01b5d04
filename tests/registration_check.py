#!/usr/bin/env python3
"""Checks ctest's registered tests: each device and CPU-target variant carries its labels and the
environment that selects it (a lost ENVIRONMENT silently runs a vulkan:0 suite on cpu)."""
import json
import subprocess
import sys

ctest = sys.argv[1] if len(sys.argv) > 1 else "ctest"
listing = json.loads(subprocess.run([ctest, "--show-only=json-v1"], check=True,
                                    capture_output=True, text=True).stdout)
problems = []
counts = {"vulkan:0.": 0, "x86-64-v3.": 0, "cuda:0.": 0}


def props(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


for test in listing["tests"]:
    name, p = test["name"], props(test)
    labels, env = p.get("LABELS", []), p.get("ENVIRONMENT", [])
    # Label perf: the cost model against this machine's measured rates, on purpose.
    if ("KILN_CPU_RATES=reference" not in env and name not in ("TestRegistration", "LayerDependencies")
            and "perf" not in labels):
        problems.append(f"{name}: no KILN_CPU_RATES=reference in its environment {env}")
    if name.startswith("vulkan:0."):
        counts["vulkan:0."] += 1
        if "vulkan" not in labels or "KILN_TEST_DEVICE=vulkan:0" not in env:
            problems.append(f"{name}: labels {labels}, environment {env}")
    if name.startswith("cuda:0."):
        counts["cuda:0."] += 1
        if "gpu" not in labels or "KILN_TEST_DEVICE=cuda:0" not in env:
            problems.append(f"{name}: labels {labels}, environment {env}")
    if name.startswith("x86-64-v3."):
        counts["x86-64-v3."] += 1
        if "x86-64-v3" not in labels or "KILN_COMPILATION_CPU_TARGET=x86-64-v3" not in env:
            problems.append(f"{name}: labels {labels}, environment {env}")
for prefix, n in counts.items():
    if n == 0:
        problems.append(f"no {prefix}* tests are registered")
for p in problems[:20]:
    print(p)
print(f"{len(listing['tests'])} tests checked, {len(problems)} problems "
      f"({', '.join(f'{k}*: {v}' for k, v in counts.items())})")
sys.exit(1 if problems else 0)
