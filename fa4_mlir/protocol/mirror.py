"""A plain-Python copy of a kernel's IR: what the protocol interpreter reads, built in one walk.

Crossing into the MLIR bindings costs microseconds per access; the interpreter visits loop bodies
once per iteration and scenario, so it reads this copy instead: op names, operand and result ids,
attributes as Python values, regions, source locations, and whether a region holds anything the
protocol depends on.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import file_line_col
from fa4_mlir.protocol.model import Site

# Ops whose regions are entered even without protocol ops inside (their values matter).
MEMORY_OPS = ("llvm.load", "llvm.store", "nvvm.cp.async.shared.global")  # cp.async: a shared write
FENCE_OPS = ("nvvm.fence.proxy",)  # generic -> async proxy ordering of shared memory
# fa4 ops without barrier, memory or proxy effect (a debug build's checks): opaque to the protocol.
NO_PROTOCOL_EFFECT = ("fa4.debug_check",)


def _shared(op) -> bool:
    """A load or store that may reach shared memory: the verifier does not model global memory."""
    pointer = op.operands[1 if op.name == "llvm.store" else 0]
    return str(pointer.type) != "!llvm.ptr<1>"


@dataclasses.dataclass
class Block:
    args: list[int]
    ops: list[Node]


@dataclasses.dataclass
class Node:
    name: str
    operands: list[int]
    results: list[int]
    widths: list[int | None]  # integer bit width of each result (index = 64), None otherwise
    attrs: dict
    regions: list[list[Block]]
    site: Site
    result_types: list[str]
    relevant: bool = False  # a protocol op, a memory op, or a region holding one
    next_name: str = ""  # the op after this one in its block
    dead: bool = False  # its value is opaque and nothing the interpreter runs reads it (extract.mark_dead)


def _attr_value(attr: ir.Attribute):
    """An attribute as a Python value (bool, int, str, float or list), None for other kinds."""
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, (ir.IntegerAttr, ir.StringAttr, ir.FloatAttr)):
        return attr.value
    if isinstance(attr, (ir.DenseI32ArrayAttr, ir.DenseI64ArrayAttr)):
        return [int(x) for x in attr]
    if isinstance(attr, ir.ArrayAttr):
        return [_attr_value(a) for a in attr]
    return None


def _attrs(op) -> dict:
    named = op.attributes
    return {named[i].name: _attr_value(named[i].attr) for i in range(len(named))}


def _width(t: ir.Type) -> int | None:
    if isinstance(t, ir.IndexType):
        return 64
    if isinstance(t, ir.IntegerType):
        return t.width
    return None


class Mirror:
    """The function ``func`` as Nodes; ``ids`` numbers every SSA value."""

    def __init__(self, func: ir.Operation):
        self.ids: dict[ir.Value, int] = {}
        self.body = self._region(func.regions[0])
        self.args = self.body[0].args if self.body else []
        self.arg_types = [str(a.type) for a in func.regions[0].blocks[0].arguments] if self.body else []
        self.attrs = _attrs(func)
        self.name = self.attrs.get("sym_name", "kernel")

    def _id(self, v: ir.Value) -> int:
        i = self.ids.get(v)
        if i is None:
            i = self.ids[v] = len(self.ids)
        return i

    def _region(self, region: ir.Region) -> list[Block]:
        blocks = []
        for b in region.blocks:
            args = [self._id(a) for a in b.arguments]
            ops = [self._node(op) for op in b.operations]
            for op, nxt in zip(ops, ops[1:]):
                op.next_name = nxt.name
            blocks.append(Block(args, ops))
        return blocks

    def _node(self, op) -> Node:
        op = op.operation
        name = op.name
        attrs = _attrs(op)
        if name == "arith.constant":
            value = op.attributes["value"]
            attrs["value"] = _attr_value(value)
        elif name == "arith.cmpi":
            attrs["_width"] = _width(op.operands[0].type)
        elif name == "fa4.tmem_store":
            attrs["_value_type"] = str(op.operands[1].type)
        elif name in FENCE_OPS or name in ("nvvm.shfl.sync", "nvvm.vote.sync"):  # the enum as text
            attrs["_kind"] = str(op.attributes["kind"]) if "kind" in op.attributes else ""
        file, line, col = file_line_col(op.location)
        results = list(op.results)
        node = Node(name, [self._id(v) for v in op.operands], [self._id(r) for r in results],
                    [_width(r.type) for r in results], attrs, [self._region(r) for r in op.regions],
                    Site(name, file, line, col), [str(r.type) for r in results])
        node.relevant = ((name.startswith("fa4.") and name not in NO_PROTOCOL_EFFECT)
                         or (name in MEMORY_OPS and _shared(op)) or name in FENCE_OPS
                         or any(n.relevant for blocks in node.regions for b in blocks for n in b.ops))
        return node
