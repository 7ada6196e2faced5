"""The Python half of fa4 verification: everything IRDL cannot check.

IRDL verifies structure at parse time (operand and result types, required attributes, regions).
This walks the IR and runs, for every fa4 op, the declared field checks (ranges, enum members,
optional attributes) and the op's ``verify`` hook (cross-field and cross-op invariants), and for
modules and functions the checks of the fa4 attributes they carry (``fa4.smem_bytes``, ...).
"""

from __future__ import annotations

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic

# Ops that carry the dialect's kernel attributes (fa4.target, fa4.smem_bytes, ...).
KERNEL_SCOPES = ("builtin.module", "gpu.module", "func.func", "gpu.func", "llvm.func")


def verify_fa4(root: ir.Operation) -> list[Diagnostic]:
    """Every violated fa4 invariant under ``root``, in IR order, as located errors."""
    from fa4_mlir.dialects.fa4 import DIALECT

    errors: list[Diagnostic] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name in KERNEL_SCOPES:  # where the passes set fa4.smem_bytes & co.
            errors.extend(Diagnostic.at(op.location, "error", f"'{name}' {m}")
                          for m in DIALECT.discardable_errors(op))
        if name.startswith("fa4."):
            cls = DIALECT.op_class(name)
            if cls is not None:
                messages = list(cls.field_errors(op))
                if not messages:  # the hooks may rely on well-formed fields
                    try:
                        messages = list(op.opview.verify())
                    except Exception as exc:  # a bug in a hook must not hide the other diagnostics
                        messages = [f"verifier failed with {type(exc).__name__}: {exc}; this is a bug "
                                    f"in fa4-mlir, please report it with the input"]
                errors.extend(Diagnostic.at(op.location, "error", f"'{name}' {m}") for m in messages)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return errors
