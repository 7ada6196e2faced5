"""The syntax tree of a PTX module, as the parser (``fa4_mlir.emu.ptx.parser``) produces it.

Plain frozen dataclasses; no semantics here. Every statement keeps its ``Loc`` so run-time errors
can name the PTX line. Opcodes are kept as their dotted components: ``mbarrier.try_wait.parity.
shared::cta.b64`` is ``Instruction(opcode="mbarrier", modifiers=("try_wait", "parity", "shared::cta",
"b64"))`` (modifiers without their leading dot, in source order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


@dataclass(frozen=True)
class Loc:
    line: int
    column: int


# ---- operands ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Register:
    """``%r12``, ``%p3``, ``%tid.x`` (special registers keep their dotted name), ``p`` (scoped names
    declared without ``%`` are registers too), ``_`` (the sink)."""
    name: str


@dataclass(frozen=True)
class Immediate:
    """An integer (``kind="int"``, Python int, may be negative) or a float literal. ``0fXXXXXXXX`` gives
    ``kind="f32"`` with ``value`` the 32-bit pattern as an int; ``0dXXXXXXXXXXXXXXXX`` gives ``kind="f64"``
    with the 64-bit pattern; a decimal float like ``1.5`` gives ``kind="float"`` with a Python float."""
    value: int | float
    kind: str = "int"


@dataclass(frozen=True)
class Symbol:
    """A label, variable, parameter or function name used as an operand."""
    name: str


@dataclass(frozen=True)
class Vector:
    """A brace list ``{%r1, %r2, ...}`` (elements are Register/Immediate/Symbol)."""
    elements: tuple


@dataclass(frozen=True)
class Address:
    """``[base]``, ``[base+off]``, ``[base+-4]``, ``[imm]``: base is a Register, a Symbol or None."""
    base: Union[Register, Symbol, None]
    offset: int = 0


@dataclass(frozen=True)
class TensorAddress:
    """``[tmap, {c0, c1, ...}]`` as cp.async.bulk.tensor writes it: the tensor-map operand and the
    coordinates (innermost first)."""
    tensor_map: Union[Register, Symbol]
    coords: tuple


@dataclass(frozen=True)
class Negated:
    """``!%p`` used as a source operand (e.g. of selp or a predicate input)."""
    operand: Register


Operand = Union[Register, Immediate, Symbol, Vector, Address, TensorAddress, Negated]


# ---- statements ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Instruction:
    opcode: str                      # "mbarrier"
    modifiers: tuple[str, ...]       # ("try_wait", "parity", "shared::cta", "b64")
    operands: tuple                  # Operand, in source order
    loc: Loc
    guard: str | None = None         # "%p1" for "@%p1 op", None when unguarded
    guard_negated: bool = False      # True for "@!%p1 op"
    text: str = ""                   # the instruction as written (for messages)

    @property
    def full_opcode(self) -> str:
        return ".".join((self.opcode, *self.modifiers))


@dataclass(frozen=True)
class RegisterDecl:
    """``.reg .b32 %r<100>;`` gives names %r0..%r99 (``count=100``); ``.reg .pred p, q;`` gives explicit
    ``names``. ``vector`` is 2 or 4 for ``.reg .v2 .b32`` (rare), else 1."""
    type: str                        # "b32", "pred", "f32", ... (no dot)
    names: tuple[str, ...] = ()
    prefix: str | None = None
    count: int = 0
    vector: int = 1
    loc: Loc = Loc(0, 0)

    def expanded(self) -> tuple[str, ...]:
        if self.prefix is not None:
            return tuple(f"{self.prefix}{i}" for i in range(self.count))
        return self.names


@dataclass(frozen=True)
class Label:
    name: str
    loc: Loc


@dataclass(frozen=True)
class Block:
    """A ``{ ... }`` scope inside a function body (inline asm): registers declared inside are local to it."""
    body: tuple
    loc: Loc


@dataclass(frozen=True)
class Variable:
    """A module- or function-level variable: ``.extern .shared .align 1024 .b8 smem[];``,
    ``.global .align 4 .b32 counter;``, ``.shared .align 8 .b8 bars[64];``, ``.const .b32 t[2] = {1, 2};``
    ``dims`` is () for a scalar, (None,) for ``[]``; ``init`` the flat initializer values or None."""
    space: str                       # "shared", "global", "const", "local"
    type: str                        # "b8", "b32", "f32", ...
    name: str
    align: int | None = None
    dims: tuple = ()
    extern: bool = False
    visible: bool = False
    vector: int = 1
    init: tuple | None = None
    loc: Loc = Loc(0, 0)


@dataclass(frozen=True)
class Param:
    """An entry/function parameter. ``.param .align 64 .b8 p[128]`` has type "b8", align 64, dims (128,).
    ``ptr_space``/``ptr_align`` carry ``.ptr .global .align 16`` attributes when present."""
    name: str
    type: str
    align: int | None = None
    dims: tuple = ()
    ptr_space: str | None = None
    ptr_align: int | None = None
    loc: Loc = Loc(0, 0)


@dataclass(frozen=True)
class Function:
    name: str
    is_entry: bool                   # .entry (kernel) or .func
    params: tuple[Param, ...]
    returns: tuple[Param, ...] = ()  # .func (.param .b32 r) f(...)
    body: tuple | None = None        # statements (RegisterDecl, Variable, Label, Instruction, Block); None for a declaration
    directives: dict = field(default_factory=dict)  # {"reqntid": (384,1,1), "maxnreg": (168,), "explicitcluster": (), ...}
    visible: bool = False
    extern: bool = False
    loc: Loc = Loc(0, 0)


@dataclass(frozen=True)
class Module:
    version: tuple[int, int]
    target: tuple[str, ...]          # ("sm_90a",) or ("sm_90a", "texmode_independent")
    address_size: int
    variables: tuple[Variable, ...]
    functions: tuple[Function, ...]

    def function(self, name: str) -> Function | None:
        for f in self.functions:
            if f.name == name and f.body is not None:
                return f
        return None
