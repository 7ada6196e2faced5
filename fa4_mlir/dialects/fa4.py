"""The ``fa4`` dialect: what FlashAttention-4-class warp-specialised kernels are made of.

Sections: Types | Shared memory and tensor memory | Mbarriers | Pipelines | Warp roles | TMA | Misc.
The registry (``DIALECT``, the snake_case builders, ``__all__``) is at the bottom.

All fa4 ops print in MLIR's generic form (``"fa4.pipeline_create"(%full, %empty) {...}``): IRDL ops have
no custom assembly in MLIR 22. Lowering-relevant parameters live in op attributes, never only in type
parameters, because Python cannot read the parameters of an IRDL type.

Conventions shared by every op below:
  * A barrier is named by an mbarrier array value and an ``i32`` index into it.
  * Pipeline state is explicit SSA: a stage index ``i32`` in ``[0, num_stages)`` and a phase ``i32`` in
    ``{0, 1}``; loops carry them as ``scf.for`` iter_args. Producers start at phase 1, consumers at
    phase 0 (``fa4.pipeline_initial_state``), so the first ``num_stages`` producer acquires pass on
    fresh barriers and the first consumer wait blocks until the first commit.
"""

from __future__ import annotations

from fa4_mlir.core.declare import (
    I1,
    I32,
    AnyOf,
    BoolAttr,
    Builtin,
    Dialect,
    EnumAttr,
    I32ArrayAttr,
    IntAttr,
    Operand,
    Region,
    Result,
    StrAttr,
)
from fa4_mlir.core.ir_utils import constant_int, defining_op
from fa4_mlir.target import SMEM_CARVEOUT, TMEM_COLUMNS

DIALECT = Dialect("fa4", search_prefix="fa4_mlir.dialects", doc="""
    Shared-memory regions and their layout, tensor memory (TMEM), mbarriers with arrive counts and
    transaction bytes, producer/consumer pipelines with stage and phase, warp roles with register
    budgets, TMA and MMA commits: the parts of a warp-specialised attention kernel, as IR that passes
    can allocate, verify and lower to PTX for sm_100a (Blackwell) and sm_90a (Hopper).
""")
Op = DIALECT.Operation

# Hardware limits the verifier enforces (PTX ISA 8.6+, sm_90a/sm_100a).
MAX_MBARRIER_COUNT = (1 << 20) - 1  # mbarrier pending-count field is 20 bits
MAX_TX_BYTES = (1 << 20) - 1  # mbarrier tx-count range
REGISTER_FILE = 65536  # 32-bit registers per SM (and the most one CTA can hold)
SMEM_BASE_ALIGN = 1024  # alignment of the extern dynamic shared-memory symbol
SWIZZLE_ALIGN = {"none": 1, "32B": 256, "64B": 512, "128B": 1024}  # one swizzle atom: 8 rows x width
TMA_SMEM_ALIGN = 128  # cp.async.bulk.tensor shared-memory operand alignment
# Shared memory a CTA can have (sm_90a and sm_100a): no region, view, offset or stage is larger. The
# lowering adds such byte counts into 32-bit address offsets, so they must be bounded here.
SMEM_BYTES = SMEM_CARVEOUT
MAX_MBARRIERS = SMEM_BYTES // 8  # 8 bytes each: the most mbarriers shared memory holds
# MMA descriptors hold the leading byte offset (an MN-major B's block stride) in 14 bits of 16-byte units.
MAX_BLOCK_STRIDE = ((1 << 14) - 1) * 16
TMEM_ALLOC_MIN = 32  # tcgen05.alloc: a power of two in [32, 512] columns


# ===================================================================================================
# Types
# ===================================================================================================

SmemType = DIALECT.type("smem", """
    A shared-memory region: a byte range of the kernel's dynamic shared memory, placed by
    ``fa4-allocate-smem``. Values come from ``fa4.smem_region`` or ``fa4.smem_alias``.
""")
TmemType = DIALECT.type("tmem", """
    A tensor-memory region: a range of TMEM columns (all 128 lanes, 32 bit each), sm_100a only.
""")
MbarriersType = DIALECT.type("mbarriers", """
    An array of 64-bit mbarriers in shared memory, all with the same arrive count and arrival kind.
""")
PipelineType = DIALECT.type("pipeline", """
    A producer/consumer ring of ``num_stages`` buffers guarded by a "full" and an "empty" mbarrier array.

    | step               | who      | barrier           | action                                      |
    |--------------------|----------|-------------------|---------------------------------------------|
    | producer_acquire   | producer | empty[stage]      | wait parity ``phase`` (buffer is free)       |
    | producer_commit    | producer | full[stage]       | arrive by the full array's kind (threads,    |
    |                    |          |                   | expect_tx + TMA bytes, or MMA commit)        |
    | consumer_wait      | consumer | full[stage]       | wait parity ``phase`` (buffer is filled)     |
    | consumer_release   | consumer | empty[stage]      | arrive by the empty array's kind             |

    Producer state starts at (stage 0, phase 1), consumer state at (stage 0, phase 0); ``advance``
    moves to the next stage and flips the phase when the stage wraps to 0.
""")
TensorMapType = DIALECT.type("tensormap", """
    A TMA tensor map (CUtensorMap, 128 bytes), passed to the kernel by value as a
    ``__grid_constant__`` parameter.
""")


# ===================================================================================================
# Attributes on kernels (functions and modules)
# ===================================================================================================

# The allocation passes write these and the lowering reads them back, so a hand-written or edited
# kernel that carries them gets them checked like op fields (fa4-verify, on any op).
DIALECT.discardable_attr("target", StrAttr(), doc="""
    the chip of kernels outside a gpu.module with a #nvvm.target: `sm_90a` or `sm_100a`""")
DIALECT.discardable_attr("smem_bytes", IntAttr(min=0), doc="""
    dynamic shared memory the kernel's regions take (fa4-allocate-smem)""")
DIALECT.discardable_attr("num_mbarriers", IntAttr(min=0, max=MAX_MBARRIERS), doc="""
    mbarriers in the kernel's barrier region (fa4-allocate-mbarriers)""")
DIALECT.discardable_attr("mbarrier_region", StrAttr(), doc="""
    the `sym_name` of the fa4.smem_region holding the kernel's mbarriers (fa4-allocate-mbarriers)""")
DIALECT.discardable_attr("tmem_columns", IntAttr(min=TMEM_ALLOC_MIN, max=TMEM_COLUMNS, power_of_two=True),
                         doc="""
    TMEM columns the kernel allocates, a power of two in [32, 512] (fa4-allocate-tmem)""")
DIALECT.discardable_attr("grid_constant_args", I32ArrayAttr(min_value=0), doc="""
    positions of the kernel's tensor-map arguments (fa4-lower-kernel, read by fa4-attach-kernel-abi)""")
DIALECT.discardable_attr("verify_protocol", BoolAttr(), doc="""
    `false` skips fa4-verify-protocol on this kernel (a deliberately broken test kernel)""")


def _def(value, op_class):
    """The defining op of ``value`` if it is a well-formed ``op_class``, else None (a block argument,
    another op, or one whose own field errors are reported on it)."""
    op = defining_op(value)
    return op if isinstance(op, op_class) and op.is_well_formed() else None


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


def _check_index(barriers, index, what: str = "index"):
    """Messages for a constant barrier index outside its array."""
    alloc = _def(barriers, MbarrierAllocOp)
    i = constant_int(index)
    if alloc is not None and i is not None and not 0 <= i < alloc.num_barriers:
        yield (f"{what} must be in [0, {alloc.num_barriers}) for mbarrier array "
               f"'{alloc.sym_name}', got {i}")


def _check_phase(phase):
    p = constant_int(phase)
    if p is not None and p not in (0, 1):
        yield f"phase must be 0 or 1, got {p}"


def _check_arrival(barriers, expected: str, why: str):
    alloc = _def(barriers, MbarrierAllocOp)
    if alloc is not None and alloc.arrival != expected:
        yield (f"barriers must arrive by '{expected}' ({why}), got mbarrier array "
               f"'{alloc.sym_name}' with arrival '{alloc.arrival}'")


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


# ===================================================================================================
# Mbarriers
# ===================================================================================================

ARRIVALS = ("threads", "tx", "commit")


class MbarrierAllocOp(Op, name="mbarrier_alloc"):
    """Declare an array of ``num_barriers`` mbarriers, each completing a phase after its arrive count.

    The count is ``arrive_count`` for every barrier, or ``arrive_counts[i]`` for barrier ``i`` when
    they differ (FA4's S0_consumer: 256 for "P stage 0 written + O rescaled", 128 for later stages);
    exactly one of the two is set.

    ``arrival`` says how the arrivals come, and the ops that arrive must agree with it:
      * ``threads``: each arriving thread executes ``fa4.mbarrier_arrive``
        (``mbarrier.arrive.shared::cta.b64``), e.g. 128 softmax threads;
      * ``tx``: one elected thread executes ``fa4.mbarrier_arrive_expect_tx`` and TMA loads
        (``fa4.tma_load``) complete the transaction bytes (``mbarrier::complete_tx::bytes``);
      * ``commit``: the MMA thread executes ``fa4.mma_commit`` (``tcgen05.commit ... mbarrier::arrive::one``),
        which arrives once all its earlier MMAs are done.
    ``cta_group = 2`` marks a barrier of a CTA pair: arrivals come from both CTAs (leader-CTA
    arrivals, multicast commits) and expect_tx counts the bytes of both CTAs.
    ``fa4-allocate-mbarriers`` packs arrays into one region and sets ``index`` (the first barrier).
    Lowers to: 8 bytes of shared memory per barrier at ``index * 8`` in the barrier region.
    """

    sym_name = StrAttr(doc="name, e.g. `kv_producer`, `S0_consumer`")
    num_barriers = IntAttr(min=1, max=MAX_MBARRIERS,
                           doc="barriers in the array (8 bytes of shared memory each)")
    arrive_count = IntAttr(min=1, max=MAX_MBARRIER_COUNT, optional=True,
                           doc="arrivals that complete one phase, the same for every barrier")
    arrive_counts = I32ArrayAttr(min_len=1, min_value=1, optional=True,
                                 doc="per-barrier counts when they differ (S0_consumer: 256, 128)")
    arrival = EnumAttr(ARRIVALS, doc="how arrivals come: thread arrives, expect_tx + TMA, MMA commit")
    cta_group = IntAttr(min=1, max=2, default=1, doc="2: arrivals from both CTAs of a pair")
    index = IntAttr(min=0, max=MAX_MBARRIERS - 1, optional=True,
                    doc="index of the first barrier in the kernel's barrier region")
    result = Result(MbarriersType)

    @property
    def counts(self) -> list[int]:
        """The arrive count of each barrier."""
        if self.arrive_counts is not None:
            return list(self.arrive_counts)
        return [self.arrive_count] * self.num_barriers

    def verify(self):
        if (self.arrive_count is None) == (self.arrive_counts is None):
            got = "both" if self.arrive_count is not None else "neither"
            yield f"exactly one of arrive_count and arrive_counts must be set, got {got}"
        elif self.arrive_counts is not None:
            if len(self.arrive_counts) != self.num_barriers:
                yield (f"arrive_counts must have num_barriers = {self.num_barriers} elements, "
                       f"got {len(self.arrive_counts)}")
            elif max(self.arrive_counts) > MAX_MBARRIER_COUNT:
                yield f"arrive_counts elements must be <= {MAX_MBARRIER_COUNT}, got {max(self.arrive_counts)}"


class MbarrierInitOp(Op, name="mbarrier_init"):
    """Initialise every barrier of an array with its arrive count (phase 0, nothing pending).

    Executed by one warp, lane i initialising barrier i; the lowering follows the last init with
    ``fence.mbarrier_init.release.cluster`` and a CTA (or cluster) barrier before any use.
    Lowers to: ``mbarrier.init.shared::cta.b64 [bar], count``.
    """

    barriers = Operand(MbarriersType)


class MbarrierArriveOp(Op, name="mbarrier_arrive"):
    """Arrive on barrier ``index`` of a ``threads`` array, contributing ``count`` arrivals.

    Lowers to: ``mbarrier.arrive.shared::cta.b64 _, [bar], count``.
    """

    barriers = Operand(MbarriersType)
    index = Operand(I32)
    count = IntAttr(min=1, max=MAX_MBARRIER_COUNT, default=1, doc="arrivals this thread contributes")

    def verify(self):
        yield from _check_index(self.barriers, self.index)
        yield from _check_arrival(self.barriers, "threads", "fa4.mbarrier_arrive is a thread arrival")


class MbarrierArriveExpectTxOp(Op, name="mbarrier_arrive_expect_tx"):
    """Arrive once on barrier ``index`` of a ``tx`` array and expect ``tx_bytes`` transaction bytes.

    The phase completes when the arrivals are in and TMA has delivered the bytes. Executed by one
    elected thread. Lowers to: ``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], tx_bytes``.
    """

    barriers = Operand(MbarriersType)
    index = Operand(I32)
    tx_bytes = IntAttr(min=1, max=MAX_TX_BYTES, doc="bytes the TMA loads of this phase deliver")

    def verify(self):
        yield from _check_index(self.barriers, self.index)
        yield from _check_arrival(self.barriers, "tx", "expect_tx pairs with TMA completion")


class MbarrierTryWaitParityOp(Op, name="mbarrier_try_wait_parity"):
    """Block until the phase of barrier ``index`` with parity ``phase`` has completed.

    A fresh barrier is in phase 0: waiting parity 1 returns at once, parity 0 blocks until the first
    completion. Lowers to: a ``mbarrier.try_wait.parity.shared::cta.b64`` spin loop.
    """

    barriers = Operand(MbarriersType)
    index = Operand(I32)
    phase = Operand(I32, doc="parity to wait for, 0 or 1")

    def verify(self):
        yield from _check_index(self.barriers, self.index)
        yield from _check_phase(self.phase)


class MmaCommitOp(Op, name="mma_commit"):
    """Arrive once on barrier ``index`` of a ``commit`` array when this thread's earlier MMAs finish.

    With ``multicast_mask`` the arrival goes to the barrier at the same offset in every CTA of the
    mask (a CTA pair uses 0b11). Lowers to:
    ``tcgen05.commit.cta_group::{1,2}.mbarrier::arrive::one.shared::cluster[.multicast::cluster].b64``
    on sm_100a; on sm_90a (wgmma) to ``wgmma.commit_group`` + ``wgmma.wait_group`` + a thread arrive.
    """

    barriers = Operand(MbarriersType)
    index = Operand(I32)
    multicast_mask = IntAttr(min=1, max=0xFFFF, optional=True, doc="CTAs of the cluster to signal")

    def verify(self):
        yield from _check_index(self.barriers, self.index)
        yield from _check_arrival(self.barriers, "commit", "fa4.mma_commit is an MMA-completion arrival")


# ===================================================================================================
# Pipelines
# ===================================================================================================


class PipelineCreateOp(Op, name="pipeline_create"):
    """Make a ``num_stages``-stage producer/consumer pipeline over a full and an empty barrier array.

    Stage ``s``, sub-stage ``q`` uses ``full[s * producer_sub_stages + q]`` and
    ``empty[s * consumer_sub_stages + q]``; sub-stages share the stage index (the K tile of a
    depth-staged Q@K' is one stage of ``num_qk_stages`` sub-stages). The producer kind and arrive
    counts are the full array's ``arrival`` and arrive counts; the consumer's are the empty array's.
    Lowers to: nothing by itself; the pipeline ops become mbarrier ops.
    """

    full = Operand(MbarriersType, doc="barriers the producer signals and the consumer waits on")
    empty = Operand(MbarriersType, doc="barriers the consumer signals and the producer waits on")
    sym_name = StrAttr(doc="name, e.g. `kv`")
    num_stages = IntAttr(min=1, max=64, doc="buffers in the ring")
    producer_sub_stages = IntAttr(min=1, max=MAX_MBARRIERS, default=1, doc="full barriers per stage")
    consumer_sub_stages = IntAttr(min=1, max=MAX_MBARRIERS, default=1, doc="empty barriers per stage")
    result = Result(PipelineType)

    @property
    def producer(self) -> MbarrierAllocOp | None:
        return _def(self.full, MbarrierAllocOp)

    @property
    def consumer(self) -> MbarrierAllocOp | None:
        return _def(self.empty, MbarrierAllocOp)

    def verify(self):
        if self.full == self.empty:
            yield "full and empty must be different mbarrier arrays, got the same array twice"
        for side, alloc, sub in (("full", self.producer, self.producer_sub_stages),
                                 ("empty", self.consumer, self.consumer_sub_stages)):
            if alloc is not None and alloc.num_barriers != self.num_stages * sub:
                yield (f"{side} must hold num_stages * {'producer' if side == 'full' else 'consumer'}"
                       f"_sub_stages = {self.num_stages * sub} barriers, got '{alloc.sym_name}' with "
                       f"{alloc.num_barriers}")


def _pipeline_checks(op, sub_stages_of: str | None):
    """Shared checks of the pipeline step ops: sub-stage range (unless ``sub_stages_of`` is None)
    and the range of a constant stage."""
    create = _def(op.pipeline, PipelineCreateOp)
    if create is None:
        return
    sub_stages = getattr(create, sub_stages_of) if sub_stages_of else None
    if sub_stages is not None and op.sub_stage >= sub_stages:
        yield f"sub_stage must be < {sub_stages} ({sub_stages_of} of '{create.sym_name}'), got {op.sub_stage}"
    s = constant_int(op.stage)
    if s is not None and not 0 <= s < create.num_stages:
        yield f"stage must be in [0, {create.num_stages}) for pipeline '{create.sym_name}', got {s}"


class PipelineInitialStateOp(Op, name="pipeline_initial_state"):
    """The (stage, phase) a side of the pipeline starts from: (0, 1) for the producer, (0, 0) for the consumer.

    Starting the producer at phase 1 makes its first ``num_stages`` acquires pass on fresh empty
    barriers. Lowers to: two ``arith.constant``.
    """

    pipeline = Operand(PipelineType)
    side = EnumAttr(("producer", "consumer"), doc="which end of the pipeline")
    stage = Result(I32)
    phase = Result(I32)


class PipelineAdvanceOp(Op, name="pipeline_advance"):
    """Step (stage, phase) to the next buffer: stage + 1, wrapping to 0 and flipping the phase.

    Lowers to: ``arith.addi``, ``arith.cmpi``, ``arith.select`` and ``arith.xori`` on the state.
    """

    pipeline = Operand(PipelineType)
    stage = Operand(I32)
    phase = Operand(I32)
    next_stage = Result(I32)
    next_phase = Result(I32)

    def verify(self):
        yield from _pipeline_checks(self, None)
        yield from _check_phase(self.phase)


class PipelineProducerAcquireOp(Op, name="pipeline_producer_acquire"):
    """Producer: wait until buffer ``stage`` is free (empty barrier, parity ``phase``).

    Lowers to: ``mbarrier.try_wait.parity`` on ``empty[stage * consumer_sub_stages + sub_stage]``.
    """

    pipeline = Operand(PipelineType)
    stage = Operand(I32)
    phase = Operand(I32)
    sub_stage = IntAttr(min=0, default=0, doc="which consumer sub-stage barrier to wait on")

    def verify(self):
        yield from _pipeline_checks(self, "consumer_sub_stages")
        yield from _check_phase(self.phase)


class PipelineProducerCommitOp(Op, name="pipeline_producer_commit"):
    """Producer: signal that buffer ``stage`` (sub-stage ``sub_stage``) is filled.

    ``tx_bytes`` is required when the full array arrives by ``tx`` (the TMA loads of the stage
    complete those bytes) and rejected otherwise.
    Lowers to: an arrival on ``full[stage * producer_sub_stages + sub_stage]`` by the full array's
    kind: ``threads`` -> ``mbarrier.arrive``; ``tx`` -> ``mbarrier.arrive.expect_tx tx_bytes`` by the
    elected thread; ``commit`` -> ``tcgen05.commit``.
    """

    pipeline = Operand(PipelineType)
    stage = Operand(I32)
    sub_stage = IntAttr(min=0, default=0, doc="which producer sub-stage barrier to signal")
    tx_bytes = IntAttr(min=1, max=MAX_TX_BYTES, optional=True, doc="bytes to expect (tx pipelines)")

    def verify(self):
        yield from _pipeline_checks(self, "producer_sub_stages")
        create = _def(self.pipeline, PipelineCreateOp)
        full = create.producer if create is not None else None
        if full is None:
            return
        if full.arrival == "tx" and self.tx_bytes is None:
            yield (f"tx_bytes must be set when the full barriers ('{full.sym_name}') arrive by 'tx', "
                   f"got none")
        elif full.arrival != "tx" and self.tx_bytes is not None:
            yield (f"tx_bytes must be unset when the full barriers ('{full.sym_name}') arrive by "
                   f"'{full.arrival}', got {self.tx_bytes}")


class PipelineConsumerWaitOp(Op, name="pipeline_consumer_wait"):
    """Consumer: wait until buffer ``stage`` is filled (full barrier, parity ``phase``).

    Lowers to: ``mbarrier.try_wait.parity`` on ``full[stage * producer_sub_stages + sub_stage]``.
    """

    pipeline = Operand(PipelineType)
    stage = Operand(I32)
    phase = Operand(I32)
    sub_stage = IntAttr(min=0, default=0, doc="which producer sub-stage barrier to wait on")

    def verify(self):
        yield from _pipeline_checks(self, "producer_sub_stages")
        yield from _check_phase(self.phase)


class PipelineConsumerReleaseOp(Op, name="pipeline_consumer_release"):
    """Consumer: signal that buffer ``stage`` may be overwritten.

    Lowers to: an arrival on ``empty[stage * consumer_sub_stages + sub_stage]`` by the empty array's
    kind: ``threads`` -> ``mbarrier.arrive``; ``commit`` -> ``tcgen05.commit``, so the buffer frees
    when the MMAs reading it finish.
    """

    pipeline = Operand(PipelineType)
    stage = Operand(I32)
    sub_stage = IntAttr(min=0, default=0, doc="which consumer sub-stage barrier to signal")

    def verify(self):
        yield from _pipeline_checks(self, "consumer_sub_stages")
        create = _def(self.pipeline, PipelineCreateOp)
        empty = create.consumer if create is not None else None
        if empty is not None and empty.arrival == "tx":
            yield (f"empty barriers must arrive by 'threads' or 'commit' (nothing delivers "
                   f"transaction bytes to a release), got '{empty.sym_name}' with arrival 'tx'")


# ===================================================================================================
# Warp roles
# ===================================================================================================

WARP_SIZE = 32
WARPGROUP = 4  # warps


class WarpSpecializeOp(Op, name="warp_specialize"):
    """Split a CTA of ``num_warps`` warps into roles; its body holds only ``fa4.warp_role`` ops.

    Warps no role names stay idle. Lowers to: a dispatch on ``warp_id = tid.x / 32`` (``scf.if``
    chain), each branch starting with the role's ``setmaxnreg``; the kernel gets
    ``.reqntid num_warps*32`` and the entry register cap that makes ptxas honour ``setmaxnreg``.
    """

    num_warps = IntAttr(min=1, max=32, doc="warps in the CTA (block size / 32)")
    body = Region(doc="the `fa4.warp_role` ops")

    def roles(self) -> list[WarpRoleOp]:
        """The well-formed roles (a malformed one is reported on itself)."""
        ops = list(self.operation.regions[0].blocks[0].operations)
        return [o for o in ops if isinstance(o, WarpRoleOp) and o.is_well_formed()]

    def verify(self):
        block_ops = list(self.operation.regions[0].blocks[0].operations)
        for o in block_ops[:-1]:
            if not isinstance(o, WarpRoleOp):
                yield f"body must hold only 'fa4.warp_role' ops, got '{o.operation.name}'"
                return
        roles = self.roles()
        if not any(isinstance(o, WarpRoleOp) for o in block_ops):
            yield "body must hold at least one 'fa4.warp_role', got none"
        owner: dict[int, str] = {}
        for role in roles:
            for w in sorted(set(role.warps)):  # repeats within a role are reported on the role
                if w >= self.num_warps:
                    yield f"warps of role '{role.sym_name}' must be < num_warps ({self.num_warps}), got {w}"
                elif w in owner:
                    yield f"warp {w} must belong to one role, got '{owner[w]}' and '{role.sym_name}'"
                else:
                    owner[w] = role.sym_name
        # setmaxnreg is warpgroup-wide: every warp of a warpgroup must execute the same one.
        if any(role.registers is not None for role in roles) and self.num_warps % WARPGROUP:
            yield (f"num_warps must be a multiple of {WARPGROUP} when a role sets registers (setmaxnreg "
                   f"needs whole warpgroups), got {self.num_warps}")
        budget: dict[int, tuple[int, str]] = {}
        for role in roles:
            if role.registers is None:
                continue
            for w in role.warps:
                wg = w // WARPGROUP
                if wg in budget and budget[wg][0] != role.registers:
                    yield (f"registers of roles sharing warpgroup {wg} must be equal (setmaxnreg is "
                           f"warpgroup-wide), got {budget[wg][0]} for '{budget[wg][1]}' and "
                           f"{role.registers} for '{role.sym_name}'")
                    return
                budget[wg] = (role.registers, role.sym_name)
        total = sum(regs * WARPGROUP * WARP_SIZE for regs, _ in budget.values())
        if total > REGISTER_FILE:
            yield (f"register budgets must total <= {REGISTER_FILE} per CTA, got {total} "
                   f"(sum of registers x 128 threads per warpgroup)")


class WarpRoleOp(Op, name="warp_role"):
    """A role of a warp-specialised kernel: the code that warps ``warps`` run, with ``registers`` each.

    ``registers`` is the per-thread budget set with ``setmaxnreg`` on entry (a multiple of 8 in
    [24, 256]; roles sharing a warpgroup must agree). Lowers to: one branch of the warp dispatch,
    ``setmaxnreg.{inc,dec}.sync.aligned.u32 registers`` then the body.
    """

    sym_name = StrAttr(doc="role name, e.g. `softmax0`, `mma`, `load`")
    warps = I32ArrayAttr(min_len=1, min_value=0, doc="warp indices in the CTA")
    registers = IntAttr(min=24, max=256, multiple_of=8, optional=True, doc="setmaxnreg budget")
    body = Region(doc="the role's code")

    def verify(self):
        if len(set(self.warps)) != len(self.warps):
            yield f"warps must be distinct, got {self.warps}"
        parent = self.operation.parent
        if parent is None or parent.name != WarpSpecializeOp.OPERATION_NAME:
            got = parent.name if parent is not None else "none"
            yield f"parent must be 'fa4.warp_specialize', got '{got}'"


NAMED_BARRIERS = 16  # bar.sync ids 0..15; 0 is __syncthreads, so roles get 1..15


class NamedBarrierOp(Op, name="named_barrier"):
    """Synchronise (or arrive at) the named barrier ``sym_name`` with ``threads`` threads.

    Warps of one or more roles meet at a named barrier without stopping the rest of the CTA.
    ``fa4-lower-warp-roles`` gives each name of a kernel its own hardware id in [1, 15] (0 is the
    CTA-wide barrier). ``kind = "arrive"`` signals without waiting (a producer of the barrier).
    Lowers to: ``bar.sync id, threads`` or ``bar.arrive id, threads``.
    """

    sym_name = StrAttr(doc="barrier name, e.g. `softmax_sync`; one hardware id per name")
    threads = IntAttr(min=32, max=1024, multiple_of=32, doc="threads that take part (whole warps)")
    kind = EnumAttr(("sync", "arrive"), default="sync", doc="wait for the others, or only signal")


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
MMA_INPUTS = ("f16", "bf16", "tf32")


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
    instruction consumes K = 32 bytes of each row (16 elements of f16/bf16, 8 of tf32), at byte
    ``a_offset`` / ``b_offset`` in the tile. ``accumulate`` false overwrites D. With
    ``cta_group = 2`` the pair computes an M = 2 x 128 tile, each CTA holding half of A and D.
    Lowers to: shared-memory descriptors, an instruction descriptor (constant) and
    ``tcgen05.mma.cta_group::N.kind::{f16,tf32} [d], a, b, idesc, accumulate``.
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
    """One warpgroup MMA on sm_90a: acc (registers, f32) [+]= A x B (smem), M = 64, K = 16.

    All 128 threads of a warpgroup execute it; each holds ``n / 2`` f32 accumulators in an
    ``!llvm.struct<(f32, ...)>``. A is a shared-memory tile (SS form) or, in the RS form, the
    thread's fragment of the 64 x 16 A tile in registers (``vector<4xi32>``: 16-bit pairs at rows
    ``r`` and ``r + 8``, columns ``2q`` and ``8 + 2q``, with ``r = 16 * warp + lane / 4`` and
    ``q = lane % 4``, the layout of the accumulator's columns ``16k .. 16k + 15``: FA3's P@V reads P
    where softmax left it). Shared-memory operands are tiles with their region's swizzle (A
    K-major, B K-major or MN-major as for ``fa4.tcgen05_mma``), at byte ``a_offset`` / ``b_offset``.
    The op is asynchronous: ``fa4.wgmma_commit`` closes a group, ``fa4.wgmma_wait`` waits for it and
    ``fa4.wgmma_fence_acc`` hands the accumulators to the code that reads them.
    Lowers to: ``wgmma.fence.sync.aligned`` (unless the previous op is a wgmma too), descriptors and
    ``wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}`` (the RS form as inline PTX:
    NVVM's op takes descriptors only).
    """

    a = Operand(AnyOf(f"!fa4.smem (SS) or {A_FRAGMENT} (RS)", _smem_or_fragment))
    b = Operand(SmemType)
    acc = Operand(AnyOf("!llvm.struct<(f32, ...)> with n / 2 fields", _f32_struct))
    n = IntAttr(min=8, max=256, multiple_of=8, doc="columns of the accumulator tile")
    ab_type = EnumAttr(("f16", "bf16"), doc="element type of A and B")
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


# ===================================================================================================
# Registry
# ===================================================================================================

globals().update(DIALECT.builders())

__all__ = [
    "DIALECT", "SmemType", "TmemType", "MbarriersType", "PipelineType", "TensorMapType",
    *(cls.__name__ for cls in DIALECT.ops),
    *DIALECT.builders(),
]
