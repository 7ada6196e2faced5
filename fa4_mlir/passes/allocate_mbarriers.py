"""fa4-allocate-mbarriers: give every mbarrier array its index."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.configs.fa4 import MBAR_BYTES
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.dialects import fa4
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lowering import BARRIER_REGION_ATTR
from fa4_mlir.passes.scope import kernel_scopes, ops_named, set_int
from fa4_mlir.placement import place_contiguous


@dataclasses.dataclass(frozen=True)
class AllocateMbarriersPass(Fa4Pass):
    """Every fa4.mbarrier_alloc has the index of its first barrier in the kernel's barrier region.

    Per function, arrays are packed in program order (barrier ``i`` of an array at ``index + i``)
    and the function gets ``fa4.num_mbarriers`` and ``fa4.mbarrier_region``, the name of the
    shared-memory region that holds them: ``region`` (default ``mbarriers``), 8 bytes per barrier.
    If the function declares no such region, one is added before the first array (align 8), for
    ``fa4-allocate-smem`` to place. ``max`` bounds the total (64: the init warp's lanes cover
    barriers i and 32 + i).
    """

    name = "fa4-allocate-mbarriers"
    region: str = "mbarriers"
    max: int = 64

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        errors: list[Diagnostic] = []
        for scope in kernel_scopes(module):
            arrays = ops_named(scope, "fa4.mbarrier_alloc")
            if not arrays:
                continue
            placed = place_contiguous([(i, a.num_barriers) for i, a in enumerate(arrays)])
            for i, a in enumerate(arrays):
                set_int(a.operation, "index", placed.offsets[i])
            set_int(scope, "fa4.num_mbarriers", placed.total)
            scope.attributes[BARRIER_REGION_ATTR] = ir.StringAttr.get(self.region)
            if not any(r.sym_name == self.region for r in ops_named(scope, "fa4.smem_region")):
                with ir.InsertionPoint(arrays[0].operation), arrays[0].location:
                    fa4.SmemRegionOp(sym_name=self.region, bytes=placed.total * MBAR_BYTES, align=MBAR_BYTES)
            if placed.total > self.max:
                errors.append(Diagnostic.at(scope.location, "error", (
                    f"mbarriers must number <= {self.max}, got {placed.total}")))
            for region in ops_named(scope, "fa4.smem_region"):
                if region.sym_name == self.region and region.bytes != placed.total * MBAR_BYTES:
                    errors.append(Diagnostic.at(region.location, "error", (
                        f"region '{self.region}' must have 8 x {placed.total} = {placed.total * MBAR_BYTES} "
                        f"bytes for the {placed.total} mbarriers declared, got {region.bytes}")))
        return errors
