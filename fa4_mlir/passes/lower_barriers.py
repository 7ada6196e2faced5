"""fa4-lower-barriers: mbarrier ops become NVVM mbarrier, tcgen05.commit and fence operations; debug
checks become printf-and-trap (debug builds) or nothing (release builds)."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import arith, gpu, ir, llvm, nvvm, scf
from fa4_mlir.knobs import MAX_DEBUG_TIMEOUT_MS
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lowering import WARP, KernelLowering, LoweringFailure, lower_kernels

WAIT_TICKS = 10_000_000  # suspend-time hint of each mbarrier.try_wait.parity (ns)
WARPGROUP_THREADS = 128


@dataclasses.dataclass(frozen=True)
class LowerBarriersPass(Fa4Pass):
    """No fa4 mbarrier op or fa4.mma_commit is left; barrier declarations stay for fa4-lower-kernel.

    * init: each run of consecutive ``fa4.mbarrier_init`` ops becomes one block in which warp 0
      initialises the barriers, lane ``l`` barriers ``l``, ``l + 32``, ... of each array with its
      count (``mbarrier.init.shared::cta.b64``), then ``fence.mbarrier_init.release.cluster``; then
      every thread meets a CTA barrier (``bar.sync 0``), or a cluster barrier
      (``barrier.cluster.arrive`` + ``wait``) when the kernel runs in clusters.
    * arrive (threads): ``mbarrier.arrive.shared::cta.b64 [bar], count``; on an array of a CTA pair
      (``cta_group = 2``) the arrival goes to the leader (even) CTA's barrier through ``mapa``
      (``mbarrier.arrive.shared::cluster``, CTA-scope release as CUTLASS's cluster barriers); on an
      array with ``multicast_mask`` it goes that way to the barrier of every CTA of the mask, in rank
      order.
    * expect_tx: ``mbarrier.arrive.expect_tx [bar], tx_bytes``; on a pair's array only the leader
      arrives, expecting ``2 * tx_bytes`` (the loads of both CTAs complete on its barrier).
    * try_wait_parity: the ``mbarrier.try_wait.parity`` spin loop. With ``timeout=MS`` (debug builds)
      the loop reads ``%globaltimer`` and, once a wait has lasted ``MS`` milliseconds, prints
      ``fa4 debug: barrier wait timed out ...`` naming the kernel, the barrier array and index, the
      phase, the block and the thread, then traps: a protocol bug ends the launch with an error
      instead of hanging the GPU.
    * mma_commit: on sm_100a ``tcgen05.commit.cta_group::N.mbarrier::arrive::one`` (``.multicast::cluster``
      with a mask); on sm_90a ``wgmma.commit_group``, ``wgmma.wait_group 0``, then one arrival by
      thread 0 of the warpgroup.
    * debug_check: with ``timeout`` > 0 (a debug build), ``scf.if`` on the negated condition holding
      ``gpu.printf`` of the message and its values, then ``llvm.intr.trap``; with ``timeout=0`` the op
      is erased (values computed only for it die in canonicalize), so a release build's PTX is that of
      the kernel without it. The debug flag of a build is ``timeout`` > 0 (``compile_kernel``'s
      ``debug_timeout_ms``): one option, so a debug build never has checks without trapping waits or
      the other way round.
    """

    name = "fa4-lower-barriers"
    timeout: int = 0  # ms a barrier wait may last before the kernel traps; 0: wait forever

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        if self.timeout < 0:
            return [Diagnostic.at(module.location, "error",
                                  f"option 'timeout' of fa4-lower-barriers must be >= 0 ms, got {self.timeout}")]
        if self.timeout > MAX_DEBUG_TIMEOUT_MS:
            return [Diagnostic.at(module.location, "error", (
                f"option 'timeout' of fa4-lower-barriers must be <= {MAX_DEBUG_TIMEOUT_MS} ms (the 64-bit "
                f"nanosecond timer), got {self.timeout}"))]
        return lower_kernels(module, "sm_100a", lambda k: _lower(k, self.timeout))


def _lower(k: KernelLowering, timeout_ms: int):
    for group in _init_runs(k.ops("fa4.mbarrier_init")):
        with k.at(group[0]):
            _init(k, group)
        for op in group:
            op.operation.erase()
    for op in k.ops("fa4.mbarrier_arrive", "fa4.mbarrier_arrive_expect_tx", "fa4.mbarrier_try_wait_parity",
                    "fa4.mma_commit"):
        with k.at(op):
            if op.OPERATION_NAME == "fa4.mbarrier_try_wait_parity" and timeout_ms:
                _try_wait_or_trap(k, op, timeout_ms)
            else:
                _LOWER[op.OPERATION_NAME](k, op)
        op.operation.erase()
    for op in k.ops("fa4.debug_check"):
        if timeout_ms:
            with k.at(op):
                _check_or_trap(k, op)
        op.operation.erase()
    return []


def _init_runs(ops) -> list[list]:
    """Consecutive fa4.mbarrier_init ops of one block, grouped."""
    runs: list[list] = []
    for op in ops:
        prev = runs[-1][-1].operation if runs else None
        block_ops = list(op.operation.block.operations)
        i = block_ops.index(op.operation)
        if prev is not None and i > 0 and block_ops[i - 1] == prev:
            runs[-1].append(op)
        else:
            runs.append([op])
    return runs


def _then(cond: ir.Value) -> ir.InsertionPoint:
    if_op = scf.IfOp(cond)
    with ir.InsertionPoint(if_op.then_block):
        return ir.InsertionPoint(scf.YieldOp([]).operation)


def _init(k: KernelLowering, group) -> None:
    i1_eq = arith.CmpIPredicate.eq
    warp0 = arith.cmpi(i1_eq, k.warp_index(), k.const(0))
    with _then(warp0):
        lane = k.lane()
        for op in group:
            alloc = k.barrier_array(op.barriers, op)
            counts = alloc.counts
            for first in range(0, len(counts), WARP):
                index = arith.addi(lane, k.const(first)) if first else lane
                todo = len(counts) - first
                if todo < WARP:
                    with _then(arith.cmpi(arith.CmpIPredicate.ult, lane, k.const(todo))):
                        _init_one(k, op, index, counts)
                else:
                    _init_one(k, op, index, counts)
        nvvm.FenceMbarrierInitOp()
    if k.cluster_size() > 1 or any(k.barrier_array(op.barriers, op).cta_group == 2 for op in group):
        nvvm.ClusterArriveOp(aligned=True)
        nvvm.ClusterWaitOp(aligned=True)
    else:
        nvvm.Barrier0Op()


def _init_one(k: KernelLowering, op, index: ir.Value, counts: list[int]) -> None:
    count = k.const(counts[-1])
    for i in range(len(counts) - 2, -1, -1):  # a select chain where counts differ per barrier
        if counts[i] != counts[-1]:
            count = arith.select(arith.cmpi(arith.CmpIPredicate.eq, index, k.const(i)), k.const(counts[i]), count)
    nvvm.MBarrierInitOp(k.barrier_address(op.barriers, index, op), count)


def _leader_rank(k: KernelLowering) -> ir.Value:
    return arith.andi(k.cta_rank(), k.const(~1))


def _arrive(k: KernelLowering, op) -> None:
    alloc = k.barrier_array(op.barriers, op)
    address = k.barrier_address(op.barriers, op.index, op)
    count = k.const(op.count) if op.count != 1 else None
    # A remote arrival keeps the default .release.cta: what it releases are the thread's async-proxy reads
    # (wgmma, tcgen05.ld), complete once their wait returned, and .release.cluster costs a MEMBAR.ALL.GPU
    # before every arrival (ptxas 13.0, sm_90a), which halved the 2x1-cluster GEMM's speed on the H100.
    if alloc.cta_group == 2:
        remote = nvvm.MapaOp(ir.Type.parse("!llvm.ptr<7>"), address, _leader_rank(k)).result
        nvvm.MBarrierArriveOp(None, remote, count=count)
    elif alloc.multicast_mask is not None:  # the barrier at this index in each CTA of the mask, this one's too
        for rank in _mask_ranks(k, op, alloc):
            remote = nvvm.MapaOp(ir.Type.parse("!llvm.ptr<7>"), address, k.const(rank)).result
            nvvm.MBarrierArriveOp(None, remote, count=count)
    else:
        nvvm.MBarrierArriveOp(ir.IntegerType.get_signless(64), address, count=count)


def _mask_ranks(k: KernelLowering, op, alloc) -> list[int]:
    """The cluster ranks of ``alloc``'s ``multicast_mask``, each below the kernel's cluster size."""
    size = k.cluster_size()
    if alloc.multicast_mask >> size:
        raise LoweringFailure(op, f"multicast_mask of mbarrier array '{alloc.sym_name}' must name CTAs of the kernel's "
                                  f"cluster of {size} (bits below {size}), got {alloc.multicast_mask:#x}: declare the "
                                  f"kernel's cluster (nvvm.cluster_dim) or narrow the mask")
    return [rank for rank in range(size) if alloc.multicast_mask >> rank & 1]


def _expect_tx(k: KernelLowering, op) -> None:
    alloc = k.barrier_array(op.barriers, op)
    address = k.barrier_address(op.barriers, op.index, op)
    if alloc.cta_group == 2:
        is_leader = arith.cmpi(arith.CmpIPredicate.eq, arith.andi(k.cta_rank(), k.const(1)), k.const(0))
        with _then(is_leader):
            nvvm.MBarrierArriveExpectTxOp(None, address, k.const(2 * op.tx_bytes))
    else:
        nvvm.MBarrierArriveExpectTxOp(None, address, k.const(op.tx_bytes))


def _try_wait(k: KernelLowering, op) -> None:
    nvvm.MBarrierTryWaitParityOp(k.barrier_address(op.barriers, op.index, op), op.phase, k.const(WAIT_TICKS))


def _try_wait_or_trap(k: KernelLowering, op, timeout_ms: int) -> None:
    """try_wait until the phase completes; after ``timeout_ms`` print what was awaited and trap."""
    i1, i64 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(64)
    address = k.barrier_address(op.barriers, op.index, op)
    start = nvvm.GlobalTimerOp(i64).result
    loop = scf.WhileOp([], [])
    before, after = loop.before.blocks.append(), loop.after.blocks.append()
    with ir.InsertionPoint(before):
        done = nvvm.MBarrierTryWaitOp(i1, address, op.phase, ticks=k.const(WAIT_TICKS)).result
        waiting = arith.xori(done, k.flag(True))
        with _then(waiting):
            elapsed = arith.subi(nvvm.GlobalTimerOp(i64).result, start)
            with _then(arith.cmpi(arith.CmpIPredicate.ugt, elapsed, k.const(timeout_ms * 1_000_000, 64))):
                _report_timeout(k, op, timeout_ms)
        scf.ConditionOp(waiting, [])
    with ir.InsertionPoint(after):
        scf.YieldOp([])


def _report_timeout(k: KernelLowering, op, timeout_ms: int) -> None:
    i32 = ir.IntegerType.get_signless(32)
    kernel = ir.StringAttr(k.scope.attributes["sym_name"]).value
    barrier = k.barrier_array(op.barriers, op).sym_name
    block = [nvvm.BlockIdXOp(i32).result, nvvm.BlockIdYOp(i32).result, nvvm.BlockIdZOp(i32).result]
    gpu.PrintfOp(f"fa4 debug: barrier wait timed out after {timeout_ms} ms: kernel {kernel}, barrier "
               f"{barrier}[%u] phase %u, block (%u,%u,%u) thread %u\n",
               [op.index, op.phase, *block, k.tid()])
    llvm.intr_trap()


def _check_or_trap(k: KernelLowering, op) -> None:
    """Where ``op.cond`` is false: print the message with the values and trap."""
    message = op.message if op.message.endswith("\n") else op.message + "\n"
    with _then(arith.xori(op.cond, k.flag(True))):
        gpu.PrintfOp(message, list(op.values))
        llvm.intr_trap()


def _commit(k: KernelLowering, op) -> None:
    alloc = k.barrier_array(op.barriers, op)
    address = k.barrier_address(op.barriers, op.index, op)
    if k.target.sm >= 100:
        mask = k.const(op.multicast_mask, 16) if op.multicast_mask is not None else None
        nvvm.Tcgen05CommitOp(address, multicastMask=mask,
                             group=ir.Attribute.parse(f"#nvvm.cta_group<cta_{alloc.cta_group}>"))
        return
    nvvm.WgmmaGroupSyncAlignedOp()
    nvvm.WgmmaWaitGroupSyncOp(0)
    first = arith.cmpi(arith.CmpIPredicate.eq, arith.remui(k.tid(), k.const(WARPGROUP_THREADS)), k.const(0))
    with _then(first):
        nvvm.MBarrierArriveOp(ir.IntegerType.get_signless(64), address)


_LOWER = {
    "fa4.mbarrier_arrive": _arrive,
    "fa4.mbarrier_arrive_expect_tx": _expect_tx,
    "fa4.mbarrier_try_wait_parity": _try_wait,
    "fa4.mma_commit": _commit,
}
