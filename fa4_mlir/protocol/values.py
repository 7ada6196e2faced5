"""Values of the protocol interpreter and the integer arithmetic on them.

A value is an ``int`` (the same in every thread), a numpy array (one int per thread of the
process), a ``Sym`` (not known at compile time: a kernel argument or what depends on one, the same
in every thread unless ``varying``), or a reference (``SmemRef``, ``TmemRef``, ``Bars``, ``Pipe``,
``Ptr``). Integers wrap to their type's width like the hardware's.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Sym:
    term: tuple
    varying: bool = False


@dataclasses.dataclass(frozen=True)
class SmemRef:
    root: int
    lo: int
    hi: int
    what: str


@dataclasses.dataclass(frozen=True)
class TmemRef:
    root: int
    lo: int
    hi: int
    what: str


@dataclasses.dataclass(frozen=True)
class Ptr:
    ref: SmemRef


@dataclasses.dataclass(frozen=True)
class Bars:
    array: int


@dataclasses.dataclass(frozen=True)
class Pipe:
    full: Bars
    empty: Bars
    stages: int
    producer_sub_stages: int
    consumer_sub_stages: int


def opaque(*inputs) -> Sym:
    """An unknown value computed from ``inputs``: varying per thread if any input is."""
    varying = any(isinstance(v, np.ndarray) or (isinstance(v, Sym) and v.varying) for v in inputs)
    return Sym(("opaque",), varying)


def uniform(v):
    """``v`` as one int when every thread holds the same integer."""
    if isinstance(v, np.ndarray) and v.size and (v == v.flat[0]).all():
        return int(v.flat[0])
    return v


def is_int(v) -> bool:
    return isinstance(v, (int, np.ndarray)) and not isinstance(v, bool)


def wrap(x, width: int | None):
    """Two's-complement wrap to ``width`` bits (signed representation; i1 as 0/1)."""
    if width is None or width >= 64:
        return x
    if width == 1:
        return x & 1
    half = 1 << (width - 1)
    return ((x + half) % (1 << width)) - half


def unsigned(x, width: int | None):
    if width is None or width >= 64:
        return x
    return x % (1 << width)


_PRED = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge", 6: "ult", 7: "ule", 8: "ugt", 9: "uge"}


def compare(pred: int, a, b, width):
    p = _PRED[pred]
    if p[0] == "u":
        a, b = unsigned(a, width), unsigned(b, width)
    fn = {"eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal, "sgt": np.greater,
          "sge": np.greater_equal, "ult": np.less, "ule": np.less_equal, "ugt": np.greater,
          "uge": np.greater_equal}[p]
    return _int(fn(a, b))


def _int(x):
    if isinstance(x, np.ndarray):
        return x.astype(np.int64)
    return int(x)


_BINARY = {  # op -> f(a, b, a unsigned, b unsigned)
    "addi": lambda a, b, ua, ub: a + b, "subi": lambda a, b, ua, ub: a - b, "muli": lambda a, b, ua, ub: a * b,
    "divui": lambda a, b, ua, ub: ua // ub, "divsi": lambda a, b, ua, ub: a // b,
    "floordivsi": lambda a, b, ua, ub: a // b, "ceildivui": lambda a, b, ua, ub: -(-ua // ub),
    "ceildivsi": lambda a, b, ua, ub: -(-a // b), "remui": lambda a, b, ua, ub: ua % ub,
    "remsi": lambda a, b, ua, ub: a % b, "andi": lambda a, b, ua, ub: a & b, "ori": lambda a, b, ua, ub: a | b,
    "xori": lambda a, b, ua, ub: a ^ b, "shli": lambda a, b, ua, ub: a << b, "shrui": lambda a, b, ua, ub: ua >> b,
    "shrsi": lambda a, b, ua, ub: a >> b, "minui": lambda a, b, ua, ub: np.minimum(ua, ub),
    "maxui": lambda a, b, ua, ub: np.maximum(ua, ub), "minsi": lambda a, b, ua, ub: np.minimum(a, b),
    "maxsi": lambda a, b, ua, ub: np.maximum(a, b),
}
_DIVISIONS = ("divui", "divsi", "remui", "remsi", "ceildivui", "ceildivsi", "floordivsi")
_SHIFTS = ("shli", "shrui", "shrsi")


def binary(op: str, a, b, width):
    """``arith.<op>`` on known integers (division assumes the operands are non-negative)."""
    fn = _BINARY.get(op)
    if fn is None:
        return None
    if type(a) is int and type(b) is int:  # the common case, without numpy's per-call cost
        if (op in _DIVISIONS and b == 0) or (op in _SHIFTS and not 0 <= b < (width or 64)):
            return None
        if op in ("minsi", "maxsi"):
            return wrap(min(a, b) if op == "minsi" else max(a, b), width)
        return wrap(int(fn(a, b, unsigned(a, width), unsigned(b, width))), width)
    if op in _DIVISIONS and np.any(np.asarray(b) == 0):
        return None
    if op in ("shli", "shrui", "shrsi") and np.any((np.asarray(b) < 0) | (np.asarray(b) >= (width or 64))):
        return None  # a shift by the width or more is poison in LLVM
    if isinstance(a, int) and isinstance(b, int) and op in ("minsi", "maxsi"):
        return wrap(min(a, b) if op == "minsi" else max(a, b), width)
    return wrap(_int(fn(a, b, unsigned(a, width), unsigned(b, width))), width)


def simplify(op: str, a, b):
    """Identities that keep a result known when one operand is not (x * 0, x + 0, x * 1)."""
    if op == "muli" and not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray) and (a == 0 or b == 0):
        return 0  # (the per-thread operands first: an array's == 0 has no truth value)
    if op in ("addi", "ori", "xori") and isinstance(b, int) and b == 0:
        return a
    if op in ("addi", "ori", "xori") and isinstance(a, int) and a == 0:
        return b
    if op == "muli" and isinstance(b, int) and b == 1:
        return a
    if op == "muli" and isinstance(a, int) and a == 1:
        return b
    return None
