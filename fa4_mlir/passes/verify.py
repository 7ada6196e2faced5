"""fa4-verify: every fa4 op satisfies the invariants IRDL cannot check."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.core.verify import verify_fa4
from fa4_mlir.passes.base import Fa4Pass


@dataclasses.dataclass(frozen=True)
class VerifyPass(Fa4Pass):
    """Every fa4 op satisfies its value ranges, enum members and cross-op invariants.

    Checks what IRDL cannot: attribute ranges and members, optional attributes, barrier indices
    against their arrays, arrival kinds against the ops that arrive, pipeline barrier counts,
    warp-role disjointness and register budgets. fa4-opt also runs it after parsing and after the
    pipeline; as a pass it can be placed between other passes. Changes nothing.
    """

    name = "fa4-verify"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        return verify_fa4(module)
