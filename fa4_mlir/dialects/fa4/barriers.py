"""fa4 ops: mbarrier arrays and their arrive/wait, MMA commits, and the producer/consumer pipelines over
them with explicit stage and phase (the dialect's "Mbarriers" and "Pipelines" sections)."""

from __future__ import annotations

from fa4_mlir.core.declare import EnumAttr, I32, I32ArrayAttr, IntAttr, Operand, Result, StrAttr
from fa4_mlir.core.ir_utils import constant_int
from fa4_mlir.dialects.fa4.base import (
    MAX_MBARRIERS, MAX_MBARRIER_COUNT, MAX_TX_BYTES, MbarriersType, Op, PipelineType, _def,
)


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
    ``multicast_mask`` (``threads`` arrays of a cluster kernel) sends each thread arrival to the barrier
    at the same index in every CTA of the mask, its own included: the empty barriers of a ring whose
    stages the CTAs of the mask fill together (B multicast), so each CTA's count includes the arrivals
    of all of them.
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
    multicast_mask = IntAttr(min=1, max=0xFFFF, optional=True,
                             doc="CTAs of the cluster every thread arrival goes to (threads arrays)")
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
        if self.multicast_mask is not None:
            if self.arrival != "threads":
                yield (f"multicast_mask must be set on 'threads' arrays only (TMA and MMA completions name their "
                       f"CTAs themselves), got arrival '{self.arrival}'")
            if self.cta_group != 1:
                yield ("multicast_mask must not be set with cta_group = 2 (a pair's thread arrivals go to the "
                       "leader CTA), got both")


class MbarrierInitOp(Op, name="mbarrier_init"):
    """Initialise every barrier of an array with its arrive count (phase 0, nothing pending).

    Executed by one warp, lane i initialising barrier i; the lowering follows the last init with
    ``fence.mbarrier_init.release.cluster`` and a CTA (or cluster) barrier before any use.
    Lowers to: ``mbarrier.init.shared::cta.b64 [bar], count``.
    """

    barriers = Operand(MbarriersType)


class MbarrierArriveOp(Op, name="mbarrier_arrive"):
    """Arrive on barrier ``index`` of a ``threads`` array, contributing ``count`` arrivals.

    Lowers to: ``mbarrier.arrive.shared::cta.b64 _, [bar], count``; on an array of a CTA pair one
    ``mapa`` to the leader + ``mbarrier.arrive.shared::cluster.b64``, on an array with ``multicast_mask``
    one such pair per CTA of the mask.
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
