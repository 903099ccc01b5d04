#!/usr/bin/env python3
"""The dependency arrows of DESIGN.md §1, checked on every #include of kiln's own code.

Each folder may include its own headers, support/, and the folders its row allows. A folder's
include of another that its row does not allow fails this check (ctest: LayerDependencies),
unless it is one of the exceptions below, each named with the file that still needs it. An
exception that is no longer used also fails, so the list only shrinks. The build enforces the
direct arrows too (each library's include root holds only its own folder, CMakeLists.txt); this
check also catches an include that a transitive link would let through.

Usage: layer_check.py SOURCE_DIR
"""
import os
import re
import sys

ALLOWED = {
    "support": set(),
    "ir": set(),
    "cache": set(),
    "interp": {"ir"},
    "passes": {"ir"},
    "codegen": {"ir"},
    "autotune": {"ir", "codegen", "cache"},
    "runtime": {"ir", "interp", "passes", "codegen", "autotune", "cache"},
    # onnx: the importers are the frontend's (DESIGN.md §1); kiln::Graph and kiln_graph_load read
    # .onnx models through the ONNX importer, which lives in its own folder.
    "frontend": {"ir", "runtime", "onnx"},
    # The ONNX importer builds graph IR, and evaluates shape computations at import with the
    # reference interpreter.
    "onnx": {"ir", "interp"},
    # The kiln program uses the runtime's interface and the data it speaks (ir: graphs, .kg
    # files, tensors; cache: the store `kiln cache` maintains), never the compiler's internals
    # (passes, codegen, autotune, interp): `kiln dump` shows what the executor builds.
    # onnx: `kiln run` / `kiln dump` / `kiln warm` read .onnx models through the importer.
    "tools": {"frontend", "runtime", "ir", "cache", "onnx"},
}

# (file, included folder): includes that cross an arrow, each with its reason, to be removed.
# An unused one fails the check, so the list only shrinks.
EXCEPTIONS = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)
# include/kiln/ holds the public headers: the vocabulary every folder may use (dtypes, shapes,
# errors, the op table) and the two APIs, which only the frontend (and tests) may include.
API_HEADER = re.compile(r'^\s*#\s*include\s+[<"]kiln/(kiln|kiln_c)\.h[>"]', re.M)


def main() -> int:
    root = sys.argv[1]
    errors, used = [], set()
    for folder, allowed in ALLOWED.items():
        for base, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".def")):
                    continue
                path = os.path.join(base, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if folder != "frontend" and API_HEADER.search(text):
                    errors.append(f"{rel} includes kiln's public API (kiln/kiln.h or kiln/kiln_c.h), "
                                  "which only frontend/ implements and uses (DESIGN.md §1)")
                for target in sorted(set(INCLUDE.findall(text))):
                    if target in (folder, "support") or target in allowed or target not in ALLOWED:
                        continue
                    if (rel, target) in EXCEPTIONS:
                        used.add((rel, target))
                        continue
                    errors.append(f"{rel} includes {target}/, which {folder}/ may not depend on "
                                  f"(DESIGN.md §1: {folder}/ -> {', '.join(sorted(allowed)) or 'nothing else'})")
    for rel, target in sorted(EXCEPTIONS - used):
        errors.append(f"layer_check.py: the exception ({rel}, {target}/) is no longer needed: remove it")
    for e in errors:
        print(e)
    print(f"layer check: {len(errors)} problem(s), {len(used)} known exception(s) in use")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
