"""Float arithmetic for kernels: constants (of any type: ``const``), the fast base-2 exponential and
logarithm, fused multiply-add, intrinsic calls.

The attention softmax works in base 2: ``exp(x) = exp2(x * log2(e))`` with the scale folded into one
FMA, and the log-sum-exp converts back with ``LN2``. ``exp2`` and ``log2`` are the PTX
``ex2.approx.ftz.f32`` / ``lg2.approx.ftz.f32`` instructions (NVVM intrinsics through
``llvm.call_intrinsic``): about 2 ulp, subnormals flushed to zero, ``exp2(-inf) = +0``, which is what
masked keys rely on. Every op carries the author's location (``location.here``).
"""

from __future__ import annotations

import array

from fa4_mlir._mlir import arith, ir, llvm
from fa4_mlir.dsl.location import here
from fa4_mlir.dsl.values import raw

LN2 = 0.6931471805599453  # ln(2): a log-sum-exp in base 2 times LN2 is the natural one
NEG_INF = float("-inf")  # what masked scores become (prints as 0xFF800000)
EX2 = "llvm.nvvm.ex2.approx.ftz.f"  # the intrinsics exp2 / log2 call
LG2 = "llvm.nvvm.lg2.approx.ftz.f"


def f32() -> ir.Type:
    return ir.F32Type.get()


def constant(value: float, type_: ir.Type | None = None) -> ir.Value:
    """An ``arith.constant`` of ``value`` (f32 unless ``type_``; ``NEG_INF`` for -inf)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a float constant must be an int or a float, got {type(value).__name__}")
    return arith.constant(type_ or f32(), float(value), loc=here())


def _intrinsic(what: str, intrinsic: str, x: ir.Value) -> ir.Value:
    if not isinstance(x, ir.Value) or x.type != f32():
        raise TypeError(f"{what}'s operand must be an f32 value, got {getattr(x, 'type', type(x).__name__)}")
    return llvm.call_intrinsic(x.type, intrinsic, [x], [], [], loc=here())


def exp2(x: ir.Value) -> ir.Value:
    """``2 ** x`` (``ex2.approx.ftz.f32``)."""
    return _intrinsic("exp2", EX2, x)


def log2(x: ir.Value) -> ir.Value:
    """``log2(x)`` (``lg2.approx.ftz.f32``)."""
    return _intrinsic("log2", LG2, x)


def i1() -> ir.Type:
    return ir.IntegerType.get_signless(1)


def const(type_: ir.Type, value) -> ir.Value:
    """``arith.constant`` of ``type_``: a Python int, float or bool for a scalar; for a vector type, a
    scalar (splat) or a sequence of its elements (``dense<[...]>``)."""
    if isinstance(type_, ir.VectorType):
        vector = type_
        element = vector.element_type
        if isinstance(value, (list, tuple, range)):
            if len(value) != vector.shape[0] or len(vector.shape) != 1:
                raise ValueError(f"a dense constant must have one value per element of {type_}, got {len(value)}")
            if isinstance(element, ir.IntegerType):
                value = array.array("i" if element.width == 32 else "q", value)
            else:
                value = array.array("f" if isinstance(element, ir.F32Type) else "d", value)
        else:
            scalar = (ir.FloatAttr.get(element, float(value)) if isinstance(element, ir.FloatType)
                      else ir.IntegerAttr.get(element, int(value)))
            value = ir.DenseElementsAttr.get_splat(vector, scalar)
    elif isinstance(type_, ir.FloatType):
        value = float(value)
    else:
        value = int(value)
    return arith.constant(type_, value, loc=here())


def intrinsic(name: str, result: ir.Type, *args) -> ir.Value:
    """``llvm.call_intrinsic "name"(args) -> result`` (e.g. ``llvm.nvvm.ex2.approx.ftz.f``)."""
    return llvm.call_intrinsic(result, name, [raw(a) for a in args], [], [], loc=here())


def fma(a, b, c) -> ir.Value:
    """``a * b + c`` rounded once (``llvm.intr.fma``; scalars or vectors of one float type)."""
    return llvm.intr_fma(raw(a), raw(b), raw(c), loc=here())
