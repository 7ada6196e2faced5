"""What every reference struct is made of: a ``Layout`` declared in the kernel body, plus its placement.

``DeclaredLayout(layout)`` declares the layout's regions, barrier arrays and TMEM regions at the
insertion point (``core.layout_ir.declare_layout``, the code ``fa4-layout`` uses too) with the
author's source location, and computes where the allocation passes will put them with the same rules
(``fa4_mlir.placement``): byte offsets, barrier indices and TMEM columns are known in Python, so a
struct can answer ``smem_size`` or ``PO_lo_offset`` like the reference's comptime members.
"""

from __future__ import annotations

from fa4_mlir._mlir import ir
from fa4_mlir.core.layout_ir import declare_layout
from fa4_mlir.dsl.location import here
from fa4_mlir.layouts import Layout
from fa4_mlir.placement import place_contiguous, place_smem, tmem_allocation


class DeclaredLayout:
    """``layout`` declared in the current kernel body: ``value(name)`` is the SSA value of a region,
    barrier array or TMEM region; ``offset``, ``barrier_index`` and ``tmem_column`` are placements."""

    def __init__(self, layout: Layout):
        self.layout = layout
        with here():
            self._values = declare_layout(layout)
        regions = place_smem([(r.name, r.bytes, r.align, r.alias_of, 0) for r in layout.regions])
        self.region_offsets, self.smem_size = regions.offsets, regions.total
        barriers = place_contiguous([(b.name, len(b.counts)) for b in layout.barriers])
        self.barrier_indices, self.num_mbars = barriers.offsets, barriers.total
        columns = place_contiguous([(t.name, t.columns) for t in layout.tmem])
        self.tmem_columns, self.tmem_allocated = columns.offsets, tmem_allocation(columns.total)

    def value(self, name: str) -> ir.Value:
        if name not in self._values:
            raise KeyError(f"'{name}' must be a region, barrier array or TMEM region of the {self.layout.kernel} "
                           f"layout ({', '.join(self._values)}), got '{name}'")
        return self._values[name]

    def offset(self, region: str) -> int:
        """Byte offset of ``region`` in dynamic shared memory (as fa4-allocate-smem places it)."""
        self.value(region)
        return self.region_offsets[region]

    def barrier_index(self, array: str) -> int:
        """Index of ``array``'s first barrier (as fa4-allocate-mbarriers places it)."""
        self.value(array)
        return self.barrier_indices[array]

    def tmem_column(self, region: str) -> int:
        """First TMEM column of ``region`` (as fa4-allocate-tmem places it)."""
        self.value(region)
        return self.tmem_columns[region]
