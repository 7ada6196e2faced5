"""Small queries on IR values that verifiers and passes share."""

from __future__ import annotations

from fa4_mlir._mlir import ir, rewrite


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


def find_ops(root: ir.Operation, names) -> list[ir.OpView]:
    """The ops inside ``root`` (not ``root`` itself) called one of ``names``, in post-order (an op
    after the ops in its regions). MLIR's walk driver matches the names in C++ and calls Python only
    on the ops found, where a Python walk calls back on every op; its pattern matches nothing, so
    nothing is rewritten."""
    found: list[ir.OpView] = []

    def grab(op, rewriter) -> bool:
        found.append(op.operation.opview)
        return True  # no match

    patterns = rewrite.RewritePatternSet(root.context)
    for name in names:
        patterns.add(name, grab)
    rewrite.walk_and_apply_patterns(root, patterns.freeze())
    return found
