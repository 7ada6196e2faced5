"""The polynomial exp2 both attention kernels can use instead of part of their ``ex2.approx`` (spec 4.4):
the MUFU pipe computes 16 exponentials a clock per SM, the FMA pipe is idle meanwhile, so moving some
of every 32 exponentials to a degree-3 polynomial of FMAs (``AttentionConfig.exp2_emulation``) shortens
the softmax where the exponentials bound it. Used by the sm_100a softmax warpgroups (``softmax.py``)
and the sm_90a fp8 consumer warpgroups (``hopper_consumer.py``), which can also take a degree-2 polynomial
two exponentials at a time in packed f16 (``exp2_poly_f16x2``, ``AttentionConfig.exp2_f16x2``: their P is
rounded to e4m3, 4 significant bits). Builders import MLIR when called."""

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


# 2^f on [-1/2, 1/2], degree 2 with 1 fixed (relative error 2.0e-3 before f16 rounding): the packed form's
# coefficients as f16 bits, highest first; P's e4m3 has 4 significant bits, so this is precision to spare
EXP2_POLY_F16 = (0x33AD, 0x39A0, 0x3C00)  # 0.2399, 0.703, 1.0
EXP2_F16_MIN = 0xCB00  # -14 (f16): 2^-14 rounds to e4m3's 0, and r + 15 >= 1 keeps the exponent field valid
EXP2_F16_MAGIC = 0x6600  # 1536 = 1.5 * 2^10 (f16): h + it rounded to nearest has ulp 1, round(h) in its low bits


def exp2_poly_f16x2(lo, hi):
    """2^lo and 2^hi of two f32 values as one packed f16x2 word (``lo`` in the low half), by a degree-2
    polynomial in packed f16 arithmetic (``AttentionConfig.exp2_f16x2``: the sm_90a fp8 consumer, whose P
    is rounded to e4m3 right after): 10 instructions for two exponentials, none on the MUFU pipe. Each half:
    h = max(f16(x), -14); t = h + 1536 (round to nearest, so t - 1536 = round(h) = r exactly); f = h - r in
    [-1/2, 1/2]; 2^f by the polynomial; r added to its exponent bits as a 16-bit integer: t << 10 keeps
    r's two's complement in bits 10..15 of each half (1536's mantissa bits, 0x200, shift out), masked per
    half, and ``add.s16x2`` adds the halves without a carry between them. Against 2^x rounded to e4m3, 1.3%
    of P's values round to the neighbouring e4m3 value (x's f16 rounding, up to 2^-8 at |x| >= 8: 0.27% of
    2^x, and the polynomial's 0.2%), raising P's rms rounding error from 2.647% to 2.651% of its value."""
    from fa4_mlir import dsl

    c2, c1, c0 = (f"0x{c:04X}{c:04X}" for c in EXP2_POLY_F16)
    low, magic = f"0x{EXP2_F16_MIN:04X}{EXP2_F16_MIN:04X}", f"0x{EXP2_F16_MAGIC:04X}{EXP2_F16_MAGIC:04X}"
    return dsl.llvm.inline_asm(
        dsl.i32(), [lo, hi],
        "{\n.reg .b32 h, t, r, f, p, e, c;\n"
        "cvt.rn.f16x2.f32 h, $2, $1;\n"  # cvt d, a, b puts a in the upper half
        f"mov.b32 c, {low};\nmax.f16x2 h, h, c;\n"
        f"mov.b32 c, {magic};\nadd.rn.f16x2 t, h, c;\nsub.rn.f16x2 r, t, c;\nsub.rn.f16x2 f, h, r;\n"
        f"mov.b32 c, {c2};\nmov.b32 e, {c1};\nfma.rn.f16x2 p, f, c, e;\n"
        f"mov.b32 c, {c0};\nfma.rn.f16x2 p, p, f, c;\n"
        "shl.b32 e, t, 10;\nand.b32 e, e, 0xFC00FC00;\nadd.s16x2 $0, p, e;\n}",
        "=r,f,f")


def _horner(r):
    """EXP2_POLY at ``r`` (three FMAs)."""
    from fa4_mlir.dsl import math as s

    f32 = s.f32()
    p1 = s.fma(s.const(f32, EXP2_POLY[0]), r, s.const(f32, EXP2_POLY[1]))
    p2 = s.fma(p1, r, s.const(f32, EXP2_POLY[2]))
    return s.fma(p2, r, s.const(f32, EXP2_POLY[3]))
