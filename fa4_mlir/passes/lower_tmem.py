"""fa4-lower-tmem: tensor-memory ops and tcgen05 MMAs become tcgen05 instructions (sm_100a)."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import arith, ir, llvm, nvvm
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.core.ir_utils import defining_op
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lowering import (KernelLowering, LoweringFailure, canonical_offsets, lower_kernels,
                                      replace_op)

# Shared-memory matrix descriptor of tcgen05 (PTX ISA "Shared memory descriptor"): start address,
# leading and stride byte offsets in 16-byte units at bits 0, 16 and 32, the fixed version bit 46,
# the swizzle mode at bits 61-63.
_LAYOUT = {"128B": 2, "64B": 4, "32B": 6}
# Instruction descriptor of kind::f16 / kind::tf32 / kind::f8f6f4: D format (f32 = 1) at bit 4, A and
# B formats at bits 7 and 10 (kind::f8f6f4: E4M3 is 0), K-major A (bit 15 clear), B transposed
# (MN-major) at bit 16, N >> 3 at bit 17, M >> 4 at bit 24.
_FORMAT = {"f16": 0, "bf16": 1, "tf32": 2, "e4m3": 0}
_KIND = {"f16": "f16", "bf16": "f16", "tf32": "tf32", "e4m3": "f8f6f4"}
LANES_PER_WARP_SHIFT = 21  # (32 lanes) << 16: the lane field of a TMEM address


def smem_descriptor_bits(swizzle: str, block_stride: int | None = None) -> int:
    """The constant part of a tcgen05 shared-memory descriptor: K-major, or MN-major when
    ``block_stride`` (bytes between blocks of one swizzle width along M/N) is given."""
    return canonical_offsets(swizzle, block_stride) | (1 << 46) | (_LAYOUT[swizzle] << 61)


def instruction_descriptor(ab_type: str, m: int, n: int, b_major: str = "k") -> int:
    fmt = _FORMAT[ab_type]
    transpose_b = 1 if b_major == "mn" else 0
    return (1 << 4) | (fmt << 7) | (fmt << 10) | (transpose_b << 16) | ((n >> 3) << 17) | ((m >> 4) << 24)


@dataclasses.dataclass(frozen=True)
class LowerTmemPass(Fa4Pass):
    """No fa4 tensor-memory op or fa4.tcgen05_mma is left; on sm_90a each one is an error.

    ``tmem_alloc`` becomes ``tcgen05.alloc`` into its slot plus ``relinquish_alloc_permit``;
    ``tmem_dealloc`` reads the base back and ``tcgen05.dealloc``s it. A TMEM region's address is the
    base from the kernel's one allocation slot plus its column (plus ``32 * (warp % 4)`` in the lane
    field for ``tmem_load`` / ``tmem_store``, shape ``32x32b``). Loads are fenced
    (``tcgen05.fence::after_thread_sync``), waited (``tcgen05.wait::ld``) and fenced again
    (``before_thread_sync``); stores likewise (``after_thread_sync``, ``tcgen05.wait::st``,
    ``before_thread_sync``): the PTX ISA's canonical patterns for tcgen05 operations ordered across warps. ``tcgen05_mma`` becomes
    ``tcgen05.mma`` with swizzled shared-memory descriptors (K-major, or MN-major for an
    ``b_major = "mn"`` B; or a TMEM A operand) and a constant instruction descriptor. A
    ``fa4.tmem_stage`` adds ``stage * columns`` to its region's address.
    """

    name = "fa4-lower-tmem"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        return lower_kernels(module, "sm_100a", _lower)


def _lower(k: KernelLowering):
    ops = k.ops("fa4.tmem_alloc", "fa4.tmem_dealloc", "fa4.tmem_load", "fa4.tmem_store", "fa4.tcgen05_mma")
    if not ops:
        return []
    for op in ops:
        k.require_sm100(op, "tensor memory (tcgen05)")
    slots = [op.slot for op in ops if op.OPERATION_NAME == "fa4.tmem_alloc"]  # outlive the erased slots
    for op in ops:
        with k.at(op):
            if op.OPERATION_NAME in ("fa4.tmem_alloc", "fa4.tmem_dealloc"):
                _allocation(k, op)
            elif op.OPERATION_NAME == "fa4.tmem_load":
                nvvm.Tcgen05FenceOp(ir.Attribute.parse("#nvvm.tcgen05_fence<after>"))
                value = nvvm.Tcgen05LdOp(op.result.type, _shape_32x32b(), _tmem(k, op.tmem, op, slots, op.column_offset,
                                                                        per_warp=True)).result
                nvvm.Tcgen05WaitOp(ir.Attribute.parse("#nvvm.tcgen05_wait<load>"))
                # The read must be ordered before the next thread sync too: an MMA that another warp issues
                # after it may overwrite the cells (PTX ISA tcgen05 canonical pattern "ld in one thread, mma
                # in another": ld; wait::ld; fence::before_thread_sync; arrive).
                nvvm.Tcgen05FenceOp(ir.Attribute.parse("#nvvm.tcgen05_fence<before>"))
                replace_op(op, [value])
                continue
            elif op.OPERATION_NAME == "fa4.tmem_store":
                # Like a load: ordered after the thread sync that released the cells (an MMA of another
                # warp may have read or written them), so fenced after it, then waited and fenced before.
                nvvm.Tcgen05FenceOp(ir.Attribute.parse("#nvvm.tcgen05_fence<after>"))
                nvvm.Tcgen05StOp(_shape_32x32b(), _tmem(k, op.tmem, op, slots, op.column_offset, per_warp=True), op.value)
                nvvm.Tcgen05WaitOp(ir.Attribute.parse("#nvvm.tcgen05_wait<store>"))
                nvvm.Tcgen05FenceOp(ir.Attribute.parse("#nvvm.tcgen05_fence<before>"))
            else:
                _mma(k, op, slots)
        op.operation.erase()
    return []


def _shape_32x32b() -> ir.Attribute:
    return ir.Attribute.parse("#nvvm.tcgen05_ldst_shape<shape_32x32b>")


def _group(cta_group: int) -> ir.Attribute:
    return ir.Attribute.parse(f"#nvvm.cta_group<cta_{cta_group}>")


def _columns(k: KernelLowering, op) -> int:
    if op.columns is not None:
        return op.columns
    attrs = k.scope.attributes
    if "fa4.tmem_columns" not in attrs:
        raise LoweringFailure(op, (
            f"'{op.OPERATION_NAME}' columns must be set, or fa4-allocate-tmem run first to set the "
            f"kernel's fa4.tmem_columns; got neither"))
    return ir.IntegerAttr(attrs["fa4.tmem_columns"]).value


def _allocation(k: KernelLowering, op) -> None:
    slot = k.smem_address(op.slot, user=op)
    columns = k.const(_columns(k, op))
    if op.OPERATION_NAME == "fa4.tmem_alloc":
        nvvm.Tcgen05AllocOp(slot, columns, group=_group(op.cta_group))
        nvvm.Tcgen05RelinquishAllocPermitOp(group=_group(op.cta_group))
    else:
        base = llvm.inttoptr(ir.Type.parse("!llvm.ptr<6>"), llvm.load(ir.IntegerType.get_signless(32), slot))
        nvvm.Tcgen05DeallocOp(base, columns, group=_group(op.cta_group))


def _tmem(k: KernelLowering, value: ir.Value, user, slots, extra_columns: int = 0,
          per_warp: bool = False) -> ir.Value:
    """The TMEM address of a region: allocated base + column (+ the warp's lane quarter)."""
    region, stage = defining_op(value), None
    if region is not None and region.operation.name == "fa4.tmem_stage":
        stage = arith.muli(region.stage, k.const(region.columns))
        region = defining_op(region.base)
    if region is None or region.operation.name != "fa4.tmem_region":
        raise LoweringFailure(user, (
            f"'{user.OPERATION_NAME}' tensor memory must come from fa4.tmem_region or fa4.tmem_stage"))
    if region.column is None:
        raise LoweringFailure(region, (
            f"'fa4.tmem_region' '{region.sym_name}' has no column: run fa4-allocate-tmem before lowering"))
    if len(slots) != 1:
        raise LoweringFailure(user, (
            f"the kernel must allocate tensor memory with exactly one fa4.tmem_alloc, got {len(slots)}"))
    base = llvm.load(ir.IntegerType.get_signless(32), k.smem_address(slots[0], user=user))
    address = arith.addi(base, k.const(region.column + extra_columns))
    if stage is not None:
        address = arith.addi(address, stage)
    if per_warp:
        quarter = arith.andi(k.warp_index(), k.const(3))
        address = arith.addi(address, arith.shli(quarter, k.const(LANES_PER_WARP_SHIFT)))
    return llvm.inttoptr(ir.Type.parse("!llvm.ptr<6>"), address)


def _mma(k: KernelLowering, op, slots) -> None:
    nvvm.Tcgen05FenceOp(ir.Attribute.parse("#nvvm.tcgen05_fence<after>"))
    d = _tmem(k, op.d, op, slots)
    if str(op.a.type) == "!fa4.tmem":
        a = _tmem(k, op.a, op, slots, op.a_offset // 4)  # 4 bytes per TMEM column
    else:
        a = k.matrix_descriptor(op.a, op.a_offset, op, smem_descriptor_bits, pinned=True)
    b = k.matrix_descriptor(op.b, op.b_offset, op, lambda swizzle: smem_descriptor_bits(swizzle, op.b_block_stride),
                            pinned=True)
    idesc = k.const(instruction_descriptor(op.ab_type, op.m, op.n, op.b_major))
    nvvm.Tcgen05MMAOp(ir.Attribute.parse(f"#nvvm.tcgen05_mma_kind<{_KIND[op.ab_type]}>"), _group(op.cta_group),
                      d, a, b, idesc, op.accumulate)
