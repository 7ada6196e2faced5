"""Control flow: branches (reconverging at the immediate post-dominator), ret/exit, trap.

A kernel's ``ret`` and ``exit`` end the executing lanes. Calls to ``.func`` functions are not modelled
(LLVM inlines everything in the kernels this emulator targets); ``call`` is an Unsupported error.
"""

from __future__ import annotations

from fa4_mlir.emu.errors import EmulationError
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.operands import syntax
from fa4_mlir.emu.ptx import ast


class Trap(EmulationError):
    """The kernel executed ``trap`` (on a GPU: an illegal-instruction error that ends the context)."""


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


@handles("trap")
def _trap(op, ctx) -> None:
    def run(w, m):
        raise Trap(f"{w.where(op)} executed trap")
    op.run = run


@handles("nanosleep", "pmevent", "prefetch", "prefetchu", "griddepcontrol", "discard", "applypriority")
def _hint(op, ctx) -> None:
    op.run = lambda w, m: None


@handles("call")
def _call(op, ctx) -> None:
    raise unsupported(op, "function calls are not modelled; inline the callee")
