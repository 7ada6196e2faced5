"""fa4 ops: TMA loads and stores, the MMAs (``tcgen05_mma`` on sm_100a, ``wgmma`` on sm_90a) and their
commits and waits, ``elect_one``."""

from __future__ import annotations

from fa4_mlir.core.declare import AnyOf, EnumAttr, I1, I32, IntAttr, Operand, Result
from fa4_mlir.core.ir_utils import defining_op
from fa4_mlir.dialects.fa4.base import (
    MAX_BLOCK_STRIDE, MAX_TX_BYTES, MbarriersType, Op, SMEM_BYTES, SmemType, TMA_SMEM_ALIGN,
    TensorMapType, TmemType, _def,
)
from fa4_mlir.dialects.fa4.memory import (
    SmemAliasOp, SmemRegionOp, SmemStageOp, TmemRegionOp, TmemStageOp, _alignment, _smem_name,
)
from fa4_mlir.dialects.fa4.barriers import _check_arrival, _check_index


# ===================================================================================================
# TMA
# ===================================================================================================


def _check_tma_alignment(what: str, value):
    align = _alignment(value)
    if align is not None and align < TMA_SMEM_ALIGN:
        yield (f"{what} must be aligned to >= {TMA_SMEM_ALIGN} bytes for TMA, got {_smem_name(value)} "
               f"aligned to {align}")


def _check_fits(what: str, offset: int, size: int, value):
    buf = _def(value, (SmemRegionOp, SmemAliasOp, SmemStageOp))
    if buf is not None and offset + size > buf.bytes:
        yield (f"{what}_offset + bytes must be <= {buf.bytes} (the size of {_smem_name(value)}), "
               f"got {offset + size}")


class TmaLoadOp(Op, name="tma_load"):
    """Copy a box of a global tensor into shared memory with TMA, completing bytes on a barrier.

    ``coords`` (1 to 5, innermost first) index the box in the tensor map. The copy lands at
    ``dst + dst_offset`` (128-byte aligned) and completes ``bytes`` transaction bytes on barrier
    ``index`` of a ``tx`` array. With ``multicast_mask`` every CTA of the mask receives the box.
    Lowers to: ``cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes``.
    """

    tensor_map = Operand(TensorMapType)
    dst = Operand(SmemType)
    barriers = Operand(MbarriersType)
    index = Operand(I32)
    coords = Operand(I32, variadic=True, doc="box coordinates, innermost dimension first")
    bytes = IntAttr(min=1, max=MAX_TX_BYTES, doc="bytes the box delivers")
    dst_offset = IntAttr(min=0, max=SMEM_BYTES, multiple_of=TMA_SMEM_ALIGN, default=0,
                         doc="byte offset inside `dst`")
    multicast_mask = IntAttr(min=1, max=0xFFFF, optional=True, doc="CTAs of the cluster that receive it")

    def verify(self):
        if not 1 <= len(self.coords) <= 5:
            yield f"coords must have 1 to 5 elements, got {len(self.coords)}"
        yield from _check_index(self.barriers, self.index)
        yield from _check_arrival(self.barriers, "tx", "TMA completes transaction bytes")
        yield from _check_tma_alignment("dst", self.dst)
        yield from _check_fits("dst", self.dst_offset, self.bytes, self.dst)


class TmaStoreOp(Op, name="tma_store"):
    """Copy a box from shared memory to a global tensor with TMA (bulk async-group).

    Lowers to: ``fence.proxy.async.shared::cta``, ``cp.async.bulk.tensor.Nd.global.shared::cta``
    and ``cp.async.bulk.commit_group``.
    """

    tensor_map = Operand(TensorMapType)
    src = Operand(SmemType)
    coords = Operand(I32, variadic=True, doc="box coordinates, innermost dimension first")
    bytes = IntAttr(min=1, doc="bytes the box holds")
    src_offset = IntAttr(min=0, max=SMEM_BYTES, multiple_of=TMA_SMEM_ALIGN, default=0,
                         doc="byte offset inside `src`")

    def verify(self):
        if not 1 <= len(self.coords) <= 5:
            yield f"coords must have 1 to 5 elements, got {len(self.coords)}"
        yield from _check_tma_alignment("src", self.src)
        yield from _check_fits("src", self.src_offset, self.bytes, self.src)


class TmaStoreWaitOp(Op, name="tma_store_wait"):
    """Wait until at most ``pending`` TMA store groups still read shared memory.

    Lowers to: ``cp.async.bulk.wait_group.read pending``.
    """

    pending = IntAttr(min=0, max=63, default=0, doc="store groups allowed to stay in flight")


# ===================================================================================================
# MMA
# ===================================================================================================

MMA_SWIZZLES = ("32B", "64B", "128B")  # MMA operand tiles are always swizzled (canonical layouts)
MMA_INPUTS = ("f16", "bf16", "tf32", "e4m3")  # tcgen05: kind::f16, kind::tf32, kind::f8f6f4


def _check_mma_operand(what: str, value, offset: int):
    """A shared-memory MMA operand: a swizzled tile, and its K step ``offset`` inside it."""
    region = defining_op(value)
    while isinstance(region, (SmemAliasOp, SmemStageOp)):
        region = defining_op(region.base)
    if isinstance(region, SmemRegionOp) and region.is_well_formed() and region.swizzle == "none":
        yield (f"{what} must be a swizzled region (MMA reads swizzled canonical tiles), got "
               f"{_smem_name(value)} with swizzle 'none'")
    buf = _def(value, (SmemRegionOp, SmemAliasOp, SmemStageOp))
    if buf is not None and offset >= buf.bytes:
        yield f"{what}_offset must be < {buf.bytes} (the size of {_smem_name(value)}), got {offset}"


MAJORS = ("k", "mn")


def _check_major(op):
    """An mn-major B names the stride between its swizzle-width blocks; a k-major B has none."""
    if op.b_major == "mn" and op.b_block_stride is None:
        yield "b_block_stride must be set when b_major is 'mn' (bytes between N blocks of one swizzle width), got none"
    elif op.b_major == "k" and op.b_block_stride is not None:
        yield f"b_block_stride must be unset when b_major is 'k', got {op.b_block_stride}"


def _smem_or_tmem(t) -> bool:
    return str(t) in (SmemType.asm, TmemType.asm)


class Tcgen05MmaOp(Op, name="tcgen05_mma"):
    """One tcgen05 MMA, D (TMEM, f32) [+]= A x B, issued by one thread; sm_100a only.

    ``a`` is a shared-memory tile (SS form) or a TMEM region (TS form, e.g. P in FA4's P@V); ``b`` is
    a shared-memory tile. Shared-memory operands carry the swizzle of their region; A is K-major, B
    K-major or, with ``b_major = "mn"``, MN-major (blocks of one swizzle width along N, ``b_block_stride``
    bytes apart, as TMA loads a row-major K x N matrix); one
    instruction consumes K = 32 bytes of each row (16 elements of f16/bf16, 8 of tf32, 32 of e4m3; a
    TMEM A holds 32 bits a column: 2 f16/bf16 or 4 e4m3, the lower K index in the lower bits), at byte
    ``a_offset`` / ``b_offset`` in the tile. ``accumulate`` false overwrites D. With
    ``cta_group = 2`` the pair computes an M = 2 x 128 tile, each CTA holding half of A and D.
    Lowers to: shared-memory descriptors, an instruction descriptor (constant) and
    ``tcgen05.mma.cta_group::N.kind::{f16,tf32,f8f6f4} [d], a, b, idesc, accumulate``.
    """

    d = Operand(TmemType, doc="accumulator region (f32)")
    a = Operand(AnyOf("!fa4.smem (SS) or !fa4.tmem (TS)", _smem_or_tmem))
    b = Operand(SmemType)
    accumulate = Operand(I1, doc="false: D = A x B; true: D += A x B")
    m = IntAttr(min=64, max=256, doc="rows of D per instruction: 64 or 128 (cta_group 1), 128 or 256 (2)")
    n = IntAttr(min=8, max=256, multiple_of=8, doc="columns of D")
    ab_type = EnumAttr(MMA_INPUTS, doc="element type of A and B")
    cta_group = IntAttr(min=1, max=2, default=1, doc="2: the MMA of a CTA pair")
    a_offset = IntAttr(min=0, max=SMEM_BYTES, multiple_of=16, default=0,
                       doc="byte offset of this K step in A's tile")
    b_offset = IntAttr(min=0, max=SMEM_BYTES, multiple_of=16, default=0,
                       doc="byte offset of this K step in B's tile")
    b_major = EnumAttr(MAJORS, default="k", doc="k: B rows are N, K contiguous; mn: B rows are K, N contiguous")
    b_block_stride = IntAttr(min=16, max=MAX_BLOCK_STRIDE, multiple_of=16, optional=True,
                             doc="mn-major B: bytes between blocks of one swizzle width along N")

    def verify(self):
        yield from _check_major(self)
        valid_m = (64, 128) if self.cta_group == 1 else (128, 256)
        if self.m not in valid_m:
            yield f"m must be one of {valid_m} for cta_group {self.cta_group}, got {self.m}"
        elif self.m >= 128 and self.n % 16:
            yield f"n must be a multiple of 16 for m = {self.m}, got {self.n}"
        if str(self.a.type) == SmemType.asm:
            yield from _check_mma_operand("a", self.a, self.a_offset)
        else:
            tmem = _def(self.a, (TmemRegionOp, TmemStageOp))
            if tmem is not None and self.a_offset >= 4 * tmem.columns:
                yield (f"a_offset must be < {4 * tmem.columns} (4 bytes per column of A's {tmem.columns} "
                       f"TMEM columns), got {self.a_offset}")
        yield from _check_mma_operand("b", self.b, self.b_offset)


def _f32_struct(t) -> bool:
    text = str(t).replace(" ", "")
    if not (text.startswith("!llvm.struct<(") and text.endswith(")>")):
        return False
    fields = text[len("!llvm.struct<("):-2].split(",")
    return all(f == "f32" for f in fields)


A_FRAGMENT = "vector<4xi32>"  # an m64k16 A fragment in registers: 8 16-bit values per thread


def _smem_or_fragment(t) -> bool:
    return str(t) in (SmemType.asm, A_FRAGMENT)


class WgmmaOp(Op, name="wgmma"):
    """One warpgroup MMA on sm_90a: acc (registers, f32) [+]= A x B (smem), M = 64, K = 16 (K = 32 for
    e4m3: every K step is 32 bytes of a row).

    All 128 threads of a warpgroup execute it; each holds ``n / 2`` f32 accumulators in an
    ``!llvm.struct<(f32, ...)>``. A is a shared-memory tile (SS form) or, in the RS form, the
    thread's fragment of the 64 x 16 A tile in registers (``vector<4xi32>``: 16-bit pairs at rows
    ``r`` and ``r + 8``, columns ``2q`` and ``8 + 2q``, with ``r = 16 * warp + lane / 4`` and
    ``q = lane % 4``, the layout of the accumulator's columns ``16k .. 16k + 15``: FA3's P@V reads P
    where softmax left it; e4m3: each register holds 4 consecutive K elements, rows ``r``, ``r + 8``,
    ``r``, ``r + 8`` at columns ``4q`` and ``16 + 4q``). Shared-memory operands are tiles with their region's swizzle (A
    K-major, B K-major or MN-major as for ``fa4.tcgen05_mma``), at byte ``a_offset`` / ``b_offset``.
    The op is asynchronous: ``fa4.wgmma_commit`` closes a group, ``fa4.wgmma_wait`` waits for it and
    ``fa4.wgmma_fence_acc`` hands the accumulators to the code that reads them.
    Lowers to: ``wgmma.fence.sync.aligned`` (unless the previous op is a wgmma too), descriptors and
    ``wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}`` or ``m64nNk32.f32.e4m3.e4m3``
    (the RS form as inline PTX: NVVM's op takes descriptors only). e4m3 has no transposed form: both
    shared-memory operands must be K-major.
    """

    a = Operand(AnyOf(f"!fa4.smem (SS) or {A_FRAGMENT} (RS)", _smem_or_fragment))
    b = Operand(SmemType)
    acc = Operand(AnyOf("!llvm.struct<(f32, ...)> with n / 2 fields", _f32_struct))
    n = IntAttr(min=8, max=256, multiple_of=8, doc="columns of the accumulator tile")
    ab_type = EnumAttr(("f16", "bf16", "e4m3"), doc="element type of A and B")
    accumulate = IntAttr(min=0, max=1, default=1, doc="0: acc = A x B; 1: acc += A x B")
    a_offset = IntAttr(min=0, max=SMEM_BYTES, multiple_of=16, default=0,
                       doc="byte offset of this K step in A's tile")
    b_offset = IntAttr(min=0, max=SMEM_BYTES, multiple_of=16, default=0,
                       doc="byte offset of this K step in B's tile")
    b_major = EnumAttr(MAJORS, default="k", doc="k: B rows are N, K contiguous; mn: B rows are K, N contiguous")
    b_block_stride = IntAttr(min=16, max=MAX_BLOCK_STRIDE, multiple_of=16, optional=True,
                             doc="mn-major B: bytes between blocks of one swizzle width along N")
    result = Result(AnyOf("the type of acc", _f32_struct), type_of="acc")

    def verify(self):
        yield from _check_major(self)
        if self.ab_type == "e4m3" and self.b_major != "k":
            yield f"b_major must be 'k' for e4m3 (fp8 wgmma reads K-major operands only), got '{self.b_major}'"
        fields = str(self.acc.type).count("f32")
        if fields != self.n // 2:
            yield f"acc must have n / 2 = {self.n // 2} f32 fields, got {fields}"
        if str(self.a.type) == SmemType.asm:
            yield from _check_mma_operand("a", self.a, self.a_offset)
        elif self.a_offset:
            yield f"a_offset must be 0 when a is a register fragment (RS form), got {self.a_offset}"
        yield from _check_mma_operand("b", self.b, self.b_offset)


class WgmmaCommitOp(Op, name="wgmma_commit"):
    """Close the group of wgmma ops issued since the last commit (all threads of the warpgroup).

    Lowers to: ``wgmma.commit_group.sync.aligned``.
    """


class WgmmaWaitOp(Op, name="wgmma_wait"):
    """Wait until at most ``pending`` wgmma groups are in flight (their accumulators are then readable).

    Lowers to: ``wgmma.wait_group.sync.aligned pending``.
    """

    pending = IntAttr(min=0, max=7, default=0, doc="groups allowed to stay in flight")


class WgmmaFenceAccOp(Op, name="wgmma_fence_acc"):
    """The accumulators ``acc`` as they are after the ``fa4.wgmma_wait`` before this op.

    A wgmma writes its accumulator registers asynchronously, but LLVM sees the result defined when
    the instruction is issued and may schedule its readers above the wait. Reading ``result``
    instead of ``acc`` pins every reader after this op, which stays after the wait (CUTLASS's
    ``warpgroup_fence_operand``). Lowers to: an empty inline PTX statement that takes and
    returns every register of ``acc`` (no instruction is emitted).
    """

    acc = Operand(AnyOf("!llvm.struct<(f32, ...)>", _f32_struct))
    result = Result(AnyOf("the type of acc", _f32_struct), type_of="acc")


# ===================================================================================================
# Misc
# ===================================================================================================


class ElectOneOp(Op, name="elect_one"):
    """True in exactly one active lane of the warp (the elected thread that issues TMA or MMA).

    Lowers to: ``elect.sync _|p, 0xffffffff``.
    """

    elected = Result(I1)
