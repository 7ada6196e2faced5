"""fa4-allocate-smem: place shared-memory regions."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.scope import kernel_scopes, kernel_target, ops_named, set_int
from fa4_mlir.placement import place_smem
from fa4_mlir.target import Target


@dataclasses.dataclass(frozen=True)
class AllocateSmemPass(Fa4Pass):
    """Every fa4.smem_region has a byte offset, and each kernel's total fits the target's shared memory.

    Per function, regions are placed in program order, each at the next multiple of its ``align``;
    an ``fa4.smem_alias`` sits at its base's offset plus its own ``offset`` and adds nothing. Sets
    ``offset`` on each region and ``fa4.smem_bytes`` on the function. Fails, naming the first region
    that ends past the limit, when the total exceeds the target's capacity (232448 B on sm_90a and
    sm_100a). The target is the enclosing gpu.module's chip or ``fa4.target``, else the ``target`` option.
    """

    name = "fa4-allocate-smem"
    target: str = "sm_100a"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        errors: list[Diagnostic] = []
        for scope in kernel_scopes(module):
            target = kernel_target(scope, self.target)
            if isinstance(target, Diagnostic):
                return [target]
            errors += self._allocate(scope, target)
        return errors

    def _allocate(self, scope: ir.Operation, target: Target) -> list[Diagnostic]:
        ops = ops_named(scope, "fa4.smem_region", "fa4.smem_alias")
        if not ops:
            return []
        keys = {op.result: i for i, op in enumerate(ops)}
        items, errors = [], []
        for i, op in enumerate(ops):
            if op.OPERATION_NAME == "fa4.smem_alias":
                if op.base not in keys:
                    errors.append(Diagnostic.at(op.location, "error", (
                        f"'fa4.smem_alias' base must be a region declared in the same function, got "
                        f"{_describe(op.base)}")))
                    continue
                items.append((i, op.bytes, 1, keys[op.base], op.offset))
            else:
                items.append((i, op.bytes, op.align, None, 0))
        if errors:
            return errors
        placed = place_smem(items)
        for i, op in enumerate(ops):
            if op.OPERATION_NAME == "fa4.smem_region":
                set_int(op.operation, "offset", placed.offsets[i])
        set_int(scope, "fa4.smem_bytes", placed.total)
        capacity = target.smem_capacity
        if placed.total <= capacity:
            return []
        i, first = next((i, op) for i, op in enumerate(ops)
                        if op.OPERATION_NAME == "fa4.smem_region" and placed.offsets[i] + op.bytes > capacity)
        start = placed.offsets[i]
        return [Diagnostic.at(first.location, "error", (
            f"smem needs {placed.total} B, {target} has {capacity} B: region '{first.sym_name}' "
            f"[{start}, {start + first.bytes}) ends past the limit; shrink it or a region before it "
            f"(e.g. fewer pipeline stages)"))]


def _describe(value: ir.Value) -> str:
    return "a block argument" if isinstance(value.owner, ir.Block) else f"'{value.owner.name}'"

