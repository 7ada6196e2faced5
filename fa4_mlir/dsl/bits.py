"""Bit operations on integer ``Value``s (shifts, and, xor): swizzled addresses, lane fields.

``Value`` has the arithmetic operators (``+ - * // %``); address swizzles and fragment layouts also
need shifts and masks. These take ``Value``s, ``ir.Value``s or Python ints (constants of the other
operand's type, i32 where both are ints), return a ``Value``, and carry the author's location::

    sw = dsl.andi(dsl.shrui(rowb, 7), 7)      # the 128B swizzle phase of a row
    off = dsl.shli(dsl.xori(sw, chunk), 4)     # chunk ``chunk`` of the row, swizzled
"""

from __future__ import annotations

from fa4_mlir._mlir import arith
from fa4_mlir.dsl.values import Value


def _binary(op, a, b) -> Value:
    if not isinstance(a, Value):
        a = Value(a)
    return a._with(b, op)


def shrui(a, b) -> Value:
    """``a >> b``, logical (``arith.shrui``)."""
    return _binary(arith.shrui, a, b)


def shli(a, b) -> Value:
    """``a << b`` (``arith.shli``)."""
    return _binary(arith.shli, a, b)


def andi(a, b) -> Value:
    """``a & b`` (``arith.andi``)."""
    return _binary(arith.andi, a, b)


def xori(a, b) -> Value:
    """``a ^ b`` (``arith.xori``)."""
    return _binary(arith.xori, a, b)


__all__ = ["andi", "shli", "shrui", "xori"]
