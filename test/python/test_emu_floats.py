"""Floating-point instruction semantics of the PTX emulator (fa4_mlir.emu.isa.floats), from the PTX ISA.

Each test cites the ISA section it checks (PTX ISA 9.1: 9.7.3 "Floating-Point Instructions", 9.7.4 "Half
Precision Floating-Point Instructions", 9.7.6.2 / 9.7.7.2 "setp"). Exact results are checked against an
independent reference: the exact rational value (``fractions.Fraction``) rounded by ``ref_round`` below,
which shares no code with the emulator. Where the ISA leaves a bit pattern open ("unspecified NaN") the
tests pin the emulator's documented choice, which is what an H100 produces.

The emulator was also compared bit for bit with an H100 (sm_90a): 232 instruction forms of this module,
millions of edge and random inputs, every exactly specified result equal (see the floats module
docstring); these tests do not need the hardware.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest

from fa4_mlir.emu.errors import Unsupported
from fa4_mlir.emu.isa import floats as FP
from fa4_mlir.emu.isa import fpformats as FF

# -- an independent reference ----------------------------------------------------------------------
FMT = {"f64": (11, 52), "f32": (8, 23), "f16": (5, 10), "bf16": (8, 7)}
WIDTH = {"f64": 64, "f32": 32, "f16": 16, "bf16": 16}
NAN = float("nan")
INF = float("inf")


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def exact(bits: int, t: str):
    """The value of ``bits`` in format ``t``: a Fraction, +-inf or nan."""
    e, m = FMT[t]
    w = WIDTH[t]
    sign = -1 if (bits >> (w - 1)) & 1 else 1
    ex = (bits >> m) & ((1 << e) - 1)
    man = bits & ((1 << m) - 1)
    bias = (1 << (e - 1)) - 1
    if ex == (1 << e) - 1:
        return sign * INF if man == 0 else NAN
    if ex == 0:
        return sign * Fraction(man) * Fraction(2) ** (1 - bias - m)
    return sign * Fraction(man + (1 << m)) * Fraction(2) ** (ex - bias - m)


def ref_round(q: Fraction, t: str, mode: str, negative_zero: bool = False) -> int:
    """IEEE 754 rounding of the exact rational q to format t (rn = ties to even)."""
    e, m = FMT[t]
    w = WIDTH[t]
    bias = (1 << (e - 1)) - 1
    emin, emax = 1 - bias, bias
    sign = 1 if (q < 0 or (q == 0 and negative_zero)) else 0
    a = abs(q)
    if a == 0:
        return sign << (w - 1)
    quantum = Fraction(2) ** (max(_floor_log2(a), emin) - m)
    n = int(a // quantum)
    rem = a - n * quantum
    half = quantum / 2
    up = {"rn": rem > half or (rem == half and n % 2 == 1), "rz": False,
          "rp": rem > 0 and not sign, "rm": rem > 0 and bool(sign)}[mode]
    value = (n + up) * quantum
    max_finite = (2 - Fraction(2) ** -m) * Fraction(2) ** emax
    if value > max_finite:
        to_inf = mode == "rn" or (mode == "rp" and not sign) or (mode == "rm" and sign)
        mag = ((1 << e) - 1) << m if to_inf else (((1 << e) - 2) << m) | ((1 << m) - 1)
    elif value < Fraction(2) ** emin:
        mag = int(value / Fraction(2) ** (emin - m))
    else:
        e2 = _floor_log2(value)
        mag = ((e2 + bias) << m) | (int(value / Fraction(2) ** (e2 - m)) - (1 << m))
    return (sign << (w - 1)) | mag


def f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _f(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f64(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f16(x: float) -> int:
    return int(np.array([x], np.float16).view(np.uint16)[0])


def bf16(x: float) -> int:
    return f32(x) >> 16            # exact for values representable in bf16


DT = {"f32": np.uint32, "f64": np.uint64, "f16": np.uint16, "bf16": np.uint16, "f16x2": np.uint32,
      "bf16x2": np.uint32, "f32x2": np.uint64}


def run(op, t, *vals, mods=()):
    """Run one instruction on lists of raw bits; returns a list of ints."""
    ops = [np.array(v if isinstance(v, (list, tuple)) else [v], DT[t]) for v in vals]
    return [int(x) for x in FP.arith(op, t, ops, frozenset(mods))]


def one(op, t, *vals, mods=()):
    return run(op, t, *vals, mods=mods)[0]


def is_nan32(b):
    return (b & 0x7FFFFFFF) > 0x7F800000


MIN_SUB, MIN_NORMAL, MAX32 = 0x00000001, 0x00800000, 0x7F7FFFFF
PINF, NINF, QNAN, NZERO = 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000


def random_f32(rng, n, lo=-30, hi=30):
    """f32 bit patterns with varied exponents, signs, and some subnormals."""
    m = rng.integers(0, 1 << 23, n)
    e = rng.integers(127 + lo, 127 + hi, n)
    e[: n // 10] = 0                                              # subnormals
    s = rng.integers(0, 2, n)
    return [(int(a) << 31) | (int(b) << 23) | int(c) for a, b, c in zip(s, e, m)]


# -- add / sub / mul / fma: IEEE rounding in every mode (9.7.3.3-9.7.3.7) --------------------------
EXACT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "fma": lambda a, b, c: a * b + c}


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma"])
def test_f32_basic_ops_round_exactly(op, mode):
    rng = np.random.default_rng(hash((op, mode)) % 2**32)
    n = 150
    args = [random_f32(rng, n, -20, 20) for _ in range(3 if op == "fma" else 2)]
    if op in ("add", "sub"):                          # near and exact cancellations
        args[1][:30] = [x ^ (0 if op == "sub" else 0x80000000) ^ (i % 3) for i, x in enumerate(args[0][:30])]
    if op == "fma":                                   # c close to -a*b: massive cancellation
        args[2][:30] = [f32(-float(np.float32(_f(x) * _f(y)))) ^ (i % 3) for i, (x, y) in
                        enumerate(zip(args[0][:30], args[1][:30]))]
    got = run(op, "f32", *args, mods=[mode])
    for i in range(n):
        q = EXACT[op](*[exact(a[i], "f32") for a in args])
        if q == 0:
            continue                                      # zero signs are tested separately
        assert got[i] == ref_round(q, "f32", mode), (op, mode, [hex(a[i]) for a in args])


def test_default_rounding_is_rn():
    # 9.7.3.3: "The default value of rounding modifier is .rn"
    a, b = f32(1.0), f32(2.0 ** -24)                       # exactly half an ulp of 1.0: a tie
    assert one("add", "f32", a, b) == one("add", "f32", a, b, mods=["rn"]) == f32(1.0)
    assert one("add", "f32", f32(1.0 + 2.0 ** -23), b) == f32(1.0 + 2.0 ** -22)   # tie to even, upward
    assert one("add", "f32", a, b, mods=["rp"]) == f32(1.0 + 2.0 ** -23)
    assert one("add", "f32", a, b, mods=["rz"]) == f32(1.0)
    assert one("sub", "f32", f32(-1.0), b, mods=["rm"]) == f32(-(1.0 + 2.0 ** -23))


def test_fma_is_fused_where_float64_double_rounding_would_fail():
    # 9.7.3.6: "computes the product of a and b to infinite precision and then adds c ..., again in
    # infinite precision. The resulting value is then rounded to single precision".
    a = b = f32(1 + 2.0 ** -12)                # a*b = 1 + 2^-11 + 2^-24 exactly: a tie at f32 precision
    c = f32(2.0 ** -60)                        # breaks the tie upwards
    exact_q = exact(a, "f32") * exact(b, "f32") + exact(c, "f32")
    right = ref_round(exact_q, "f32", "rn")
    assert right == f32(1 + 2.0 ** -11 + 2.0 ** -23)
    naive = np.float32(np.float64(1 + 2.0 ** -12) ** 2 + 2.0 ** -60)     # float64 then float32
    assert int(np.array([naive]).view(np.uint32)[0]) != right              # double rounding loses
    assert one("fma", "f32", a, b, c, mods=["rn"]) == right
    assert one("mad", "f32", a, b, c, mods=["rn"]) == right               # 9.7.3.7: mad == fma
    assert one("fma", "f32", a, b, c | 0x80000000, mods=["rn"]) == f32(1 + 2.0 ** -11)


def test_signed_zero_results():
    # IEEE 754 6.3, which the rounding modifiers follow: exact zero sums are +0 except under rm
    one_, m_one = f32(1.0), f32(-1.0)
    assert one("add", "f32", one_, m_one) == 0
    assert one("add", "f32", one_, m_one, mods=["rm"]) == NZERO
    assert one("add", "f32", NZERO, NZERO) == NZERO
    assert one("add", "f32", 0, NZERO) == 0
    assert one("add", "f32", 0, NZERO, mods=["rm"]) == NZERO
    assert one("sub", "f32", one_, one_, mods=["rm"]) == NZERO
    assert one("mul", "f32", NZERO, f32(5.0)) == NZERO
    assert one("fma", "f32", one_, m_one, one_, mods=["rn"]) == 0
    assert one("fma", "f32", one_, m_one, one_, mods=["rm"]) == NZERO
    assert one("fma", "f32", NZERO, one_, NZERO, mods=["rn"]) == NZERO
    # underflow keeps the sign of the exact result
    assert one("mul", "f32", f32(-(2.0 ** -100)), f32(2.0 ** -100)) == NZERO


def test_infinities_and_nans():
    # Invalid operations give NaN; the ISA says "Single-precision instructions return an unspecified
    # NaN": the emulator returns the canonical 0x7FFFFFFF (what the hardware returns).
    for op, args in (("add", (PINF, NINF)), ("sub", (PINF, PINF)), ("mul", (PINF, 0)),
                     ("fma", (PINF, 0, f32(1.0))), ("fma", (PINF, f32(1.0), NINF)), ("add", (0x7FC00001, 0)),
                     ("mul", (0x7F800001, f32(2.0))), ("div", (0, 0)), ("div", (PINF, NINF))):
        mods = ["rn"]
        assert one(op, "f32", *args, mods=mods) == 0x7FFFFFFF
    assert one("add", "f32", PINF, MAX32) == PINF
    assert one("mul", "f32", MAX32, f32(2.0)) == PINF                 # overflow, rn
    assert one("mul", "f32", MAX32, f32(2.0), mods=["rz"]) == MAX32    # overflow, rz: largest finite
    assert one("mul", "f32", MAX32, f32(-2.0), mods=["rp"]) == MAX32 | 0x80000000
    assert one("mul", "f32", MAX32, f32(-2.0), mods=["rm"]) == NINF
    assert one("fma", "f32", MAX32, f32(2.0), NINF, mods=["rn"]) == NINF


def test_subnormals_with_and_without_ftz():
    # 9.7.3: subnormals are supported by default on sm_20+; .ftz flushes subnormal inputs and results
    # to sign-preserving zero.
    assert one("add", "f32", MIN_SUB, MIN_SUB) == 2
    assert one("mul", "f32", MIN_NORMAL, f32(0.5)) == 0x00400000
    assert one("mul", "f32", MIN_NORMAL, f32(0.5), mods=["ftz"]) == 0
    assert one("mul", "f32", MIN_NORMAL | 0x80000000, f32(0.5), mods=["ftz"]) == NZERO
    assert one("add", "f32", MIN_SUB, f32(1.0), mods=["ftz"]) == f32(1.0)
    assert one("add", "f32", 0x807FFFFF, NZERO, mods=["ftz"]) == NZERO        # -0 + -0
    assert one("add", "f32", 0x807FFFFF, 0, mods=["ftz"]) == 0                # -0 + +0 = +0 (rn)
    assert one("add", "f32", MIN_SUB, MIN_SUB, mods=["ftz"]) == 0
    assert one("fma", "f32", MIN_SUB, f32(2.0 ** 30), 0, mods=["rn", "ftz"]) == 0
    # tininess is decided after rounding to 24 bits with an unbounded exponent (hardware behaviour):
    # (1 - 2^-24) * 2^-126 is exactly representable there, so it is tiny and flushed ...
    assert one("mul", "f32", f32(1 - 2.0 ** -24), MIN_NORMAL) == MIN_NORMAL   # (rounds up without .ftz)
    assert one("mul", "f32", f32(1 - 2.0 ** -24), MIN_NORMAL, mods=["ftz"]) == 0
    # ... while -2^-126 + 2^-252 rounds to -2^-126 at 24 bits and is not flushed.
    assert one("fma", "f32", MIN_NORMAL, MIN_NORMAL, MIN_NORMAL | 0x80000000, mods=["rn", "ftz"]) == \
        MIN_NORMAL | 0x80000000


def test_sat():
    # 9.7.3.3 "add.sat.f32 clamps the result to [0.0, 1.0]. NaN results are flushed to +0.0f."
    assert one("add", "f32", f32(0.75), f32(0.75), mods=["sat"]) == f32(1.0)
    assert one("add", "f32", f32(-0.75), f32(0.25), mods=["sat"]) == 0
    assert one("add", "f32", PINF, NINF, mods=["sat"]) == 0
    assert one("mul", "f32", f32(-1.0), 0, mods=["sat"]) == 0                   # -0 -> +0
    assert one("fma", "f32", f32(0.5), f32(0.5), f32(0.25), mods=["rn", "sat"]) == f32(0.5)
    assert one("sub", "f32", f32(3.0), f32(1.0), mods=["rz", "ftz", "sat"]) == f32(1.0)


def test_f32x2_operates_on_both_halves():
    # 9.7.3.3: "fA[0] = a[0:31]; fA[1] = a[32:63] ... d[i] = fA[i] + fB[i]"
    a = (f32(3.0) << 32) | f32(1.5)
    b = (f32(-1.0) << 32) | f32(0.25)
    assert one("add", "f32x2", a, b, mods=["rn"]) == (f32(2.0) << 32) | f32(1.75)
    assert one("mul", "f32x2", a, b) == (f32(-3.0) << 32) | f32(0.375)
    c = (PINF << 32) | f32(1.0)
    assert one("fma", "f32x2", a, b, c, mods=["rn"]) == (PINF << 32) | f32(1.375)
    assert one("add", "f32x2", MIN_SUB, MIN_SUB << 32, mods=["ftz"]) == 0


# -- f64 ------------------------------------------------------------------------------------------
def random_f64(rng, n):
    return [(int(s) << 63) | (int(e) << 52) | int(m) for s, e, m in
            zip(rng.integers(0, 2, n), rng.integers(1023 - 40, 1023 + 40, n), rng.integers(0, 1 << 52, n))]


@pytest.mark.parametrize("op", ["add", "mul", "fma", "div"])
def test_f64_all_modes_exact(op):
    rng = np.random.default_rng(7)
    n = 40
    args = [random_f64(rng, n) for _ in range(3 if op == "fma" else 2)]
    for mode in ("rn", "rz", "rm", "rp"):
        got = run(op, "f64", *args, mods=[mode])
        for i in range(n):
            xs = [exact(a[i], "f64") for a in args]
            q = xs[0] / xs[1] if op == "div" else EXACT[op](*xs)
            assert got[i] == ref_round(q, "f64", mode), (op, mode)


def test_f64_fma_double_rounding_and_nan_payloads():
    a, b = f64(1 + 2.0 ** -27), f64(1 + 2.0 ** -26)  # a*b = 1 + 2^-26 + 2^-27 + 2^-53: a tie in f64
    c = f64(2.0 ** -200)                              # breaks it upwards
    assert one("fma", "f64", a, b, c, mods=["rn"]) == f64(1 + 2.0 ** -26 + 2.0 ** -27 + 2.0 ** -52)
    assert one("fma", "f64", a, b, 0, mods=["rn"]) == f64(1 + 2.0 ** -26 + 2.0 ** -27)       # tie: even
    assert one("fma", "f64", a, b, c | (1 << 63), mods=["rp"]) == \
        f64(1 + 2.0 ** -26 + 2.0 ** -27 + 2.0 ** -52)
    # 9.7.3: "NaN payloads are supported for double-precision instructions"
    nan1 = 0x7FF8000000000123
    assert one("add", "f64", nan1, f64(1.0), mods=["rn"]) == nan1
    assert one("mul", "f64", f64(2.0), 0x7FF0000000000005) == 0x7FF8000000000005     # quieted
    assert one("add", "f64", f64(INF), f64(-INF)) == 0xFFF8000000000000          # generated NaN
    assert one("neg", "f64", nan1) == nan1                                        # 9.7.3.9: unchanged
    assert one("abs", "f64", 0xFFF8000000000000) == 0xFFF8000000000000


# -- division, reciprocal, square root (9.7.3.8, 9.7.3.13, 9.7.3.15) ------------------------------
def _neighbours(bits):
    return bits - 1, bits + 1                 # positive finite values only


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_div_and_sqrt_ieee_in_every_mode(mode):
    rng = np.random.default_rng(3)
    n = 100
    a, b = random_f32(rng, n), random_f32(rng, n)
    got = run("div", "f32", a, b, mods=[mode])
    for i in range(n):
        if exact(b[i], "f32") == 0:
            continue
        assert got[i] == ref_round(exact(a[i], "f32") / exact(b[i], "f32"), "f32", mode)
    # sqrt: the result r must satisfy the directed bracketing of sqrt(x) (checked by squaring)
    xs = [x & 0x7FFFFFFF for x in a]
    roots = run("sqrt", "f32", xs, mods=[mode])
    for x, r in zip(xs, roots):
        q = exact(x, "f32")
        lo, hi = _neighbours(r)
        rv, lov, hiv = (exact(v, "f32") for v in (r, lo, hi))
        if mode in ("rz", "rm"):
            assert rv * rv <= q < hiv * hiv
        elif mode == "rp":
            assert lov * lov < q <= rv * rv or (r == 0 and q == 0)
        else:
            assert ((rv + lov) / 2) ** 2 <= q <= ((rv + hiv) / 2) ** 2 or (r == 0 and q == 0)


def test_div_special_values():
    assert one("div", "f32", f32(1.0), 0, mods=["rn"]) == PINF
    assert one("div", "f32", f32(-1.0), 0, mods=["rz"]) == NINF
    assert one("div", "f32", f32(1.0), PINF, mods=["rn"]) == 0
    assert one("div", "f32", f32(1.0), f32(3.0), mods=["rn"]) == 0x3EAAAAAB
    assert one("div", "f32", f32(1.0), f32(3.0), mods=["rz"]) == 0x3EAAAAAA
    assert one("div", "f32", MIN_SUB, f32(4.0), mods=["rp"]) == MIN_SUB
    assert one("div", "f32", MIN_SUB, f32(4.0), mods=["rn"]) == 0
    assert one("div", "f32", MIN_NORMAL, f32(2.0), mods=["rn", "ftz"]) == 0
    assert one("div", "f32", f32(1.0), MIN_SUB, mods=["rn", "ftz"]) == PINF   # flushed divisor


def test_approximate_division():
    # 9.7.3.8: div.approx computes a * (1/b), max 2 ulp for |b| in [2^-126, 2^126]; for
    # 2^126 < |b| < 2^128 it returns NaN when a is infinite, otherwise a sign-preserving zero.
    # div.full: max 2 ulp over the full range. The emulator models both as correctly rounded RN.
    rng = np.random.default_rng(11)
    a, b = random_f32(rng, 200, -60, 60), random_f32(rng, 200, -60, 60)
    b = [x | 0x00800000 for x in b]                                   # normal divisors
    for mods in (["approx"], ["full"], ["full", "ftz"]):
        got = run("div", "f32", a, b, mods=mods)
        for x, y, r in zip(a, b, got):
            ref = ref_round(exact(x, "f32") / exact(y, "f32"), "f32", "rn")
            if "ftz" in mods and (x & 0x7F800000) == 0:
                continue
            if (ref & 0x7F800000) == 0 and "ftz" in mods:
                continue
            assert abs(np.int64(r & 0x7FFFFFFF) - np.int64(ref & 0x7FFFFFFF)) <= 2, (mods, hex(x), hex(y))
    big = f32(2.0 ** 127)
    assert one("div", "f32", f32(3.0), big, mods=["approx"]) == 0
    assert one("div", "f32", f32(-3.0), big, mods=["approx"]) == NZERO
    assert is_nan32(one("div", "f32", PINF, big, mods=["approx"]))
    assert one("div", "f32", f32(3.0), big, mods=["full"]) == ref_round(Fraction(3, 2 ** 127), "f32", "rn")
    assert one("div", "f32", f32(6.0), f32(3.0), mods=["approx", "ftz"]) == f32(2.0)


def test_rcp():
    # 9.7.3.13 table for rcp.approx: -Inf -> -0, -0 -> -Inf, +0 -> +Inf, +Inf -> +0, NaN -> NaN.
    for mods in (["approx"], ["approx", "ftz"], ["rn"], ["rz"]):
        assert run("rcp", "f32", [NINF, NZERO, 0, PINF, QNAN], mods=mods)[:4] == [NZERO, NINF, PINF, 0]
        assert is_nan32(one("rcp", "f32", QNAN, mods=mods))
    assert one("rcp", "f32", f32(3.0), mods=["rn"]) == 0x3EAAAAAB
    assert one("rcp", "f32", f32(3.0), mods=["rz"]) == 0x3EAAAAAA
    assert one("rcp", "f32", f32(3.0), mods=["rp"]) == 0x3EAAAAAB
    assert one("rcp", "f32", f32(-3.0), mods=["rm"]) == 0xBEAAAAAB
    assert one("rcp", "f32", f32(2.0 ** 127), mods=["rn"]) == 0x00400000            # 2^-127: subnormal
    assert one("rcp", "f32", f32(2.0 ** 127), mods=["rn", "ftz"]) == 0
    assert one("rcp", "f64", f64(3.0), mods=["rn"]) == f64(1 / 3)
    assert one("rcp", "f64", f64(3.0), mods=["rz"]) == f64(1 / 3)       # 1/3 rounds down in f64
    assert one("rcp", "f64", f64(3.0), mods=["rp"]) == f64(1 / 3) + 1
    # rcp.approx.ftz.f64 (9.7.3.14): 1/x on the upper word in 1.11.20 format, low word zero
    r = one("rcp", "f64", f64(3.0), mods=["approx", "ftz"])
    assert r & 0xFFFFFFFF == 0 and abs(struct.unpack("<d", struct.pack("<Q", r))[0] - 1 / 3) < 2.0 ** -21
    assert one("rcp", "f64", 0x7FF8000000000001, mods=["approx", "ftz"]) == 0x7FFFFFFF00000000
    assert one("rcp", "f64", 0x0000000100000000, mods=["approx", "ftz"]) == f64(INF)  # subnormal -> inf


def test_sqrt_and_rsqrt_special_values():
    # 9.7.3.15 table: -Inf -> NaN, -normal -> NaN, -0 -> -0, +0 -> +0, +Inf -> +Inf, NaN -> NaN
    for mods in (["approx"], ["rn"], ["rz"], ["approx", "ftz"]):
        got = run("sqrt", "f32", [NINF, f32(-4.0), NZERO, 0, PINF, QNAN], mods=mods)
        assert is_nan32(got[0]) and is_nan32(got[1]) and got[2:5] == [NZERO, 0, PINF] and is_nan32(got[5])
    assert one("sqrt", "f32", f32(2.0), mods=["rn"]) == 0x3FB504F3
    assert one("sqrt", "f32", f32(2.0), mods=["rp"]) == 0x3FB504F4
    assert one("sqrt", "f32", MIN_SUB, mods=["rn"]) == f32(float(np.float32(math.sqrt(2.0 ** -149))))
    assert one("sqrt", "f32", f32(2.0 ** -148), mods=["rn"]) == f32(2.0 ** -74)
    assert one("sqrt", "f32", 0x00000004, mods=["rn", "ftz"]) == 0
    assert one("sqrt", "f64", f64(2.0), mods=["rn"]) == f64(math.sqrt(2.0))
    # 9.7.3.16 rsqrt table: -Inf -> NaN, -normal -> NaN, -0 -> -Inf, +0 -> +Inf, +Inf -> +0, NaN -> NaN
    got = run("rsqrt", "f32", [NINF, f32(-4.0), NZERO, 0, PINF, QNAN], mods=["approx"])
    assert is_nan32(got[0]) and is_nan32(got[1]) and got[2:5] == [NINF, PINF, 0] and is_nan32(got[5])
    assert one("rsqrt", "f32", f32(4.0), mods=["approx"]) == f32(0.5)
    # max relative error 2^-22.9 (the model is the correctly rounded value)
    for x in (3.0, 7.0, 1e-30, 1e30):
        r = struct.unpack("<f", struct.pack("<I", one("rsqrt", "f32", f32(x), mods=["approx"])))[0]
        assert abs(r * math.sqrt(np.float32(x)) - 1) < 2.0 ** -22.9
    assert one("rsqrt", "f64", f64(4.0), mods=["approx"]) == f64(0.5)
    r = one("rsqrt", "f64", f64(4.0), mods=["approx", "ftz"])
    assert r == f64(0.5) and one("rsqrt", "f64", f64(-4.0), mods=["approx", "ftz"]) == 0x7FFFFFFF00000000


# -- approximate transcendental functions (9.7.3.18-9.7.3.22, 9.7.4.9-10) -------------------------
def test_ex2_f32():
    # table: -Inf -> +0, -0 -> +1, +0 -> +1, +Inf -> +Inf, NaN -> NaN; "maximum ulp error is 2 ulp from
    # correctly rounded result"; the model is the H100's own (test_emu_mufu.py).
    for mods in (["approx"], ["approx", "ftz"]):
        got = run("ex2", "f32", [NINF, NZERO, 0, PINF, QNAN, f32(3.0), f32(-1.0), f32(0.5)], mods=mods)
        assert got[:4] == [0, f32(1.0), f32(1.0), PINF] and is_nan32(got[4])
        assert got[5:7] == [f32(8.0), f32(0.5)]
        assert got[7] == ref_round(Fraction(math.sqrt(2)), "f32", "rn")
    rng = np.random.default_rng(5)
    xs = rng.uniform(-120, 120, 300).astype(np.float32)
    got = run("ex2", "f32", [f32(float(x)) for x in xs], mods=["approx", "ftz"])
    for x, r in zip(xs, got):
        ref = f32(float(np.float32(2.0 ** float(x))))                     # correctly rounded (to 1e-16)
        assert abs(r - ref) <= 2
    # subnormal results: kept without .ftz, flushed with it; subnormal inputs flushed (-> 1.0)
    assert one("ex2", "f32", f32(-140.0), mods=["approx"]) == f32(2.0 ** -140)
    assert one("ex2", "f32", f32(-140.0), mods=["approx", "ftz"]) == 0
    assert one("ex2", "f32", 0x80000001, mods=["approx", "ftz"]) == f32(1.0)
    assert one("ex2", "f32", f32(128.0), mods=["approx"]) == PINF


def test_lg2_sin_cos_tanh():
    # lg2 table: -Inf -> NaN, -normal -> NaN, -0 -> -Inf, +0 -> -Inf, +Inf -> +Inf, NaN -> NaN
    got = run("lg2", "f32", [NINF, f32(-2.0), NZERO, 0, PINF, QNAN, f32(8.0), MIN_SUB], mods=["approx"])
    assert is_nan32(got[0]) and is_nan32(got[1]) and got[2:5] == [NINF, NINF, PINF] and is_nan32(got[5])
    assert got[6] == f32(3.0) and got[7] == f32(-149.0)
    assert one("lg2", "f32", MIN_SUB, mods=["approx", "ftz"]) == NINF         # flushed to 0 first
    for x in (0.6, 1.3, 1.9):                                     # abs. error 2^-22 on (0.5, 2)
        assert abs(_f(one("lg2", "f32", f32(x), mods=["approx"])) - math.log2(np.float32(x))) < 2.0 ** -22
    # sin: -Inf -> NaN, -0 -> -0, +0 -> +0, +Inf -> NaN; cos: +-0 -> +1; abs. error 2^-20.5 on [-2pi, 2pi]
    s = run("sin", "f32", [NINF, NZERO, 0, PINF, QNAN], mods=["approx"])
    assert is_nan32(s[0]) and s[1:3] == [NZERO, 0] and is_nan32(s[3]) and is_nan32(s[4])
    c = run("cos", "f32", [NINF, NZERO, 0, PINF], mods=["approx", "ftz"])
    assert is_nan32(c[0]) and c[1:3] == [f32(1.0), f32(1.0)] and is_nan32(c[3])
    for x in np.linspace(-2 * math.pi, 2 * math.pi, 41, dtype=np.float32):
        x = float(x)
        assert abs(_f(one("sin", "f32", f32(x), mods=["approx"])) - math.sin(x)) < 2.0 ** -20.5
        assert abs(_f(one("cos", "f32", f32(x), mods=["approx"])) - math.cos(x)) < 2.0 ** -20.5
    assert one("sin", "f32", 0x80000003, mods=["approx", "ftz"]) == NZERO
    # tanh: -Inf -> -1, -0 -> -0, +0 -> +0, +Inf -> 1, NaN -> NaN; relative error 2^-11;
    # "The subnormal inputs gets passed through to the output"
    t = run("tanh", "f32", [NINF, NZERO, 0, PINF, QNAN, 0x00000005, f32(0.5)], mods=["approx"])
    assert t[:4] == [f32(-1.0), NZERO, 0, f32(1.0)] and is_nan32(t[4]) and t[5] == 5
    assert abs(_f(t[6]) / math.tanh(0.5) - 1) < 2.0 ** -11


def test_half_precision_ex2_and_tanh():
    # 9.7.4.10: ex2.approx.f16 supports subnormal inputs; ex2.approx.ftz.bf16 flushes them: -subnormal
    # and +subnormal -> +1.0. Relative errors 2^-9.9 (f16), 2^-7 (bf16).
    got = run("ex2", "f16", [0xFC00, 0x8000, 0x0000, 0x7C00, 0x7E00, f16(3.0), f16(-20.0)], mods=["approx"])
    assert got[:4] == [0, f16(1.0), f16(1.0), 0x7C00] and (got[4] & 0x7FFF) > 0x7C00
    assert got[5] == f16(8.0) and got[6] == f16(2.0 ** -20)                 # an f16 subnormal result
    got = run("ex2", "bf16", [0xFF80, 0x8001, 0x8000, 0x0000, 0x0001, 0x7F80, 0x7FC0, bf16(-130.0)],
              mods=["approx", "ftz"])
    assert got[:6] == [0, bf16(1.0), bf16(1.0), bf16(1.0), bf16(1.0), 0x7F80] and (got[6] & 0x7FFF) > 0x7F80
    assert got[7] == 0                                                         # subnormal result flushed
    x2 = (f16(1.0) << 16) | f16(-1.0)
    assert one("ex2", "f16x2", x2, mods=["approx"]) == (f16(2.0) << 16) | f16(0.5)
    assert one("tanh", "bf16x2", (bf16(-INF) << 16) | 0x8000, mods=["approx"]) == (bf16(-1.0) << 16) | 0x8000
    assert abs(float(np.uint16(one("tanh", "f16", f16(0.5), mods=["approx"])).view(np.float16))
               - math.tanh(0.5)) < 2.0 ** -10.987


# -- f16 / bf16 arithmetic (9.7.4.1-9.7.4.8) ------------------------------------------------------
@pytest.mark.parametrize("t", ["f16", "bf16"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma"])
def test_half_arithmetic_rounds_once(t, op):
    rng = np.random.default_rng(hash((t, op)) % 2**32)
    n = 200
    args = [[int(x) for x in rng.integers(0, 1 << 16, n)] for _ in range(3 if op == "fma" else 2)]
    got = run(op, t, *args, mods=["rn"])
    for i in range(n):
        xs = [exact(a[i], t) for a in args]
        if any(isinstance(x, float) for x in xs):
            continue
        q = EXACT[op](*xs)
        if q == 0:
            continue
        assert got[i] == ref_round(q, t, "rn"), (t, op, [hex(a[i]) for a in args])


def test_half_nan_sat_relu_ftz():
    # "Half-precision instructions return an unspecified NaN": the emulator gives 0x7FFF.
    assert one("add", "f16", 0x7C00, 0xFC00) == 0x7FFF
    assert one("mul", "bf16", 0x7F80, 0x0000) == 0x7FFF
    # .sat clamps to [0, 1], NaN -> +0 (f16 only); .relu clamps negatives to 0, NaN -> canonical NaN
    assert one("add", "f16", f16(0.75), f16(0.5), mods=["sat"]) == f16(1.0)
    assert one("mul", "f16", 0x7C00, 0, mods=["sat"]) == 0
    assert one("fma", "f16", f16(-1.0), f16(2.0), f16(1.0), mods=["rn", "relu"]) == 0
    assert one("fma", "bf16", 0x7F80, 0, 0, mods=["rn", "relu"]) == 0x7FFF
    assert one("fma", "bf16", bf16(1.5), bf16(2.0), bf16(-1.0), mods=["rn", "relu"]) == bf16(2.0)
    assert one("fma", "f16", f16(-1.0), 0, 0x8000, mods=["rn", "relu"]) == 0            # -0 -> +0
    # .ftz (f16 only): subnormal inputs and results flushed
    assert one("add", "f16", 0x0001, 0x0001) == 0x0002
    assert one("add", "f16", 0x0001, 0x0001, mods=["ftz"]) == 0
    assert one("mul", "f16", 0x8400, f16(0.5), mods=["ftz"]) == 0x8000
    # packed: each half independently, element 0 in the low bits
    a = (f16(1.0) << 16) | f16(2.0)
    b = (f16(0.5) << 16) | 0x7C00
    assert one("add", "f16x2", a, b) == (f16(1.5) << 16) | 0x7C00
    assert one("mul", "bf16x2", (bf16(3.0) << 16) | bf16(-2.0), (bf16(0.5) << 16) | bf16(4.0)) == \
        (bf16(1.5) << 16) | bf16(-8.0)


# -- min / max (9.7.3.11-12, 9.7.4.7-8) ----------------------------------------------------------
def test_min_max_nan_rules_and_signed_zeros():
    one_, two = f32(1.0), f32(2.0)
    # without .NaN a NaN input is ignored; both NaN -> NaN (canonical)
    assert one("min", "f32", QNAN, one_) == one_ and one("min", "f32", one_, QNAN) == one_
    assert one("max", "f32", 0x7FC00001, 0xFFC00000) == 0x7FFFFFFF
    # with .NaN any NaN input gives the canonical NaN
    assert one("max", "f32", QNAN, two, mods=["NaN"]) == 0x7FFFFFFF
    assert one("min", "f32", one_, two, mods=["NaN"]) == one_
    # "-0.0 < +0.0 here"
    assert one("min", "f32", 0, NZERO) == NZERO and one("min", "f32", NZERO, 0) == NZERO
    assert one("max", "f32", NZERO, 0) == 0 and one("max", "f32", 0, NZERO) == 0
    assert one("max", "f32", NINF, PINF) == PINF
    # .ftz flushes inputs: min(+subnormal, -0) = min(+0, -0) = -0
    assert one("min", "f32", MIN_SUB, NZERO, mods=["ftz"]) == NZERO
    assert one("max", "f32", MIN_SUB, 0) == MIN_SUB
    # .xorsign.abs: magnitude of min/max of |a|, |b|, sign = sign(a) ^ sign(b); NaN result: no xorsign
    assert one("min", "f32", f32(-1.0), two, mods=["xorsign", "abs"]) == f32(-1.0)
    assert one("max", "f32", f32(-1.0), f32(-3.0), mods=["xorsign", "abs"]) == f32(3.0)
    assert one("max", "f32", f32(-1.0), f32(3.0), mods=["xorsign", "abs"]) == f32(-3.0)
    assert one("min", "f32", f32(-1.0), QNAN, mods=["xorsign", "abs"]) == f32(-1.0)
    assert one("min", "f32", f32(-1.0), QNAN, mods=["NaN", "xorsign", "abs"]) == 0x7FFFFFFF
    # three inputs (sm_100): d = min(min(a, b), c)
    assert one("min", "f32", two, one_, f32(-5.0)) == f32(-5.0)
    assert one("max", "f32", f32(-7.0), f32(-3.0), f32(-9.0), mods=["abs"]) == f32(9.0)
    # f64: no modifiers; NaN ignored
    assert one("max", "f64", f64(NAN), f64(1.0)) == f64(1.0)
    assert one("min", "f64", f64(0.0), f64(-0.0)) == f64(-0.0)


def test_min_max_half():
    assert one("min", "f16", 0x7E00, f16(1.0)) == f16(1.0)
    assert one("min", "bf16", 0x7FC0, bf16(1.0), mods=["NaN"]) == 0x7FFF
    assert one("max", "f16", 0x8000, 0x0000) == 0x0000
    assert one("max", "bf16", bf16(-2.0), bf16(1.0), mods=["xorsign", "abs"]) == bf16(-2.0)
    a = (f16(1.0) << 16) | f16(-3.0)
    b = (0x7E00 << 16) | f16(2.0)
    assert one("max", "f16x2", a, b) == (f16(1.0) << 16) | f16(2.0)
    assert one("max", "f16x2", a, b, mods=["NaN"]) == (0x7FFF << 16) | f16(2.0)


# -- neg, abs, copysign (9.7.3.2, 9.7.3.9-10, 9.7.4.5-6) ------------------------------------------
def test_sign_operations():
    assert one("neg", "f32", f32(1.5)) == f32(-1.5) and one("neg", "f32", 0) == NZERO
    assert one("abs", "f32", f32(-1.5)) == f32(1.5) and one("abs", "f32", NINF) == PINF
    assert one("neg", "f32", MIN_SUB) == MIN_SUB | 0x80000000
    assert one("neg", "f32", MIN_SUB, mods=["ftz"]) == NZERO
    assert one("abs", "f32", 0x80000001, mods=["ftz"]) == 0
    assert is_nan32(one("neg", "f32", QNAN)) and is_nan32(one("abs", "f32", 0xFFC00000))   # unspecified NaN
    assert one("neg", "bf16", bf16(2.0)) == bf16(-2.0)
    assert one("abs", "f16x2", (f16(-1.0) << 16) | f16(-2.0)) == (f16(1.0) << 16) | f16(2.0)
    assert one("neg", "f64", f64(1.0)) == f64(-1.0)
    # copysign: "Copy sign bit of a into value of b" (a pure bit operation, NaN payloads kept)
    assert one("copysign", "f32", f32(-1.0), f32(3.0)) == f32(-3.0)
    assert one("copysign", "f32", NZERO, 0x7FC00001) == 0xFFC00001
    assert one("copysign", "f64", f64(1.0), f64(-2.0)) == f64(2.0)


# -- comparisons (9.7.6.2, 9.7.7.2) and testp (9.7.3.1) --------------------------------------------
CMP_TABLE = {  # (1 vs 2), (2 vs 1), (1 vs 1), (1 vs NaN)
    "eq": (0, 0, 1, 0), "ne": (1, 1, 0, 0), "lt": (1, 0, 0, 0), "le": (1, 0, 1, 0), "gt": (0, 1, 0, 0),
    "ge": (0, 1, 1, 0), "equ": (0, 0, 1, 1), "neu": (1, 1, 0, 1), "ltu": (1, 0, 0, 1), "leu": (1, 0, 1, 1),
    "gtu": (0, 1, 0, 1), "geu": (0, 1, 1, 1), "num": (1, 1, 1, 0), "nan": (0, 0, 0, 1)}


@pytest.mark.parametrize("t", ["f32", "f64", "f16", "bf16"])
def test_setp_ordered_and_unordered(t):
    # "ordered comparisons ... If either operand is NaN, the result is False"; unordered: True
    enc = {"f32": f32, "f64": f64, "f16": f16, "bf16": bf16}[t]
    a = np.array([enc(1.0), enc(2.0), enc(1.0), enc(1.0)], DT[t])
    b = np.array([enc(2.0), enc(1.0), enc(1.0), enc(NAN) | (0x7FC0 if t == "bf16" else 0)], DT[t])
    for cmp, want in CMP_TABLE.items():
        assert tuple(int(x) for x in FP.compare(cmp, t, a, b)) == want, (cmp, t)
    assert FP.compare("eq", t, np.array([enc(0.0)], DT[t]), np.array([enc(-0.0)], DT[t]))[0]


def test_setp_ftz_and_pairs():
    sub = np.array([MIN_SUB], np.uint32)
    zero = np.array([0], np.uint32)
    assert not FP.compare("eq", "f32", sub, zero)[0]
    assert FP.compare("eq", "f32", sub, zero, frozenset({"ftz"}))[0]
    # f16x2: p gets the lower halves' result, q the upper halves'
    a = np.array([(f16(1.0) << 16) | f16(5.0)], np.uint32)
    b = np.array([(f16(2.0) << 16) | f16(3.0)], np.uint32)
    lo, hi = FP.compare_pair("lt", "f16x2", a, b)
    assert (bool(lo[0]), bool(hi[0])) == (False, True)
    lo, hi = FP.compare_pair("nan", "bf16x2", np.array([0x7FC00000], np.uint32), np.array([0], np.uint32))
    assert (bool(lo[0]), bool(hi[0])) == (False, True)


def test_testp():
    vals = np.array([0, NZERO, MIN_SUB, f32(1.0), PINF, NINF, QNAN], np.uint32)
    table = {"finite": [1, 1, 1, 1, 0, 0, 0], "infinite": [0, 0, 0, 0, 1, 1, 0],
             "number": [1, 1, 1, 1, 1, 1, 0], "notanumber": [0, 0, 0, 0, 0, 0, 1],
             "normal": [1, 1, 0, 1, 0, 0, 0],                      # "positive and negative zero are normal"
             "subnormal": [0, 0, 1, 0, 0, 0, 0]}
    for kind, want in table.items():
        assert [int(x) for x in FP.testp(kind, "f32", vals)] == want
    assert list(FP.testp("subnormal", "f64", np.array([1, f64(1.0)], np.uint64))) == [True, False]


# -- helpers and input conventions --------------------------------------------------------------
def test_bit_helpers_and_wide_inputs():
    x = np.array([1.5, -0.0], np.float32)
    assert list(FF.f32_to_bits(x)) == [f32(1.5), NZERO]
    assert list(FF.bits_to_f32(np.array([f32(2.5)], np.uint64))) == [2.5]
    assert list(FF.bf16_to_f32_bits(np.array([0x3FC0, 0x7FC1], np.uint16))) == [f32(1.5), 0x7FC10000]
    assert list(FF.f16_to_f32_bits(np.array([f16(0.5), 0x7E01], np.uint16))) == [f32(0.5), 0x7FFFFFFF]
    bits = np.array([f32(1 + 2.0 ** -8), 0x7FC00001], np.uint32)
    assert list(FF.round_f32_to_bf16(bits)) == [0x3F80, 0x7FFF]
    assert list(FF.round_f32_to_bf16(np.array([f32(1 + 2.0 ** -8)], np.uint32), "rp")) == [0x3F81]
    assert list(FF.round_f32_to_f16(np.array([f32(65520.0)], np.uint32), "rz")) == [0x7BFF]
    assert list(FF.round_f64_to_f32(np.array([f64(1 / 3)], np.uint64), "rp")) == [0x3EAAAAAB]
    # 16-bit operands held in wider registers: the low bits are used; results in the storage dtype
    r = FP.arith("add", "f16", [np.array([0xABCD0000 | f16(1.0)], np.uint32),
                                np.array([f16(2.0)], np.uint64)], frozenset())
    assert r.dtype == np.uint16 and int(r[0]) == f16(3.0)
    assert FP.arith("add", "f32x2", [np.zeros(4, np.uint64)] * 2, frozenset()).dtype == np.uint64


# -- Unsupported forms ---------------------------------------------------------------------------
@pytest.mark.parametrize("op, t, mods, nops, text", [
    ("fma", "f32", (), 3, "fma.f32 is not supported by the emulator (a rounding modifier is required)"),
    ("mad", "f32", ("ftz",), 3, "mad.ftz.f32 is not supported by the emulator"),
    ("mad", "f64", (), 3, "mad.f64 is not supported"),
    ("add", "f16", ("rz",), 2, "add.rz.f16 is not supported"),
    ("add", "bf16", ("ftz",), 2, "add.ftz.bf16 is not supported"),
    ("add", "f64", ("sat",), 2, "add.sat.f64 is not supported"),
    ("add", "f32", ("rn", "rz"), 2, "more than one rounding modifier"),
    ("div", "f32", (), 2, "div.f32 is not supported"),
    ("div", "f64", ("approx",), 2, "div.approx.f64 is not supported"),
    ("sqrt", "f64", ("approx",), 1, "sqrt.approx.f64 is not supported"),
    ("rcp", "f64", ("approx",), 1, "rcp.approx.f64 is not supported"),
    ("ex2", "f32", (), 1, "ex2.f32 is not supported"),
    ("ex2", "bf16", ("approx",), 1, "ex2.approx.bf16 is not supported"),
    ("ex2", "f16", ("approx", "ftz"), 1, "ex2.approx.ftz.f16 is not supported"),
    ("tanh", "f32", ("approx", "ftz"), 1, "tanh.approx.ftz.f32 is not supported"),
    ("lg2", "f16", ("approx",), 1, "lg2.approx.f16 is not supported"),
    ("min", "f32", ("xorsign",), 2, "min.xorsign.f32 is not supported"),
    ("min", "f64", ("NaN",), 2, "min.NaN.f64 is not supported"),
    ("max", "f32", ("xorsign", "abs"), 3, "max.xorsign.abs.f32 is not supported"),
    ("fma", "f16", ("rn", "oob"), 3, "fma.rn.oob.f16 is not supported"),
    ("fma", "f16", ("rn", "sat", "relu"), 3, "fma.rn.sat.relu.f16 is not supported"),
    ("copysign", "f32", ("ftz",), 2, "copysign.ftz.f32 is not supported"),
    ("neg", "bf16", ("ftz",), 1, "neg.ftz.bf16 is not supported"),
    ("add", "f32", (), 3, "expected 2 source operands"),
    ("rem", "f32", (), 2, "rem.f32 is not supported"),
    ("sin", "f64", ("approx",), 1, "sin.approx.f64 is not supported"),
])
def test_unsupported_forms_raise(op, t, mods, nops, text):
    with pytest.raises(Unsupported, match=text.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        FP.arith(op, t, [np.zeros(1, DT[t])] * nops, frozenset(mods))


def test_unsupported_compare_forms():
    z = np.zeros(1, np.uint32)
    with pytest.raises(Unsupported, match=r"setp\.lt\.ftz\.f64"):
        FP.compare("lt", "f64", z, z, frozenset({"ftz"}))
    with pytest.raises(Unsupported, match="compare_pair"):
        FP.compare("lt", "f16x2", z, z)
    with pytest.raises(Unsupported, match=r"setp\.lo\.f32"):
        FP.compare("lo", "f32", z, z)
    with pytest.raises(Unsupported, match=r"testp\.normal\.f16"):
        FP.testp("normal", "f16", z)
