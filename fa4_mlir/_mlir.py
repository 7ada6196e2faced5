"""The one import site of the MLIR Python bindings.

Every module of fa4-mlir that needs MLIR writes ``from fa4_mlir._mlir import ir, passmanager, ...``.
The bindings come from the pinned ``xtc-mlir-python-bindings==22.1.8.4`` wheel (upstream MLIR 22.1.8);
keeping the import here means a move to another wheel or to LLVM 23 touches one file.

This module is imported lazily: ``fa4_mlir``, ``fa4_mlir.runtime`` and ``fa4_mlir.torch`` must work on a
machine without the bindings, so nothing on their import path may import this module.
"""

from __future__ import annotations

try:
    from mlir import ir, passmanager, rewrite
    from mlir.dialects import arith, func, gpu, irdl, llvm, nvgpu, nvvm, scf, vector
    from mlir.dialects._ods_common import _cext
except ImportError as exc:  # pragma: no cover - exercised only on machines without the bindings
    raise ImportError(
        "fa4-mlir's compiler needs the MLIR Python bindings: "
        "pip install 'xtc-mlir-python-bindings==22.1.8.4' (or pip install -e .)"
    ) from exc

__all__ = ["ir", "passmanager", "rewrite", "arith", "func", "gpu", "irdl", "llvm", "nvgpu", "nvvm", "scf", "vector",
           "_cext"]
