"""fa4-allocate-tmem: place tensor-memory regions."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.scope import kernel_scopes, kernel_target, ops_named, set_int
from fa4_mlir.placement import place_contiguous, tmem_allocation


@dataclasses.dataclass(frozen=True)
class AllocateTmemPass(Fa4Pass):
    """Every fa4.tmem_region has a first column, and each kernel's columns fit TMEM.

    Per function, regions take contiguous columns in program order; the function gets
    ``fa4.tmem_columns``, the power of two in [32, 512] that ``tcgen05.alloc`` must request.
    Fails when the columns exceed 512, or when the target (the enclosing gpu.module's chip or
    ``fa4.target``, else the ``target`` option) has no tensor memory (sm_90a).
    """

    name = "fa4-allocate-tmem"
    target: str = "sm_100a"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        errors: list[Diagnostic] = []
        for scope in kernel_scopes(module):
            target = kernel_target(scope, self.target)
            if isinstance(target, Diagnostic):
                return [target]
            regions = ops_named(scope, "fa4.tmem_region")
            if not regions:
                continue
            if not target.tmem_columns:
                errors.append(Diagnostic.at(regions[0].location, "error", (
                    f"'fa4.tmem_region' needs tensor memory, which sm_100a has and {target} has not")))
                continue
            placed = place_contiguous([(i, r.columns) for i, r in enumerate(regions)])
            if placed.total > target.tmem_columns:
                errors.append(Diagnostic.at(scope.location, "error", (
                    f"TMEM needs {placed.total} columns, {target} has {target.tmem_columns}: "
                    + ", ".join(f"'{r.sym_name}' {r.columns}" for r in regions))))
                continue
            for i, r in enumerate(regions):
                set_int(r.operation, "column", placed.offsets[i])
            set_int(scope, "fa4.tmem_columns", tmem_allocation(placed.total))
        return errors
