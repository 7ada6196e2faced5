"""The instruction handlers: one module per family, each registering compile functions by opcode.

A handler ``compile(op, ctx)`` reads ``op.ins`` (the parsed instruction), checks its modifiers and
operands, and sets ``op.run = fn(warp, mask)`` (or ``op.kind``/``op.target`` for control flow). Every
modifier a handler does not understand is an ``Unsupported`` error at load time: nothing is ignored
silently.
"""

from __future__ import annotations

from fa4_mlir.emu.errors import Unsupported
from fa4_mlir.emu.ptx import ast

HANDLERS: dict = {}


def handles(*opcodes: str):
    def register(fn):
        for name in opcodes:
            HANDLERS[name] = fn
        return fn
    return register


def unsupported(op, detail: str = "") -> Unsupported:
    ins = op.ins
    extra = f" ({detail})" if detail else ""
    return Unsupported(f"line {ins.loc.line}: '{ins.full_opcode}' is not supported by the emulator{extra}: "
                       f"{ins.text}")


def compile_instruction(op, ctx) -> None:
    handler = HANDLERS.get(op.ins.opcode)
    if handler is None:
        raise Unsupported(f"line {op.ins.loc.line}: opcode '{op.ins.opcode}' is not supported by the emulator: "
                          f"{op.ins.text or op.ins.full_opcode}")
    handler(op, ctx)
    op.regs = frozenset(_slots(op.ins.operands, ctx, op.ins))
    if op.ins.opcode == "mov" and op.ins.operands:
        op.moved = frozenset(_slots(op.ins.operands[:1], ctx, op.ins))


def _slots(operands, ctx, ins):
    for o in operands:
        if isinstance(o, ast.Register):
            if not ctx.is_special(o) and o.name != "_":
                yield ctx.slot(o, ins)
        elif isinstance(o, ast.Negated):
            yield from _slots((o.operand,), ctx, ins)
        elif isinstance(o, ast.Vector):
            yield from _slots(o.elements, ctx, ins)
        elif isinstance(o, ast.Address) and isinstance(o.base, ast.Register):
            yield from _slots((o.base,), ctx, ins)
        elif isinstance(o, ast.TensorAddress):
            yield from _slots((o.tensor_map, *o.coords), ctx, ins)


from fa4_mlir.emu.ops import alu, control, memory, sync, bulk, wgmma, matrix, tcgen05  # noqa: E402,F401  (registration)
