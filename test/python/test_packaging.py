"""Import-time properties of the package."""

from __future__ import annotations

import pathlib
import subprocess
import sys


def test_importing_fa4_mlir_does_not_import_mlir():
    # The runtime and torch entry points must work on machines without the MLIR bindings.
    code = ("import sys, fa4_mlir, fa4_mlir.errors, fa4_mlir.knobs, fa4_mlir.configs, fa4_mlir.layouts, "
            "fa4_mlir.kernels, fa4_mlir.core.ptxas, fa4_mlir.tools.fa4_compile, "
            "fa4_mlir.placement, fa4_mlir.target; print(any(m == 'mlir' or m.startswith('mlir.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_only_the_facade_imports_the_bindings():
    root = pathlib.Path(__file__).resolve().parents[2]
    offenders = []
    for folder in ("fa4_mlir", "dialects", "passes", "tools"):
        for path in (root / folder).rglob("*.py"):
            if path.name == "_mlir.py":
                continue
            text = path.read_text()
            if "from mlir" in text or "import mlir" in text:
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


def test_every_registered_pass_has_a_summary_and_a_lit_test():
    from fa4_mlir.passes import PASSES

    transforms = pathlib.Path(__file__).resolve().parents[1] / "Transforms"
    for name, load in PASSES.items():
        cls = load()
        assert cls.name == name and cls.summary()
        assert (transforms / f"{name}.mlir").is_file(), f"missing test/Transforms/{name}.mlir"
