"""Small queries on IR values that verifiers and passes share."""

from __future__ import annotations

from fa4_mlir._mlir import ir


def defining_op(value: ir.Value) -> ir.OpView | None:
    """The op that defines ``value``, or None for a block argument."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.opview if isinstance(owner, ir.Operation) else owner


def constant_int(value: ir.Value) -> int | None:
    """The value of an integer ``arith.constant`` / ``llvm.mlir.constant``, else None."""
    op = defining_op(value)
    if op is None or op.operation.name not in ("arith.constant", "llvm.mlir.constant"):
        return None
    attr = op.operation.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None
