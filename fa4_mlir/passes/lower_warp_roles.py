"""fa4-lower-warp-roles: warp roles become a dispatch on the warp index."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import arith, ir, nvvm, scf
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.dialects import fa4
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lowering import WARP, KernelLowering, LoweringFailure, lower_kernels

REGISTER_FILE = 65536  # 32-bit registers per SM
MAX_THREAD_REGISTERS = 255
WARPGROUP_WARPS = 4


def entry_register_cap(threads: int) -> int:
    """Registers per thread ptxas may use at entry with ``.reqntid threads`` and ``.minnctapersm 1``:
    the register file split over the CTA in the allocation granule of 8, at most 255
    (65536 / 384 -> 168; 65536 / 192 -> 255)."""
    return min(MAX_THREAD_REGISTERS, REGISTER_FILE // threads // 8 * 8)


@dataclasses.dataclass(frozen=True)
class LowerWarpRolesPass(Fa4Pass):
    """No fa4.warp_specialize, fa4.named_barrier or fa4.elect_one is left.

    Each ``fa4.warp_role`` becomes ``scf.if`` on the warp index (``tid.x / 32``) holding its body,
    which starts with ``setmaxregister`` when the role's budget differs from the entry cap; idle
    warps of a warpgroup with a budget execute the same ``setmaxregister`` (it is warpgroup-wide).
    The kernel gets ``nvvm.reqntid = [num_warps * 32, 1, 1]`` and, when any role sets registers,
    ``nvvm.minctasm = 1``: with both, ptxas knows the entry register count (65536 / threads, rounded
    down to 8) and honours ``setmaxnreg``. Named barriers get distinct hardware ids in [1, 15] in
    order of first use (0 stays the CTA-wide barrier; a family of ``count`` takes ``count`` consecutive
    ids, its ops ``base + index``); ``fa4.elect_one`` becomes ``elect.sync``.
    """

    name = "fa4-lower-warp-roles"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        return lower_kernels(module, "sm_100a", _lower)


def _lower(k: KernelLowering):
    _lower_named_barriers(k)
    for op in k.ops("fa4.elect_one"):
        with k.at(op):
            elected = nvvm.elect_sync(ir.IntegerType.get_signless(1))
        op.result.replace_all_uses_with(elected)
        op.operation.erase()
    specializations = k.ops("fa4.warp_specialize")
    if len(specializations) > 1:
        raise LoweringFailure(specializations[1], (
            "'fa4.warp_specialize' must appear once per kernel, got a second one"))
    for op in specializations:
        _lower_specialize(k, op)
    return []


def _lower_named_barriers(k: KernelLowering) -> None:
    ids: dict[str, int] = {}  # a name's (a family's first) hardware id
    counts: dict[str, int] = {}
    free = 1
    for op in k.ops("fa4.named_barrier"):
        count = op.count or 1
        if op.sym_name not in ids:
            if free + count - 1 > fa4.NAMED_BARRIERS - 1:
                raise LoweringFailure(op, (
                    f"named barriers must number <= {fa4.NAMED_BARRIERS - 1} per kernel (ids 1 to 15), "
                    f"got {free + count - 1} with '{op.sym_name}'" + (f" (a family of {count})" if count > 1 else "")))
            ids[op.sym_name], counts[op.sym_name] = free, count
            free += count
        elif counts[op.sym_name] != count:
            raise LoweringFailure(op, (
                f"the count of named barrier '{op.sym_name}' must be the same at every use, got "
                f"{counts[op.sym_name]} and {count}"))
        with k.at(op):
            barrier_id, threads = k.const(ids[op.sym_name]), k.const(op.threads)
            if op.count is not None:  # the family's member: base + index (the same in every thread of a warp)
                barrier_id = arith.addi(barrier_id, list(op.index)[0])
            if op.kind == "sync":
                nvvm.BarrierOp(None, barrierId=barrier_id, numberOfThreads=threads)
            else:
                nvvm.BarrierArriveOp(threads, barrierId=barrier_id)
        op.operation.erase()


def _lower_specialize(k: KernelLowering, op) -> None:
    threads = op.num_warps * WARP
    _set_block_size(k, op, threads)
    roles = op.roles()
    cap = entry_register_cap(threads)
    budgets = {w // WARPGROUP_WARPS: r.registers for r in roles if r.registers is not None for w in r.warps}
    if budgets:
        k.scope.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1)
    with k.at(op):
        warp = k.warp_index()
        for role in roles:
            then = _branch(k, warp, role.warps)
            with ir.InsertionPoint(then):
                _set_registers(role.registers, cap)
            for body_op in list(role.operation.regions[0].blocks[0].operations)[:-1]:
                body_op.operation.move_before(then)
        busy = {w for r in roles for w in r.warps}
        for group, registers in sorted(budgets.items()):
            idle = [w for w in range(group * WARPGROUP_WARPS, (group + 1) * WARPGROUP_WARPS)
                    if w < op.num_warps and w not in busy]
            if idle:
                with ir.InsertionPoint(_branch(k, warp, idle)):
                    _set_registers(registers, cap)
    op.operation.erase()


def _set_block_size(k: KernelLowering, op, threads: int) -> None:
    attrs = k.scope.attributes
    for name in ("nvvm.reqntid", "nvvm.maxntid"):
        if name in attrs:
            dims = list(ir.DenseI32ArrayAttr(attrs[name]))
            total = 1
            for d in dims:
                total *= d
            if total != threads:
                raise LoweringFailure(op, (
                    f"num_warps * 32 must equal the kernel's {name} ({total} threads), got {threads}"))
    attrs["nvvm.reqntid"] = ir.DenseI32ArrayAttr.get([threads, 1, 1])


def _set_registers(registers: int | None, cap: int) -> None:
    if registers is None or registers == cap:
        return
    nvvm.SetMaxRegisterOp(registers, "increase" if registers > cap else "decrease")


def _branch(k: KernelLowering, warp: ir.Value, warps) -> ir.Operation:
    """``scf.if (warp in warps)``; returns the then-block's terminator (insert before it)."""
    cond = None
    for first, last in _ranges(sorted(set(warps))):
        if first == last:
            term = arith.cmpi(arith.CmpIPredicate.eq, warp, k.const(first))
        elif first == 0:
            term = arith.cmpi(arith.CmpIPredicate.ule, warp, k.const(last))
        else:
            term = arith.andi(arith.cmpi(arith.CmpIPredicate.uge, warp, k.const(first)),
                              arith.cmpi(arith.CmpIPredicate.ule, warp, k.const(last)))
        cond = term if cond is None else arith.ori(cond, term)
    if_op = scf.IfOp(cond)
    with ir.InsertionPoint(if_op.then_block):
        return scf.YieldOp([]).operation


def _ranges(warps: list[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for w in warps:
        if ranges and ranges[-1][1] == w - 1:
            ranges[-1] = (ranges[-1][0], w)
        else:
            ranges.append((w, w))
    return ranges
