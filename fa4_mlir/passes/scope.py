"""Kernel scopes: the function-like ops whose fa4 declarations are placed together."""

from __future__ import annotations

import re
from collections.abc import Iterator

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.core.ir_utils import find_ops
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import Target

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


def ops_named(scope: ir.Operation, *names: str) -> list[ir.OpView]:
    """The ops called one of ``names`` inside ``scope``, in program order.

    ``find_ops`` matches in C++ (a Python callback on every op took about 40 ms of each attention
    compile) and keeps program order among ops without regions; where an op found has regions, or
    ``scope`` itself is one of ``names``, the pre-order walk gives the order instead."""
    found = find_ops(scope, names)
    if scope.name not in names and not any(len(op.operation.regions) for op in found):
        return found
    return _walk_named(scope, names)


def _walk_named(scope: ir.Operation, names: tuple[str, ...]) -> list[ir.OpView]:
    found: list[ir.OpView] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op.opview)
        return ir.WalkResult.ADVANCE

    scope.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


_CHIP = re.compile(r'chip\s*=\s*"([^"]+)"')


def kernel_target(scope: ir.Operation, default: str) -> Target | Diagnostic:
    """The target of a kernel: the chip of its enclosing ``gpu.module``'s ``#nvvm.target``, else the
    nearest ``fa4.target`` attribute, else ``default``; or the error to report, located at the op
    that names an unsupported target."""
    op, name, where = scope.parent, None, None
    while op is not None and name is None:
        attrs = op.attributes
        if op.name == "gpu.module" and "targets" in attrs and _CHIP.search(str(attrs["targets"])):
            name, where = _CHIP.search(str(attrs["targets"])).group(1), op
        elif "fa4.target" in attrs:
            name, where = ir.StringAttr(attrs["fa4.target"]).value, op
        op = op.parent
    try:
        return Target.parse(name or default)
    except ConfigError as exc:
        return Diagnostic.at((where or scope).location, "error", str(exc))


def set_int(op: ir.Operation, name: str, value: int) -> None:
    op.attributes[name] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
