"""fa4-lower-tma: TMA loads and stores become cp.async.bulk.tensor."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir, llvm, nvvm
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lowering import KernelLowering, lower_kernels

PEER_BIT = 1 << 24  # shared::cluster address bit that selects the odd CTA of a pair


def tensor_map_pointer(value: ir.Value) -> ir.Value:
    """The tensor map as the generic pointer TMA takes. Kernel arguments of type !fa4.tensormap
    become ``!llvm.ptr`` __grid_constant__ parameters in fa4-lower-kernel; until then a cast bridges
    the types (reconcile-unrealized-casts removes it)."""
    ptr = ir.Type.parse("!llvm.ptr")
    if value.type == ptr:
        return value
    return ir.Operation.create("builtin.unrealized_conversion_cast", results=[ptr], operands=[value]).result


@dataclasses.dataclass(frozen=True)
class LowerTmaPass(Fa4Pass):
    """No fa4.tma_load, fa4.tma_store or fa4.tma_store_wait is left.

    A load becomes ``cp.async.bulk.tensor.Nd`` into ``dst + dst_offset`` completing ``bytes`` on its
    barrier: a ``shared::cta`` destination for one CTA; a ``shared::cluster`` destination with a
    16-bit mask when multicast; for a barrier of a CTA pair (``cta_group = 2``), ``.cta_group::2``
    with the barrier address of the pair's even (leader) CTA, so the leader's expect_tx counts the
    bytes of both CTAs. A store becomes ``fence.proxy.async.shared::cta``, the
    ``global.shared::cta`` copy and ``cp.async.bulk.commit_group``; a store wait
    ``cp.async.bulk.wait_group.read pending``. Tensor maps are read through their kernel parameter
    (a 128-byte ``__grid_constant__``, see fa4-lower-kernel).
    """

    name = "fa4-lower-tma"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        return lower_kernels(module, "sm_100a", _lower)


def _lower(k: KernelLowering):
    for op in k.ops("fa4.tma_load"):
        with k.at(op):
            _load(k, op)
        op.operation.erase()
    for op in k.ops("fa4.tma_store"):
        with k.at(op):
            nvvm.FenceProxyOp(ir.Attribute.parse("#nvvm.proxy_kind<async.shared>"),
                              space=ir.Attribute.parse("#nvvm.shared_space<cta>"))
            nvvm.CpAsyncBulkTensorSharedCTAToGlobalOp(
                tensor_map_pointer(op.tensor_map), k.smem_address(op.src, op.src_offset, user=op), list(op.coords))
            nvvm.CpAsyncBulkCommitGroupOp()
        op.operation.erase()
    for op in k.ops("fa4.tma_store_wait"):
        with k.at(op):
            nvvm.CpAsyncBulkWaitGroupOp(op.pending, read=True)
        op.operation.erase()
    return []


def _load(k: KernelLowering, op) -> None:
    pair = k.barrier_array(op.barriers, op).cta_group == 2
    barrier = k.barrier_address(op.barriers, op.index, op)
    dst = k.smem_address(op.dst, op.dst_offset, user=op)
    extra = {}
    if pair:
        i64 = ir.IntegerType.get_signless(64)
        leader = llvm.and_(llvm.ptrtoint(i64, barrier), k.const(~PEER_BIT, 64))
        barrier = llvm.inttoptr(barrier.type, leader)
        extra["group"] = ir.Attribute.parse("#nvvm.cta_group<cta_2>")
    if op.multicast_mask is not None:
        extra["multicastMask"] = k.const(op.multicast_mask, 16)
    if pair or op.multicast_mask is not None:
        dst = llvm.addrspacecast(ir.Type.parse("!llvm.ptr<7>"), dst)
    else:
        extra["isCTAOnly"] = True
    nvvm.CpAsyncBulkTensorGlobalToSharedClusterOp(
        dst, tensor_map_pointer(op.tensor_map), list(op.coords), barrier, [], **extra)
