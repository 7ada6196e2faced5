"""fa4-lower-wgmma: warpgroup MMAs become wgmma.mma_async (sm_90a)."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir, llvm, nvvm
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lowering import KernelLowering, canonical_offsets, lower_kernels, replace_op

# wgmma matrix descriptor (PTX ISA "Matrix Descriptor Format" for sm_90): start address, leading and
# stride byte offsets in 16-byte units at bits 0, 16 and 32; the swizzle mode at bits 62-63.
_LAYOUT = {"128B": 1, "64B": 2, "32B": 3}


def wgmma_descriptor_bits(swizzle: str, block_stride: int | None = None) -> int:
    """The constant part of a wgmma descriptor: K-major, or MN-major when ``block_stride`` is given
    (``canonical_offsets``), and the swizzle mode."""
    return canonical_offsets(swizzle, block_stride) | (_LAYOUT[swizzle] << 62)


@dataclasses.dataclass(frozen=True)
class LowerWgmmaPass(Fa4Pass):
    """No fa4.wgmma, fa4.wgmma_commit, fa4.wgmma_wait or fa4.wgmma_fence_acc is left; on sm_100a
    each one is an error.

    A wgmma becomes ``wgmma.mma_async.sync.aligned.m64nNk16.f32`` on swizzled descriptors (B
    transposed, ``imm-trans-b = 1``, when it is MN-major), preceded by ``wgmma.fence.sync.aligned``
    unless the op before it is a wgmma of the same chain. The RS form (A in registers) is inline PTX
    whose accumulators are tied in/out operands. Commit and wait become ``wgmma.commit_group`` and
    ``wgmma.wait_group pending``; an accumulator fence becomes an empty inline PTX statement whose
    outputs are its inputs, so nothing that reads them moves above it.
    """

    name = "fa4-lower-wgmma"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        return lower_kernels(module, "sm_90a", _lower)


def _lower(k: KernelLowering):
    ops = k.ops("fa4.wgmma", "fa4.wgmma_commit", "fa4.wgmma_wait", "fa4.wgmma_fence_acc")
    for op in ops:
        k.require_sm90(op, "warpgroup MMA (wgmma)")
    for op in ops:
        with k.at(op):
            if op.OPERATION_NAME == "fa4.wgmma_commit":
                nvvm.WgmmaGroupSyncAlignedOp()
            elif op.OPERATION_NAME == "fa4.wgmma_wait":
                nvvm.WgmmaWaitGroupSyncOp(op.pending)
            elif op.OPERATION_NAME == "fa4.wgmma_fence_acc":
                replace_op(op, [_tied_asm(op.acc, "", [], "")])
                continue
            else:
                replace_op(op, [_wgmma(k, op)])
                continue
        op.operation.erase()
    return []


_OPERAND_MOVES = ("llvm.extractvalue", "llvm.extractelement", "arith.constant")


def _follows_wgmma(op) -> bool:
    """The op before (past the moves that feed an RS wgmma's operands) is a wgmma of one chain."""
    block_ops = list(op.operation.block.operations)
    i = block_ops.index(op.operation) if op.operation in block_ops else 0
    while i > 0 and block_ops[i - 1].operation.name in _OPERAND_MOVES:
        i -= 1
    if i == 0:
        return False
    prev = block_ops[i - 1].operation
    if prev.name == "llvm.inline_asm":
        return "wgmma.mma_async" in str(prev.attributes["asm_string"])
    return prev.name in ("fa4.wgmma", "nvvm.wgmma.mma_async")


def _tied_asm(acc: ir.Value, text: str, inputs: list[ir.Value], input_constraints: str) -> ir.Value:
    """Inline PTX ``text`` whose outputs ``$0 .. $n-1`` are the f32 fields of ``acc``, tied to the
    same registers as inputs ``$n .. $2n-1``, followed by ``inputs`` (from ``$2n``)."""
    n = str(acc.type).count("f32")
    f32 = ir.F32Type.get()
    fields = [llvm.extractvalue(f32, acc, [i]) for i in range(n)]
    constraints = ",".join(["=f"] * n + [str(i) for i in range(n)] + ([input_constraints] if inputs else []))
    return llvm.inline_asm(acc.type, fields + inputs, text, constraints, has_side_effects=True)


def _wgmma_rs(k: KernelLowering, op) -> ir.Value:
    """``wgmma.mma_async`` with A from registers, as inline PTX (NVVM's op takes descriptors only)."""
    n = op.n // 2  # accumulator registers
    b = k.matrix_descriptor(op.b, op.b_offset, op, lambda swizzle: wgmma_descriptor_bits(swizzle, op.b_block_stride))
    a = [llvm.extractelement(op.a, k.const(i)) for i in range(4)]
    d = ", ".join(f"${i}" for i in range(n))
    regs = ", ".join(f"${2 * n + i}" for i in range(4))
    # e4m3 (k32) has no imm-trans-b: its B is K-major
    trans = "" if op.ab_type == "e4m3" else f", {1 if op.b_major == 'mn' else 0}"
    text = (f"{{\n.reg .pred p;\nsetp.ne.b32 p, {op.accumulate}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m64n{op.n}k{_k(op)}.f32.{op.ab_type}.{op.ab_type} {{{d}}}, {{{regs}}}, "
            f"${2 * n + 4}, p, 1, 1{trans};\n}}")
    return _tied_asm(op.acc, text, a + [b], "r,r,r,r,l")


def _k(op) -> int:
    """The instruction's K: 32 bytes of a row (k16 for 16-bit types, k32 for e4m3)."""
    return 32 if op.ab_type == "e4m3" else 16


def _wgmma(k: KernelLowering, op) -> ir.Value:
    if not _follows_wgmma(op):
        nvvm.WgmmaFenceAlignedOp()
    if str(op.a.type) != "!fa4.smem":
        return _wgmma_rs(k, op)
    a = k.matrix_descriptor(op.a, op.a_offset, op, wgmma_descriptor_bits)
    b = k.matrix_descriptor(op.b, op.b_offset, op, lambda swizzle: wgmma_descriptor_bits(swizzle, op.b_block_stride))
    attr = ir.Attribute.parse
    return nvvm.WgmmaMmaAsyncOp(
        op.acc.type, op.acc, a, b, attr(f"#nvvm.shape<m = 64, n = {op.n}, k = {_k(op)}>"),
        attr(f"#nvvm.wgmma_type<{op.ab_type}>"), attr(f"#nvvm.wgmma_type<{op.ab_type}>"),
        attr("#nvvm.wgmma_type<f32>"), attr(f"#nvvm.wgmma_scale_out<{'one' if op.accumulate else 'zero'}>"),
        attr("#nvvm.wgmma_scale_in<one>"), attr("#nvvm.wgmma_scale_in<one>"),
        attr("#nvvm.mma_layout<row>"), attr(f"#nvvm.mma_layout<{'row' if op.b_major == 'mn' else 'col'}>")).result
