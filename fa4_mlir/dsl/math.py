"""f32 arithmetic for kernels: constants, the fast base-2 exponential and logarithm, fused multiply-add.

The attention softmax works in base 2: ``exp(x) = exp2(x * log2(e))`` with the scale folded into one
FMA, and the log-sum-exp converts back with ``LN2``. ``exp2`` and ``log2`` are the PTX
``ex2.approx.ftz.f32`` / ``lg2.approx.ftz.f32`` instructions (NVVM intrinsics through
``llvm.call_intrinsic``): about 2 ulp, subnormals flushed to zero, ``exp2(-inf) = +0``, which is what
masked keys rely on. Every op carries the author's location (``location.here``).
"""

from __future__ import annotations

from fa4_mlir._mlir import arith, ir, llvm
from fa4_mlir.dsl.location import here

LN2 = 0.6931471805599453  # ln(2): a log-sum-exp in base 2 times LN2 is the natural one
NEG_INF = float("-inf")  # what masked scores become (prints as 0xFF800000)
EX2 = "llvm.nvvm.ex2.approx.ftz.f"
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


def fma(a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    """``a * b + c`` rounded once (``llvm.intr.fma``)."""
    return llvm.intr_fma(a, b, c, loc=here())
