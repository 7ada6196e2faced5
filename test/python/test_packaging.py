"""Import-time properties of the package."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_importing_fa4_mlir_does_not_import_mlir():
    # The runtime and torch entry points must work on machines without the MLIR bindings.
    code = ("import sys, fa4_mlir, fa4_mlir.errors, fa4_mlir.knobs, fa4_mlir.configs, fa4_mlir.layouts, "
            "fa4_mlir.kernels, fa4_mlir.core.ptxas, fa4_mlir.tools.fa4_compile, "
            "fa4_mlir.placement, fa4_mlir.target; print(any(m == 'mlir' or m.startswith('mlir.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_host_launch_paths_do_not_import_mlir():
    # What the torch ops call per launch on the GPU machine, which has no MLIR bindings: the packed kernel's
    # compacted grid (it once imported the IR-building schedule module), the paged, gathered and split-KV
    # arguments and grids, the combine's grid.
    code = """
import sys
import numpy as np
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.attention_op import paged_config, varlen_config
from fa4_mlir.configs.combine import CombineConfig
from fa4_mlir.kernels.attention import (gather_arguments, launch_geometry, paged_arguments, varlen_arguments,
                                        varlen_geometry)
from fa4_mlir.kernels.attention.combine import launch_geometry as combine_geometry
from fa4_mlir.kernels.attention.splitkv import split_geometry
for target in ("sm_90a", "sm_100a"):
    c = varlen_config(target, "bf16", 128, True, 1, 4096)
    varlen_geometry(c, 3, 1000, 700, 16, 4096)
    varlen_arguments(c, 0, 0, 1000, 0, 3)
g = paged_config("sm_90a", "bf16", 128, False, 8, 40, 8192, 1)
launch_geometry(g, 2, 1, 64, 8192)
paged_arguments(g, 0, 205, 0, 410)
gather_arguments(g, 0, 0, (40 * 8 * 128, 8 * 128, 128), (40 * 8 * 128, 8 * 128, 128))
split_geometry(paged_config("sm_90a", "bf16", 128, False, 8, 64, 8192, 1, split_kv=True), 1, 1, 64, 8192, 4)
combine_geometry(CombineConfig(target="sm_90a", head_dim=128), 1, 1, 64)
print(any(m == "mlir" or m.startswith("mlir.") for m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_facade_defers_numpy_and_keeps_the_elements_builders():
    # mlir.ir imports numpy (about 50 ms) for four attribute builders: the facade imports it without
    # numpy and registers the same builders, which load numpy when first called.
    code = ("import sys; from fa4_mlir._mlir import ir; assert 'numpy' not in sys.modules; "
            "ctx = ir.Context(); built = [str(ir.AttrBuilder.get(k)(v, ctx)) for k, v in "
            "[('F64ElementsAttr', [1.0, 2.5]), ('I32ElementsAttr', [1, 2]), ('I64ElementsAttr', [3]), "
            "('IndexElementsAttr', [4, 5])]]; print('numpy' in sys.modules, built)")
    deferred = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    upstream = subprocess.run([sys.executable, "-c", "import numpy; " + code.replace(
        "assert 'numpy' not in sys.modules; ", "")], capture_output=True, text=True, check=True).stdout
    assert deferred == upstream and deferred.startswith("True [")


def test_only_the_facade_imports_the_bindings():
    offenders = []
    for path in (ROOT / "fa4_mlir").rglob("*.py"):
        if path.name == "_mlir.py":
            continue
        text = path.read_text()
        if "from mlir" in text or "import mlir" in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_every_registered_pass_has_a_summary_and_a_lit_test():
    from fa4_mlir.passes import PASSES

    transforms = pathlib.Path(__file__).resolve().parents[1] / "Transforms"
    for name, load in PASSES.items():
        cls = load()
        assert cls.name == name and cls.summary()
        assert (transforms / f"{name}.mlir").is_file(), f"missing test/Transforms/{name}.mlir"


def _source_files() -> set[str]:
    """Every file of the package source tree, as its path inside a wheel."""
    return {str(p.relative_to(ROOT)) for p in (ROOT / "fa4_mlir").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_the_wheel_holds_every_module_of_the_source_tree(tmp_path):
    # Build from a copy holding only what the build reads, so a stale build/ folder in the checkout
    # can neither hide a missing module nor add a deleted one.
    src = tmp_path / "src"
    shutil.copytree(ROOT / "fa4_mlir", src / "fa4_mlir", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
                            str(src)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("fa4_mlir-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packaged = {n for n in names if not n.split("/", 1)[0].endswith((".dist-info", ".data"))}
    expected = _source_files()
    assert expected - packaged == set(), f"missing from the wheel: {sorted(expected - packaged)}"
    assert packaged - expected == set(), f"in the wheel but not in fa4_mlir/: {sorted(packaged - expected)}"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    for tool in ("fa4-opt", "fa4-compile", "fa4-layout"):
        assert f"{tool} = fa4_mlir.tools." in scripts, scripts


def test_every_source_folder_is_a_package():
    # find-based packaging only picks up folders with an __init__.py
    folders = {p.parent for p in (ROOT / "fa4_mlir").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()) == []
