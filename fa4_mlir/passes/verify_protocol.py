"""fa4-verify-protocol: every kernel's barrier protocol is free of deadlocks, races and miscounts."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.scope import kernel_scopes, kernel_target


@dataclasses.dataclass(frozen=True)
class VerifyProtocolPass(Fa4Pass):
    """Every kernel's barrier protocol is proven: no deadlock, miscount, parity error, race or leak.

    Per kernel function that uses mbarriers, pipelines, named barriers or TMEM, the events of each
    warp role in each CTA of a cluster (arrivals with their thread counts, expect_tx and TMA bytes,
    commits, parity waits, named-barrier syncs, TMEM allocation, shared-memory and TMEM reads and
    writes, proxy fences) are run over the hardware semantics, with the kernel arguments bound so
    that loops of run-time length run 0, 1, 2, S, S + 1 and 2S + 1 times (S: the deepest ring), in
    the first and the last CTA of the grid; happens-before, tracked per warp, makes one schedule
    stand for all. Each violation is an error naming its bug class (see
    ``fa4_mlir.protocol``), the barrier or memory, and the op locations, with ``witness`` notes
    from the explored schedule. At most ``max_errors`` errors per kernel. A kernel inside an op with
    ``fa4.verify_protocol = false`` is skipped (a deliberately broken test kernel). Changes nothing.
    """

    name = "fa4-verify-protocol"
    target: str = "sm_100a"  # for kernels outside a gpu.module without fa4.target
    witness: int = 6  # trace lines attached to each error as notes
    max_errors: int = 3

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        # deferred: compile_kernel runs this pass while ptxas runs, so the import is off the critical path
        from fa4_mlir.protocol import to_diagnostics, verify_kernel

        errors: list[Diagnostic] = []
        for option, value in (("witness", self.witness), ("max_errors", self.max_errors)):
            if value < 0 or (option == "max_errors" and value == 0):
                return [Diagnostic.at(module.location, "error", (
                    f"option '{option}' of fa4-verify-protocol must be {'>= 1' if option == 'max_errors' else '>= 0'}, "
                    f"got {value}"))]
        for scope in kernel_scopes(module):
            if _opted_out(scope):
                continue
            target = kernel_target(scope, self.target)
            if isinstance(target, Diagnostic):
                return [target]
            report = verify_kernel(scope, target.sm, witness=self.witness)
            if report is not None:
                errors += to_diagnostics(report, self.max_errors)
        return errors


def _opted_out(op: ir.Operation) -> bool:
    while op is not None:
        attr = op.attributes["fa4.verify_protocol"] if "fa4.verify_protocol" in op.attributes else None
        if isinstance(attr, ir.BoolAttr) and not attr.value:
            return True
        op = op.parent
    return False
