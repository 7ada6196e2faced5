"""The one import site of the MLIR Python bindings.

Every module of fa4-mlir that needs MLIR writes ``from fa4_mlir._mlir import ir, passmanager, ...``.
The bindings come from the pinned ``xtc-mlir-python-bindings==22.1.8.4`` wheel (upstream MLIR 22.1.8);
keeping the import here means a move to another wheel or to LLVM 23 touches one file.

This module is imported lazily: ``fa4_mlir``, ``fa4_mlir.runtime`` and ``fa4_mlir.torch`` must work on a
machine without the bindings, so nothing on their import path may import this module.
"""

from __future__ import annotations

import importlib
import sys


def _import_ir_without_numpy():
    """``mlir.ir``, imported without numpy when numpy is not loaded yet (about 50 ms at the start of
    every compile). ``mlir.ir`` imports numpy only to register four ``DenseElementsAttr`` builders
    and skips them without it; ``_register_elements_builders`` then registers the same builders,
    which import numpy when first called. fa4-mlir's compile path never calls them: numpy loads
    when the protocol check starts, while ptxas runs."""
    if "numpy" in sys.modules:
        from mlir import ir

        return ir
    sys.modules["numpy"] = None  # ``import numpy`` raises ImportError
    try:
        from mlir import ir
    finally:
        if sys.modules.get("numpy", 0) is None:
            del sys.modules["numpy"]
    _register_elements_builders(ir)
    return ir


def _register_elements_builders(ir) -> None:
    """The builders ``mlir.ir`` registers when it can import numpy (same kinds, same results)."""
    kinds = {"F64ElementsAttr": ("float64", lambda ctx: ir.F64Type.get(context=ctx)),
             "I32ElementsAttr": ("int32", lambda ctx: ir.IntegerType.get_signless(32, context=ctx)),
             "I64ElementsAttr": ("int64", lambda ctx: ir.IntegerType.get_signless(64, context=ctx)),
             "IndexElementsAttr": ("int64", lambda ctx: ir.IndexType.get(context=ctx))}
    for kind, (dtype, element) in kinds.items():
        def build(x, context, dtype=dtype, element=element):
            import numpy as np

            return ir.DenseElementsAttr.get(np.array(x, dtype=getattr(np, dtype)), type=element(context),
                                            context=context)
        try:
            ir.register_attribute_builder(kind)(build)
        except RuntimeError:  # already registered: mlir.ir was imported earlier, with numpy
            pass


try:
    ir = _import_ir_without_numpy()
    from mlir import passmanager, rewrite
    from mlir.dialects import arith, func, gpu, irdl, llvm, nvvm, scf
    from mlir.dialects._ods_common import _cext
except ImportError as exc:  # pragma: no cover - exercised only on machines without the bindings
    raise ImportError(
        "fa4-mlir's compiler needs the MLIR Python bindings: "
        "pip install 'xtc-mlir-python-bindings==22.1.8.4' (or pip install -e .)"
    ) from exc

# imported on first use (``from fa4_mlir._mlir import vector``): a compile need not load them
_LAZY = ("nvgpu", "vector")


def __getattr__(name: str):
    if name in _LAZY:
        module = importlib.import_module(f"mlir.dialects.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ir", "passmanager", "rewrite", "arith", "func", "gpu", "irdl", "llvm", "nvgpu", "nvvm", "scf", "vector",
           "_cext"]
