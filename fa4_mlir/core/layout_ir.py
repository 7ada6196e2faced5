"""A Layout as fa4 IR, placed by the allocation passes, and the placement read back."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import func, ir
from fa4_mlir.core.pipeline import build_pass_manager, parse_pipeline
from fa4_mlir.errors import LoweringError
from fa4_mlir.layouts import Layout

ALLOCATE = "fa4-allocate-smem,fa4-allocate-mbarriers,fa4-allocate-tmem,fa4-verify"


def emit_layout(layout: Layout, target: str) -> ir.Module:
    """A module (``fa4.target = target``) with ``func.func @<kernel>_layout`` declaring every region,
    barrier array and TMEM region of ``layout`` in order. Needs an fa4 Context and a Location."""
    module = ir.Module.create()
    module.operation.attributes["fa4.target"] = ir.StringAttr.get(target)
    with ir.InsertionPoint(module.body):
        f = func.FuncOp(f"{layout.kernel}_layout", ir.FunctionType.get([], []))
        with ir.InsertionPoint(f.add_entry_block()):
            declare_layout(layout)
            func.ReturnOp([])
    return module


def declare_layout(layout: Layout) -> dict[str, ir.Value]:
    """Declare ``layout`` at the insertion point: its shared-memory regions (aliases as
    ``fa4.smem_alias``), then its barrier arrays, then its TMEM regions, in the layout's order (so the
    allocation passes place them as ``fa4_mlir.placement`` does). Returns name -> value."""
    from fa4_mlir.dialects import fa4

    values = {}
    for r in layout.regions:
        if r.alias_of is None:
            values[r.name] = fa4.smem_region(sym_name=r.name, bytes=r.bytes, align=r.align,
                                             swizzle=None if r.swizzle == "none" else r.swizzle)
        else:
            values[r.name] = fa4.smem_alias(values[r.alias_of], sym_name=r.name, bytes=r.bytes)
    for b in layout.barriers:
        uniform = len(set(b.counts)) == 1
        values[b.name] = fa4.mbarrier_alloc(sym_name=b.name, num_barriers=len(b.counts), arrival=b.arrival,
                                            arrive_count=b.counts[0] if uniform else None,
                                            arrive_counts=None if uniform else list(b.counts),
                                            cta_group=b.cta_group if b.cta_group != 1 else None,
                                            multicast_mask=b.multicast_mask or None)
    for t in layout.tmem:
        values[t.name] = fa4.tmem_region(sym_name=t.name, columns=t.columns)
    return values


@dataclasses.dataclass(frozen=True)
class Placement:
    smem_bytes: int
    region_offsets: dict[str, int]
    barrier_index: dict[str, int]
    tmem_column: dict[str, int]
    tmem_allocated: int


def place_layout(layout: Layout, target: str) -> tuple[ir.Module, Placement]:
    """Emit ``layout`` and run the allocation passes; raise LoweringError with their diagnostics."""
    module = emit_layout(layout, target)
    report = []
    pm = build_pass_manager(parse_pipeline(ALLOCATE), report=report)
    try:
        pm.run(module.operation)
    except ir.MLIRError as exc:
        raise LoweringError("\n".join(str(d) for d in report) or str(exc)) from None
    f = module.body.operations[0]
    offsets, index, column = {}, {}, {}
    for op in f.regions[0].blocks[0].operations:
        name = op.operation.name
        if name == "fa4.smem_region":
            offsets[op.sym_name] = op.offset
        elif name == "fa4.smem_alias":
            offsets[op.sym_name] = offsets[op.base.owner.opview.sym_name] + op.offset
        elif name == "fa4.mbarrier_alloc":
            index[op.sym_name] = op.index
        elif name == "fa4.tmem_region":
            column[op.sym_name] = op.column
    attrs = f.attributes
    tmem = ir.IntegerAttr(attrs["fa4.tmem_columns"]).value if "fa4.tmem_columns" in attrs else 0
    return module, Placement(ir.IntegerAttr(attrs["fa4.smem_bytes"]).value, offsets, index, column, tmem)
