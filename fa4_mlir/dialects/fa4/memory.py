"""fa4 ops: shared-memory regions, aliases, stages and addresses; tensor-memory regions, allocation and
loads/stores (the dialect's "Shared memory and tensor memory" section)."""

from __future__ import annotations

from fa4_mlir.core.declare import AnyOf, Builtin, EnumAttr, I32, IntAttr, Operand, Result, StrAttr
from fa4_mlir.core.ir_utils import constant_int, defining_op
from fa4_mlir.target import TMEM_COLUMNS
from fa4_mlir.dialects.fa4.base import (
    Op, SMEM_BASE_ALIGN, SMEM_BYTES, SWIZZLE_ALIGN, SmemType, TMEM_ALLOC_MIN, TmemType, _def,
)


def _alignment(value) -> int | None:
    """The guaranteed byte alignment of a shared-memory region, alias or stage value, if known."""
    op = defining_op(value)
    if isinstance(op, SmemRegionOp) and op.is_well_formed():
        return op.align
    if isinstance(op, (SmemAliasOp, SmemStageOp)) and op.is_well_formed():
        base = _alignment(op.base)
        step = op.offset if isinstance(op, SmemAliasOp) else op.bytes
        if base is None:
            return None
        return base if step % base == 0 else step & -step

def _smem_name(value) -> str:
    """How diagnostics name a shared-memory value: 'q', or 'stage of kv'."""
    op = defining_op(value)
    if isinstance(op, SmemStageOp):
        return f"a stage of {_smem_name(op.base)}"
    return f"'{op.sym_name}'" if isinstance(op, (SmemRegionOp, SmemAliasOp)) else "a block argument"


# ===================================================================================================
# Shared memory and tensor memory
# ===================================================================================================


class SmemRegionOp(Op, name="smem_region"):
    """Declare a shared-memory region of ``bytes`` bytes aligned to ``align``.

    Regions are placed in the kernel's one dynamic shared-memory buffer (an extern ``.shared``
    symbol aligned to 1024 B) by ``fa4-allocate-smem``, which sets ``offset``. A region that TMA or
    an MMA descriptor reads with a swizzle must be aligned to one swizzle atom (8 rows of the swizzle
    width): 256 B for 32B, 512 B for 64B, 1024 B for 128B swizzle.

    Lowers to: an address ``fa4_smem + offset`` (``llvm.getelementptr`` on ``!llvm.ptr<3>``).
    """

    sym_name = StrAttr(doc="name in layouts and diagnostics, e.g. `q`, `kv`, `correction`")
    bytes = IntAttr(min=1, max=SMEM_BYTES, doc="size in bytes")
    align = IntAttr(min=1, max=SMEM_BASE_ALIGN, power_of_two=True, default=16,
                    doc="byte alignment of the region start (the buffer base is 1024-aligned)")
    swizzle = EnumAttr(tuple(SWIZZLE_ALIGN), default="none",
                       doc="TMA/MMA swizzle of the tiles stored here")
    offset = IntAttr(min=0, max=SMEM_BYTES, optional=True,
                     doc="byte offset in dynamic shared memory (allocator)")
    result = Result(SmemType)

    def verify(self):
        need = SWIZZLE_ALIGN[self.swizzle]
        if self.align < need:
            yield f"align must be >= {need} for a {self.swizzle}-swizzled region, got {self.align}"
        if self.offset is not None and self.offset % self.align:
            yield f"offset must be a multiple of align ({self.align}), got {self.offset}"


class SmemAliasOp(Op, name="smem_alias"):
    """View part of another region under a new name (e.g. the output O over the dead Q tile).

    The alias shares storage with ``base``: it occupies bytes ``[offset, offset + bytes)`` of it and
    adds nothing to the shared-memory total. Lowers to: ``base address + offset``.
    """

    base = Operand(SmemType, doc="the region (or alias) whose storage is reused")
    sym_name = StrAttr(doc="name of the view")
    bytes = IntAttr(min=1, max=SMEM_BYTES, doc="size in bytes")
    offset = IntAttr(min=0, max=SMEM_BYTES, default=0, doc="byte offset inside `base`")
    result = Result(SmemType)

    def verify(self):
        base = _def(self.base, (SmemRegionOp, SmemAliasOp, SmemStageOp))
        if base is not None and self.offset + self.bytes > base.bytes:
            yield (f"offset + bytes must be <= {base.bytes} (the size of {_smem_name(self.base)}), "
                   f"got {self.offset + self.bytes}")


def _check_stage(op, ring: str, total: int, size: int, field: str, what: str):
    """A ring stage (smem or TMEM): ``size`` divides the ring's ``total``; a constant stage is in range."""
    if total % size:
        yield f"{field} must divide {what} of '{ring}' ({total}), got {size}"
        return
    s = constant_int(op.stage)
    if s is not None and not 0 <= s < total // size:
        yield f"stage must be in [0, {total // size}) for '{ring}', got {s}"


class SmemStageOp(Op, name="smem_stage"):
    """Buffer ``stage`` of a ring: the ``bytes`` bytes at ``base + stage * bytes``.

    A pipeline's ring region holds ``num_stages`` equal buffers; this names the one a (dynamic) stage
    index selects, e.g. the destination of a TMA load in a producer loop. ``bytes`` must divide the
    size of ``base``. Lowers to: ``base address + stage * bytes`` (``llvm.getelementptr``).
    """

    base = Operand(SmemType, doc="the ring region")
    stage = Operand(I32, doc="stage index in [0, size of base / bytes)")
    bytes = IntAttr(min=1, max=SMEM_BYTES, doc="size of one stage buffer")
    result = Result(SmemType)

    def verify(self):
        base = _def(self.base, (SmemRegionOp, SmemAliasOp))
        if base is None:
            return
        yield from _check_stage(self, base.sym_name, base.bytes, self.bytes, "bytes", "the size")


class SmemAddressOp(Op, name="smem_address"):
    """The shared-memory address of a region, alias or stage, for ordinary loads and stores.

    Lowers to: ``fa4_smem + offset`` as an ``!llvm.ptr<3>``.
    """

    region = Operand(SmemType)
    result = Result(Builtin("!llvm.ptr<3>"))


class TmemRegionOp(Op, name="tmem_region"):
    """Declare a tensor-memory region of ``columns`` columns (all 128 lanes), sm_100a only.

    ``fa4-allocate-tmem`` assigns ``column``; the kernel allocates the power-of-two column count that
    covers every region with one ``tcgen05.alloc``. Lowers to: a ``!llvm.ptr<6>`` TMEM address
    ``base + column``.
    """

    sym_name = StrAttr(doc="name, e.g. `S0`, `O1`")
    columns = IntAttr(min=1, max=TMEM_COLUMNS, doc="number of 32-bit columns")
    column = IntAttr(min=0, max=TMEM_COLUMNS - 1, optional=True, doc="first column (allocator)")
    result = Result(TmemType)

    def verify(self):
        if self.column is not None and self.column + self.columns > TMEM_COLUMNS:
            yield (f"column + columns must be <= {TMEM_COLUMNS}, got {self.column + self.columns}")


class TmemStageOp(Op, name="tmem_stage"):
    """Stage ``stage`` of a TMEM ring: the ``columns`` columns at ``column + stage * columns``.

    A double-buffered accumulator (the GEMM's accumulator pipeline) is one ``fa4.tmem_region`` of
    ``stages * columns`` columns; this names the stage a (dynamic) pipeline index selects, for MMAs
    and ``tmem_load``. ``columns`` must divide the region's size. Lowers to: the region's TMEM address
    ``+ stage * columns``.
    """

    base = Operand(TmemType, doc="the ring region")
    stage = Operand(I32, doc="stage index in [0, columns of base / columns)")
    columns = IntAttr(min=1, max=TMEM_COLUMNS, doc="columns of one stage")
    result = Result(TmemType)

    def verify(self):
        base = _def(self.base, TmemRegionOp)
        if base is None:
            return
        yield from _check_stage(self, base.sym_name, base.columns, self.columns, "columns", "the columns")




def _vector_i32(t) -> bool:
    text = str(t)
    return text.startswith("vector<") and text.endswith("xi32>") and \
        text[len("vector<"):-len("xi32>")] in {str(1 << k) for k in range(1, 8)}


class _TmemAllocation(Op):
    """Shared fields of tmem_alloc / tmem_dealloc."""

    def verify(self):
        slot = _def(self.slot, (SmemRegionOp, SmemAliasOp))
        if slot is not None and slot.bytes < 4:
            yield f"slot must have >= 4 bytes (tcgen05.alloc writes a 32-bit address), got {slot.bytes}"
        if self.columns is not None and (self.columns < TMEM_ALLOC_MIN or self.columns & (self.columns - 1)):
            yield f"columns must be a power of two in [32, 512], got {self.columns}"


class TmemAllocOp(_TmemAllocation, name="tmem_alloc"):
    """Allocate the kernel's tensor memory; executed by every lane of one warp, sm_100a only.

    Writes the TMEM base address to ``slot`` (4 bytes of shared memory) and gives up the allocation
    permit so that a co-resident CTA can allocate. ``columns`` defaults to the function's
    ``fa4.tmem_columns`` (set by ``fa4-allocate-tmem``). After the CTA barrier that follows, the
    ``fa4.tmem_region`` values address ``base + column``. Lowers to:
    ``tcgen05.alloc.cta_group::N.sync.aligned.shared::cta.b32 [slot], columns`` and
    ``tcgen05.relinquish_alloc_permit``.
    """

    slot = Operand(SmemType, doc="4 bytes that receive the TMEM base address")
    columns = IntAttr(min=1, max=TMEM_COLUMNS, optional=True, doc="columns to allocate (power of two >= 32)")
    cta_group = IntAttr(min=1, max=2, default=1, doc="2: allocate in both CTAs of a pair")


class TmemDeallocOp(_TmemAllocation, name="tmem_dealloc"):
    """Free the tensor memory ``fa4.tmem_alloc`` allocated; executed by every lane of one warp.

    Lowers to: ``tcgen05.dealloc.cta_group::N.sync.aligned.b32 base, columns`` with the base read
    back from ``slot``.
    """

    slot = Operand(SmemType, doc="the slot `fa4.tmem_alloc` wrote")
    columns = IntAttr(min=1, max=TMEM_COLUMNS, optional=True, doc="columns allocated (default: the function's)")
    cta_group = IntAttr(min=1, max=2, default=1, doc="must match the allocation")


class TmemLoadOp(Op, name="tmem_load"):
    """Each thread of a warp reads N consecutive 32-bit columns of its own TMEM lane.

    Shape ``32x32b``: warp ``w`` of a warpgroup reaches lanes ``[32 * (w % 4), +32)``; lane ``l`` of
    the warp reads row ``32 * (w % 4) + l``, columns ``column + column_offset + [0, N)`` of the
    region. Lowers to: ``tcgen05.ld.sync.aligned.32x32b.xN.b32`` then ``tcgen05.wait::ld``.
    """

    tmem = Operand(TmemType)
    column_offset = IntAttr(min=0, max=TMEM_COLUMNS - 1, default=0, doc="first column inside the region")
    result = Result(AnyOf("vector<N x i32> with N a power of two in [2, 128]", _vector_i32))


class TmemStoreOp(Op, name="tmem_store"):
    """Each thread of a warp writes N consecutive 32-bit columns of its own TMEM lane (see tmem_load).

    Lowers to: ``tcgen05.st.sync.aligned.32x32b.xN.b32`` then ``tcgen05.wait::st``.
    """

    tmem = Operand(TmemType)
    value = Operand(AnyOf("vector<N x i32> with N a power of two in [2, 128]", _vector_i32))
    column_offset = IntAttr(min=0, max=TMEM_COLUMNS - 1, default=0, doc="first column inside the region")
