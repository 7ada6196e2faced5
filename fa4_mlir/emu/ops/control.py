"""Control flow: branches (reconverging at the immediate post-dominator), ret/exit, trap.

A kernel's ``ret`` and ``exit`` end the executing lanes. Calls to ``.func`` functions are not modelled
(LLVM inlines everything in the kernels this emulator targets); ``call`` is an Unsupported error.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu.errors import Trap
from fa4_mlir.emu.machine import FULL, LANES
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.operands import syntax
from fa4_mlir.emu.ptx import ast


@handles("bra")
def _bra(op, ctx) -> None:
    if set(op.ins.modifiers) - {"uni"}:
        raise unsupported(op)
    if len(op.ins.operands) != 1 or not isinstance(op.ins.operands[0], ast.Symbol):
        raise unsupported(op, "bra needs one label operand")
    label = op.ins.operands[0].name
    target = ctx.label(label)
    if target is None:
        raise syntax(ctx, op.ins, f"branch target {label} is not a label of this function")
    op.kind = "branch"
    op.target = target


@handles("ret", "exit")
def _ret(op, ctx) -> None:
    if set(op.ins.modifiers) - {"uni"} or op.ins.operands:
        raise unsupported(op)
    op.kind = "exit"


SHOWN_LINES = 4  # printed lines a Trap's message repeats (all are in Trap.output)


@handles("trap")
def _trap(op, ctx) -> None:
    def run(w, m):
        printed = list(w.launch.stats.output)
        message = f"{w.where(op)} executed trap"
        if printed:  # a debug build prints why before it traps: the GPU's printf buffer, in the error
            more = f"\n... ({len(printed) - SHOWN_LINES} more lines)" if len(printed) > SHOWN_LINES else ""
            message += f"; the kernel printed before it:\n{''.join(printed[:SHOWN_LINES]).rstrip()}{more}"
        raise Trap(message, printed)
    op.run = run


@handles("nanosleep", "pmevent", "prefetch", "prefetchu", "griddepcontrol", "discard", "applypriority")
def _hint(op, ctx) -> None:
    op.run = lambda w, m: None


@handles("call")
def _call(op, ctx) -> None:
    """Only ``vprintf`` (what CUDA's printf and our debug builds call) is modelled: its format string is
    read from global memory and its packed arguments from the thread's local memory, as the CUDA
    printf ABI lays them out (each argument aligned to its size; floats are passed as doubles)."""
    operands = [o for o in op.ins.operands if not isinstance(o, ast.Vector)]
    callee = operands[0].name if operands and isinstance(operands[0], ast.Symbol) else None
    fn = ctx.kernel.functions.get(callee)
    if callee != "vprintf" or fn is None or fn.body is not None:
        raise unsupported(op, "function calls are not modelled (except vprintf); inline the callee")
    lists = [o for o in op.ins.operands if isinstance(o, ast.Vector)]
    args = lists[-1].elements if lists else ()
    ret = lists[0].elements if len(lists) == 2 else ()
    if len(args) != 2 or not all(isinstance(a, ast.Symbol) for a in (*args, *ret)):
        raise unsupported(op, "vprintf takes (format, arguments) call parameters")
    slots = [ctx.kernel.local_symbols.get(a.name) for a in (*args, *ret)]
    if None in slots:
        raise unsupported(op, "vprintf's call parameters must be declared .param in the call block")

    def run(w, m):
        from fa4_mlir.emu.ops.printf import vprintf
        for lane in (LANES if m is FULL else LANES[m]):
            w.launch.stats.output.append(vprintf(w, op, int(lane), slots[0], slots[1]))
            if len(slots) > 2:
                w.local_write(int(lane), slots[2], np.uint32(0).tobytes())
    op.run = run
