"""The polynomial exp2 both attention kernels can use instead of part of their ``ex2.approx`` (spec 4.4):
the MUFU pipe computes 16 exponentials a clock per SM, the FMA pipe is idle meanwhile, so moving some
of every 32 exponentials to a degree-3 polynomial of FMAs (``AttentionConfig.exp2_emulation``) shortens
the softmax where the exponentials bound it. Used by the sm_100a softmax warpgroups (``softmax.py``)
and the sm_90a fp8 consumer warpgroups (``hopper_consumer.py``). Builders import MLIR when called."""

from __future__ import annotations

# 2^f on [0, 1), degree 3 (Horner, highest first): the reference's exp2 emulation
EXP2_POLY = (0.077119089663028717041015625, 0.227564394474029541015625, 0.695146143436431884765625, 1.0)
ROUND_DOWN_MAGIC = 12582912.0  # 1.5 * 2^23: c + it (rounded down) has ulp 1 for |c| < 2^22


def emulated(width: int, count: int) -> set[int]:
    """Columns of a ``width``-column batch whose exp2 uses the polynomial: ``count`` per 32,
    spread evenly."""
    n = count * width // 32
    return {int((k + 0.5) * width / n) for k in range(n)} if n else set()


def exp2_poly(x):
    """2^x of an f32 ``x`` by polynomial: clamp to -127 (so -inf gives 0), split into integer and fraction
    (``floor``: ``cvt.rmi``, and ``cvt.rzi`` to an integer), the polynomial of the fraction, the integer
    added to its exponent bits. The sm_100a softmax's form."""
    from fa4_mlir import dsl
    from fa4_mlir.dsl import math as s

    a, f32, i32 = dsl.arith, s.f32(), dsl.i32()
    c = a.maxnumf(x, s.const(f32, -127.0))
    f = s.intrinsic("llvm.nvvm.floor.f", f32, c)
    r = a.subf(c, f)
    p3 = _horner(r)
    i = a.fptosi(i32, f)
    sh = a.shli(i, dsl.Value(23).value)
    bits = a.bitcast(i32, p3)
    return a.bitcast(f32, a.addi(bits, sh))


def exp2_poly_fma(x):
    """2^x as ``exp2_poly``, with the split on the FMA pipe (the reference's ``ex2_emulation``): on sm_90a
    ``cvt.rmi`` and ``cvt.rzi`` issue to the same conversion pipe as ``ex2`` (measured: the ``exp2_poly``
    form only slowed the fp8 kernel, docs/PERF.md), so floor(c) comes from ``c + 1.5 * 2^23`` rounded
    down, whose low mantissa bits are floor(c) (two's complement, |c| <= 127) and whose value minus
    1.5 * 2^23 is floor(c) exactly; shifting those bits left by 23 leaves floor(c) << 23."""
    from fa4_mlir import dsl
    from fa4_mlir.dsl import math as s

    a, f32, i32 = dsl.arith, s.f32(), dsl.i32()
    c = a.maxnumf(x, s.const(f32, -127.0))
    big = s.intrinsic("llvm.nvvm.add.rm.ftz.f", f32, c, s.const(f32, ROUND_DOWN_MAGIC))
    r = a.subf(c, a.subf(big, s.const(f32, ROUND_DOWN_MAGIC)))
    p3 = _horner(r)
    sh = a.shli(a.bitcast(i32, big), dsl.Value(23).value)
    return a.bitcast(f32, a.addi(a.bitcast(i32, p3), sh))


def _horner(r):
    """EXP2_POLY at ``r`` (three FMAs)."""
    from fa4_mlir.dsl import math as s

    f32 = s.f32()
    p1 = s.fma(s.const(f32, EXP2_POLY[0]), r, s.const(f32, EXP2_POLY[1]))
    p2 = s.fma(p1, r, s.const(f32, EXP2_POLY[2]))
    return s.fma(p2, r, s.const(f32, EXP2_POLY[3]))
