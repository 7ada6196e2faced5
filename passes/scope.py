"""Kernel scopes: the function-like ops whose fa4 declarations are placed together."""

from __future__ import annotations

from collections.abc import Iterator

from fa4_mlir._mlir import ir

KERNEL_OPS = ("func.func", "gpu.func", "llvm.func")


def kernel_scopes(module: ir.Operation) -> Iterator[ir.Operation]:
    """Every function-like op under ``module`` (outermost first)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in KERNEL_OPS:
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    yield from found


def ops_named(scope: ir.Operation, name: str) -> list[ir.OpView]:
    """The ``name`` ops inside ``scope``, in program order."""
    found: list[ir.OpView] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op.opview)
        return ir.WalkResult.ADVANCE

    scope.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def target_name(module: ir.Operation, default: str) -> str:
    """The ``fa4.target`` module attribute (e.g. "sm_100a"), or ``default``."""
    attrs = module.attributes
    return ir.StringAttr(attrs["fa4.target"]).value if "fa4.target" in attrs else default


def set_int(op: ir.Operation, name: str, value: int) -> None:
    op.attributes[name] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
