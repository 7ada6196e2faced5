"""SSA values with Python operators, for index arithmetic in kernels.

``Value`` wraps an ``ir.Value`` of an integer type (i32 in our kernels: tile indices, byte offsets,
coordinates). Python ints mix in as constants of the same type. Division and remainder are
*unsigned* (``arith.divui``/``remui``), as every index in our kernels is non-negative; ``min`` and
``max`` are ``arith.minui`` and ``arith.maxui``. Comparisons return i1 ``Value``s usable as ``if_``
conditions. Every op carries the author's location (``location.here``).
"""

from __future__ import annotations

from fa4_mlir._mlir import arith, ir, llvm, nvvm
from fa4_mlir.dsl.location import here


def i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def raw(x) -> ir.Value:
    """The ``ir.Value`` behind ``x`` (a ``Value``, an ``ir.Value``, or a Python int as an i32 constant)."""
    if isinstance(x, Value):
        return x.value
    if isinstance(x, bool):
        raise TypeError(f"an index must be an int or a Value, got the bool {x!r}")
    if isinstance(x, int):
        return arith.constant(i32(), x, loc=here())
    if isinstance(x, ir.Value):
        return x
    raise TypeError(f"an index must be an int, a Value or an ir.Value, got {type(x).__name__}")


class Value:
    """An integer SSA value with ``+ - * // %``, ``min``, ``max``, ``==``/``!=``/``<`` and ``<`` (unsigned)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = raw(value)

    def _with(self, other, op) -> Value:
        other = raw(other)
        if other.type != self.value.type:
            other = _retype(other, self.value.type)
        return Value(op(self.value, other, loc=here()))

    def __add__(self, other): return self._with(other, arith.addi)
    def __radd__(self, other): return Value(other)._with(self, arith.addi)
    def __sub__(self, other): return self._with(other, arith.subi)
    def __rsub__(self, other): return Value(other)._with(self, arith.subi)
    def __mul__(self, other): return self._with(other, arith.muli)
    def __rmul__(self, other): return Value(other)._with(self, arith.muli)
    def __floordiv__(self, other): return self._with(other, arith.divui)
    def __mod__(self, other): return self._with(other, arith.remui)

    def min(self, other) -> Value:
        return self._with(other, arith.minui)

    def max(self, other) -> Value:
        return self._with(other, arith.maxui)

    def _cmp(self, other, predicate) -> Value:
        return self._with(other, lambda a, b, loc: arith.cmpi(predicate, a, b, loc=loc))

    def __eq__(self, other): return self._cmp(other, arith.CmpIPredicate.eq)   # noqa: D105 - an i1 Value
    def __ne__(self, other): return self._cmp(other, arith.CmpIPredicate.ne)
    def __lt__(self, other): return self._cmp(other, arith.CmpIPredicate.ult)
    def __le__(self, other): return self._cmp(other, arith.CmpIPredicate.ule)
    def __gt__(self, other): return self._cmp(other, arith.CmpIPredicate.ugt)
    def __ge__(self, other): return self._cmp(other, arith.CmpIPredicate.uge)
    __hash__ = object.__hash__

    def named(self, name: str) -> Value:
        """Name the value in the printed IR (``%name``, via a NameLoc around the author's location):
        what ``fa4-compile --emit fa4`` shows and what text-level tools can find."""
        if not name.isidentifier():
            raise ValueError(f"a value name must be an identifier, got {name!r}")
        op = getattr(self.value.owner, "operation", self.value.owner)
        if not isinstance(op, ir.Operation):
            raise ValueError(f"only a value an op defines can be named, got a block argument ('{name}')")
        op.location = ir.Location.name(name, childLoc=op.location)
        return self

    def __bool__(self):
        raise TypeError("a Value is known only when the kernel runs: branch with kernel.if_(...), not Python's if")

    def __repr__(self) -> str:
        return f"Value({self.value.get_name()}: {self.value.type})"


def _retype(value: ir.Value, want: ir.Type) -> ir.Value:
    """An int constant made for another type: rebuilt with ``want`` (only constants are retyped)."""
    op = getattr(value.owner, "operation", value.owner)  # an OpView or the Operation itself
    if isinstance(op, ir.Operation) and op.name == "arith.constant":
        constant = ir.IntegerAttr(op.attributes["value"]).value
        op.erase()
        return arith.constant(want, constant, loc=here())
    raise TypeError(f"operands must have one type, got {value.type} and {want}")


def tid_x() -> Value:
    """%tid.x, the thread's index in the CTA."""
    return Value(nvvm.read_ptx_sreg_tid_x(i32(), loc=here()))


def ctaid(axis: str = "x") -> Value:
    """%ctaid.x/y/z, the CTA's index in the grid."""
    reader = {"x": nvvm.read_ptx_sreg_ctaid_x, "y": nvvm.read_ptx_sreg_ctaid_y, "z": nvvm.read_ptx_sreg_ctaid_z}
    if axis not in reader:
        raise ValueError(f"axis must be 'x', 'y' or 'z', got {axis!r}")
    return Value(reader[axis](i32(), loc=here()))


_DYNAMIC = -(1 << 31)  # llvm.getelementptr's marker for an index given as a value


def element_ptr(pointer: ir.Value, index, element: ir.Type) -> ir.Value:
    """``&pointer[index]`` for elements of type ``element`` (``llvm.getelementptr``, same address space)."""
    return llvm.getelementptr(pointer.type, pointer, [raw(index)], [_DYNAMIC], element, 0, loc=here())


def byte_offset(pointer: ir.Value, offset) -> ir.Value:
    """``pointer`` advanced by ``offset`` bytes (an ``llvm.getelementptr`` over i8; same address space)."""
    return element_ptr(pointer, offset, ir.IntegerType.get_signless(8))
