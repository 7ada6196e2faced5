"""Kernel authoring in Python (issue 22): build ``fa4`` IR through the MLIR bindings, no IR text.

``Kernel`` declares the parameters once (they become the gpu.func signature and the manifest's ABI)
and builds the body; ``Value`` gives i32 index arithmetic Python operators; ``Pipeline`` and its
``PipelineState`` carry stage and phase with the reference's method names; ``Var`` is a loop- or
branch-carried variable. ``fa4``, ``arith``, ``llvm``, ``nvvm`` and ``vector`` are the dialects' op
builders with the author's source location filled in (``location.here``), so a verifier, protocol or
lowering error names the kernel file's line. ``if_else`` is a two-armed branch, ``andi``/``shli``/
``shrui``/``xori`` bit operations on ``Value``s; submodules: ``dsl.math`` (f32 constants, exp2, log2,
fma), ``dsl.names`` (names in the printed IR, block arguments included) and ``dsl.structs`` (the
reference system's shared-memory and barrier structs). docs/authoring.md is the tutorial.

This package imports the MLIR bindings: a kernel module imports it inside its ``build`` function,
so ``fa4_mlir.kernels`` (launch geometry, used by the runtime) stays importable without MLIR.
"""

from __future__ import annotations

from fa4_mlir._mlir import arith as _arith
from fa4_mlir._mlir import llvm as _llvm
from fa4_mlir._mlir import nvvm as _nvvm
from fa4_mlir._mlir import vector as _vector
from fa4_mlir.dsl.bits import andi, shli, shrui, xori
from fa4_mlir.dsl.branches import if_else
from fa4_mlir.dsl.kernel import Kernel
from fa4_mlir.dsl.location import Located, here
from fa4_mlir.dsl.pipelines import Pipeline, PipelineState, Var
from fa4_mlir.dsl.values import Value, byte_offset, ctaid, element_ptr, i32, tid_x
from fa4_mlir.dialects import fa4 as _fa4

fa4 = Located(_fa4)
arith = Located(_arith)
llvm = Located(_llvm)
nvvm = Located(_nvvm)
vector = Located(_vector)

__all__ = ["Kernel", "Pipeline", "PipelineState", "Value", "Var", "andi", "arith", "byte_offset", "ctaid", "element_ptr",
           "fa4", "here", "i32", "if_else", "llvm", "nvvm", "shli", "shrui", "tid_x", "vector", "xori"]
