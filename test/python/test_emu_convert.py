"""``cvt`` semantics of the PTX emulator (fa4_mlir.emu.isa.convert), from the PTX ISA.

Sections cited: PTX ISA 9.1, 9.7.9.21 "Data Movement and Conversion Instructions: cvt", 6.5.1 "Scalar
Conversions" (Table 15), 6.5.2 "Rounding Modifiers", 5.2.3 "Alternate Floating-Point Data Formats".
References are exact: ``fractions.Fraction`` values rounded by ``ref_round`` (independent of the
emulator), NumPy's own float16 conversions, and hand-computed encodings.

The emulator was also compared bit for bit with an H100 (sm_90a) on 278 cvt forms (every result equal);
these tests do not need the hardware.
"""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np
import pytest

from fa4_mlir.emu.errors import Unsupported
from fa4_mlir.emu.isa import convert as CV

FMT = {"f64": (11, 52, 64), "f32": (8, 23, 32), "f16": (5, 10, 16), "bf16": (8, 7, 16)}
NAN, INF = float("nan"), float("inf")
STORAGE = {"s8": np.uint8, "u8": np.uint8, "s16": np.uint16, "u16": np.uint16, "s32": np.uint32,
           "u32": np.uint32, "s64": np.uint64, "u64": np.uint64, "f16": np.uint16, "bf16": np.uint16,
           "f32": np.uint32, "f64": np.uint64, "f16x2": np.uint32, "bf16x2": np.uint32,
           "e4m3x2": np.uint16, "e5m2x2": np.uint16}


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def ref_round(q: Fraction, t: str, mode: str) -> int:
    """IEEE 754 rounding of a nonzero rational q to format t."""
    e, m, w = FMT[t]
    bias = (1 << (e - 1)) - 1
    emin, emax = 1 - bias, bias
    sign = 1 if q < 0 else 0
    a = abs(q)
    quantum = Fraction(2) ** (max(_floor_log2(a), emin) - m)
    n = int(a // quantum)
    rem = a - n * quantum
    up = {"rn": rem > quantum / 2 or (rem == quantum / 2 and n % 2 == 1), "rz": False,
          "rp": rem > 0 and not sign, "rm": rem > 0 and bool(sign)}[mode]
    value = (n + up) * quantum
    if value > (2 - Fraction(2) ** -m) * Fraction(2) ** emax:
        to_inf = mode == "rn" or (mode == "rp" and not sign) or (mode == "rm" and sign)
        mag = ((1 << e) - 1) << m if to_inf else (((1 << e) - 2) << m) | ((1 << m) - 1)
    elif value < Fraction(2) ** emin:
        mag = int(value / Fraction(2) ** (emin - m))
    else:
        e2 = _floor_log2(value)
        mag = ((e2 + bias) << m) | (int(value / Fraction(2) ** (e2 - m)) - (1 << m))
    return (sign << (w - 1)) | mag


def f32(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f16(x):
    return int(np.array([x], np.float16).view(np.uint16)[0])


def bf16(x):
    return f32(x) >> 16


def cvt(dst, src, values, mods=()):
    vals = values if isinstance(values, (list, tuple)) else [values]
    return [int(x) for x in CV.convert(dst, src, np.array(vals, STORAGE[src]), frozenset(mods))]


def cvt1(dst, src, value, mods=()):
    return cvt(dst, src, [value], mods)[0]


# -- int -> int (Table 15: sext / zext / chop; .sat) ---------------------------------------------
def test_integer_extension_and_chop():
    assert cvt("s32", "s8", [0x80, 0x7F, 0xFF]) == [0xFFFFFF80, 0x7F, 0xFFFFFFFF]         # sext
    assert cvt("u32", "s8", [0x80]) == [0xFFFFFF80]                                        # sext (s8 source)
    assert cvt("s32", "u8", [0x80]) == [0x80]                                              # zext
    assert cvt("s64", "s16", [0x8000]) == [0xFFFFFFFFFFFF8000]
    assert cvt("s8", "s32", [0x12345680, 0xFFFFFFFF]) == [0x80, 0xFF]                      # chop
    assert cvt("u16", "u64", [0x123456789ABCDEF0]) == [0xDEF0]
    assert cvt("s16", "u32", [0x00018000]) == [0x8000]
    # a wider input register: the low bits of the source type are used
    wide = np.array([0xAB80], np.uint16)
    assert [int(x) for x in CV.convert("s32", "s8", wide, frozenset())] == [0xFFFFFF80]


def test_integer_saturation():
    # ".sat limits the result to MININT..MAXINT for the size of the operation"
    assert cvt("s8", "s32", [300, 0xFFFFFF00, 5, 0x80000000], ["sat"]) == [0x7F, 0x80, 5, 0x80]
    assert cvt("u8", "s32", [300, 0xFFFFFFFF, 200], ["sat"]) == [0xFF, 0, 200]
    assert cvt("u32", "s64", [2 ** 63, 2 ** 32 + 5, 7], ["sat"]) == [0, 0xFFFFFFFF, 7]
    assert cvt("s32", "u32", [0x80000000, 12], ["sat"]) == [0x7FFFFFFF, 12]
    assert cvt("s64", "u64", [2 ** 64 - 1], ["sat"]) == [2 ** 63 - 1]
    assert cvt("u64", "s64", [2 ** 64 - 1, 9], ["sat"]) == [0, 9]
    assert cvt("u16", "s16", [0x8000], ["sat"]) == [0]
    assert cvt("s16", "u16", [0xFFFF], ["sat"]) == [0x7FFF]


# -- int -> float (rounding modifier required) -----------------------------------------------------
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_int_to_float_rounding(mode):
    rng = np.random.default_rng(1)
    for src, hi in (("u32", 2 ** 32), ("s32", 2 ** 32), ("u64", 2 ** 64), ("s64", 2 ** 64)):
        xs = [int(x) for x in rng.integers(0, hi, 60, dtype=np.uint64, endpoint=False)]
        xs += [1, 0xFFFFFFFF & (hi - 1), 2 ** 24 + 1, 2 ** 53 + 1, 2 ** 63 & (hi - 1)]
        bits = [x & (hi - 1) for x in xs]
        for dst in ("f32", "f64", "f16", "bf16"):
            got = cvt(dst, src, bits, [mode])
            for b, g in zip(bits, got):
                v = b - hi if (src[0] == "s" and b >= hi // 2) else b
                want = 0 if v == 0 else ref_round(Fraction(v), dst, mode)
                assert g == want, (dst, src, mode, hex(b))


def test_int_to_float_cases():
    assert cvt1("f32", "u32", 2 ** 24 + 1, ["rn"]) == f32(2.0 ** 24)            # tie to even
    assert cvt1("f32", "u32", 2 ** 24 + 3, ["rn"]) == f32(2.0 ** 24 + 4)
    assert cvt1("f32", "u32", 2 ** 24 + 1, ["rp"]) == f32(2.0 ** 24 + 2)
    assert cvt1("f32", "s32", 0x80000000, ["rz"]) == f32(-2.0 ** 31)
    assert cvt1("f32", "u64", 2 ** 64 - 1, ["rn"]) == f32(2.0 ** 64)
    assert cvt1("f32", "u64", 2 ** 64 - 1, ["rz"]) == 0x5F7FFFFF
    # out of the f16 range: IEEE overflow (inf under rn, the largest finite value under rz)
    assert cvt1("f16", "u32", 65520, ["rn"]) == 0x7C00
    assert cvt1("f16", "u32", 65520, ["rz"]) == 0x7BFF
    assert cvt1("f16", "s32", 0xFFFF0000, ["rm"]) == 0xFC00
    assert cvt1("bf16", "u64", 2 ** 64 - 1, ["rn"]) == bf16(2.0 ** 64)
    assert cvt1("f32", "s32", 5, ["rn", "sat"]) == f32(1.0)
    assert cvt1("f32", "s32", 0xFFFFFFFF, ["rn", "sat"]) == 0


# -- float -> int (integer rounding required; saturating; NaN rules) ------------------------------
def test_float_to_int_rounding_modes():
    xs = [f32(v) for v in (2.5, 3.5, -2.5, -0.5, 1.25, -1.75)]
    assert cvt("s32", "f32", xs, ["rni"]) == [2, 4, 0xFFFFFFFE, 0, 1, 0xFFFFFFFE]        # ties to even
    assert cvt("s32", "f32", xs, ["rzi"]) == [2, 3, 0xFFFFFFFE, 0, 1, 0xFFFFFFFF]
    assert cvt("s32", "f32", xs, ["rmi"]) == [2, 3, 0xFFFFFFFD, 0xFFFFFFFF, 1, 0xFFFFFFFE]
    assert cvt("s32", "f32", xs, ["rpi"]) == [3, 4, 0xFFFFFFFE, 0, 2, 0xFFFFFFFF]
    assert cvt("s64", "f64", [f64(-(2.0 ** 62) - 0.5)], ["rni"]) == [2 ** 64 - 2 ** 62]
    assert cvt("u16", "f16", [f16(65504.0), f16(-3.0)], ["rzi"]) == [65504, 0]
    assert cvt("s32", "bf16", [bf16(-3.0)], ["rpi"]) == [0xFFFFFFFD]


def test_float_to_int_saturates_and_nan():
    # "For float-to-integer conversions, the result is clamped to the destination range by default"
    vals = [f32(v) for v in (1e20, -1e20, INF, -INF, 300.0, -129.0)]
    assert cvt("s32", "f32", vals, ["rni"]) == \
        [0x7FFFFFFF, 0x80000000, 0x7FFFFFFF, 0x80000000, 300, 0xFFFFFF7F]
    assert cvt("u32", "f32", vals, ["rni"]) == [0xFFFFFFFF, 0, 0xFFFFFFFF, 0, 300, 0]
    assert cvt("s8", "f32", vals, ["rzi"]) == [0x7F, 0x80, 0x7F, 0x80, 0x7F, 0x80]
    assert cvt("u8", "f32", vals, ["rzi", "sat"]) == [0xFF, 0, 0xFF, 0, 0xFF, 0]          # .sat redundant
    assert cvt("s64", "f32", vals[:4], ["rzi"]) == [2 ** 63 - 1, 2 ** 63, 2 ** 63 - 1, 2 ** 63]
    assert cvt("u64", "f64", [f64(2.0 ** 64), f64(2.0 ** 63 + 2048), f64(-1.0)], ["rzi"]) == \
        [2 ** 64 - 1, 2 ** 63 + 2048, 0]
    # NaN: "Zero if source is not .f64 and destination is not .s64, .u64. Otherwise 1 << (BitWidth(dst)-1)"
    nan32, nan64 = 0x7FC00000, 0x7FF8000000000000
    assert cvt("s32", "f32", [nan32], ["rni"]) == [0]
    assert cvt("u16", "f32", [nan32], ["rni"]) == [0]
    assert cvt("s32", "f16", [0x7E00], ["rni"]) == [0]
    assert cvt("s64", "f32", [nan32], ["rni"]) == [2 ** 63]
    assert cvt("u64", "bf16", [0x7FC0], ["rni"]) == [2 ** 63]
    assert cvt("s32", "f64", [nan64], ["rzi"]) == [0x80000000]
    assert cvt("u32", "f64", [nan64], ["rzi"]) == [0x80000000]
    assert cvt("s8", "f64", [nan64], ["rzi"]) == [0x80]
    # .ftz (f32 source): subnormal inputs are flushed before rounding
    assert cvt("s32", "f32", [0x00000001], ["rpi"]) == [1]
    assert cvt("s32", "f32", [0x00000001], ["rpi", "ftz"]) == [0]
    assert cvt("s32", "f32", [0x80000001], ["rmi", "ftz"]) == [0]


# -- float -> float ---------------------------------------------------------------------------------
def _rand(rng, t, n):
    e, m, w = FMT[t]
    out = []
    for _ in range(n):
        ex = int(rng.integers(0, (1 << e) - 1))
        out.append((int(rng.integers(0, 2)) << (w - 1)) | (ex << m) | int(rng.integers(0, 1 << m)))
    return out


def _val(bits, t):
    e, m, w = FMT[t]
    bias = (1 << (e - 1)) - 1
    sign = -1 if bits >> (w - 1) else 1
    ex, man = (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)
    if ex == 0:
        return sign * Fraction(man) * Fraction(2) ** (1 - bias - m)
    return sign * Fraction(man + (1 << m)) * Fraction(2) ** (ex - bias - m)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("dst, src", [("f16", "f32"), ("bf16", "f32"), ("f32", "f64"), ("f16", "f64"),
                                      ("bf16", "f64"), ("bf16", "f16"), ("f16", "bf16")])
def test_narrowing_conversions_round_exactly(dst, src, mode):
    rng = np.random.default_rng(hash((dst, src, mode)) % 2**32)
    bits = _rand(rng, src, 150)
    got = cvt(dst, src, bits, [mode])
    for b, g in zip(bits, got):
        q = _val(b, src)
        want = ref_round(q, dst, mode) if q != 0 else (b >> (FMT[src][2] - 1)) << (FMT[dst][2] - 1)
        assert g == want, (dst, src, mode, hex(b))


def test_narrowing_edge_cases():
    # ties to even, overflow per mode, subnormal results
    assert cvt1("f16", "f32", f32(1 + 2.0 ** -11), ["rn"]) == f16(1.0)
    assert cvt1("f16", "f32", f32(1 + 3 * 2.0 ** -11), ["rn"]) == f16(1 + 2.0 ** -9)
    assert cvt1("f16", "f32", f32(65520.0), ["rn"]) == 0x7C00
    assert cvt1("f16", "f32", f32(65520.0), ["rz"]) == 0x7BFF
    assert cvt1("f16", "f32", f32(-1e6), ["rp"]) == 0xFBFF
    assert cvt1("f16", "f32", f32(2.0 ** -25), ["rn"]) == 0                 # tie with 0: even
    assert cvt1("f16", "f32", f32(2.0 ** -25), ["rp"]) == 1
    assert cvt1("bf16", "f32", f32(1 + 2.0 ** -8), ["rn"]) == bf16(1.0)
    assert cvt1("bf16", "f32", f32(1 + 3 * 2.0 ** -8), ["rn"]) == 0x3F82
    assert cvt1("bf16", "f32", 0x7F7FFFFF, ["rn"]) == 0x7F80
    assert cvt1("bf16", "f32", 0x7F7FFFFF, ["rz"]) == 0x7F7F
    assert cvt1("bf16", "f16", 0x3C06) == 0x3F81                            # f16 <-> bf16: .rn by default
    assert cvt1("f32", "f64", f64(1 / 3), ["rz"]) == 0x3EAAAAAA
    assert cvt1("f32", "f64", f64(1e-50), ["rp"]) == 1
    assert cvt1("f32", "f64", f64(1e-50), ["rn", "ftz"]) == 0
    assert cvt1("f32", "f64", f64(2.0 ** -130), ["rn", "ftz"]) == 0         # f32 results flushed
    assert cvt1("f32", "f64", f64(2.0 ** -130), ["rn"]) == 0x00080000


def test_satfinite_relu_sat():
    # .satfinite: |x| > MAX_NORM -> signed MAX_NORM (infinities too); NaN stays NaN
    assert cvt("f16", "f32", [f32(1e6), f32(-INF), f32(NAN)], ["rn", "satfinite"]) == [0x7BFF, 0xFBFF, 0x7FFF]
    assert cvt("bf16", "f32", [0x7F7FFFFF, f32(INF)], ["rn", "satfinite"]) == [0x7F7F, 0x7F7F]
    # .relu: negative -> 0 (also -0); NaN -> canonical NaN
    assert cvt("f16", "f32", [f32(-1.0), f32(-0.0), f32(2.0), 0xFFC00000], ["rn", "relu"]) == \
        [0, 0, f16(2.0), 0x7FFF]
    assert cvt("bf16", "f32", [f32(-1e-30)], ["rz", "relu", "satfinite"]) == [0]
    # .sat: clamp to [0.0, 1.0]; NaN -> +0
    assert cvt("f16", "f32", [f32(2.0), f32(-2.0), f32(NAN), f32(0.5)], ["rn", "sat"]) == \
        [f16(1.0), 0, 0, f16(0.5)]
    assert cvt("f32", "f32", [f32(-0.0), f32(INF), f32(NAN)], ["sat"]) == [0, f32(1.0), 0]
    assert cvt("f64", "f64", [f64(7.0)], ["sat"]) == [f64(1.0)]


def test_widening_is_exact():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    ref = h.view(np.float16).astype(np.float32).view(np.uint32)
    got = CV.convert("f32", "f16", h, frozenset())
    nan = (h & 0x7FFF) > 0x7C00
    assert np.array_equal(got[~nan], ref[~nan])
    assert set(int(x) for x in got[nan]) == {0x7FFFFFFF}                # canonical NaN
    # bf16 -> f32 is the upper half: exact, NaN payloads kept (ISA: "unspecified NaN")
    b = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    assert np.array_equal(CV.convert("f32", "bf16", b, frozenset()), b.astype(np.uint32) << 16)
    assert cvt1("f32", "bf16", 0x8001, ["ftz"]) == 0x80000000            # .ftz flushes the f32 result
    assert cvt1("f64", "f32", f32(0.1)) == f64(float(np.float32(0.1)))
    assert cvt1("f64", "f32", 0x00000001) == f64(2.0 ** -149)
    assert cvt1("f64", "f32", 0x00000001, ["ftz"]) == 0
    assert cvt1("f64", "f32", 0x7FC00001) == 0x7FF8000020000000        # payload kept, quiet
    assert cvt1("f64", "f16", f16(-2.0)) == f64(-2.0)


def test_integral_rounding_in_float_format():
    # "A floating-point value may be rounded to an integral value using the integer rounding modifiers"
    xs = [f32(v) for v in (2.5, -2.5, 0.4, -0.4, 1e30)]
    assert cvt("f32", "f32", xs, ["rni"]) == [f32(2.0), f32(-2.0), 0, 0x80000000, f32(1e30)]
    assert cvt("f32", "f32", xs, ["rmi"]) == [f32(2.0), f32(-3.0), 0, f32(-1.0), f32(1e30)]
    assert cvt("f32", "f32", xs, ["rpi"]) == [f32(3.0), f32(-2.0), f32(1.0), 0x80000000, f32(1e30)]
    assert cvt("f16", "f16", [f16(1.5), f16(-0.5)], ["rzi"]) == [f16(1.0), 0x8000]
    assert cvt("bf16", "bf16", [bf16(1.5)], ["rpi"]) == [bf16(2.0)]
    assert cvt("f64", "f64", [f64(-1.5)], ["rni"]) == [f64(-2.0)]
    assert cvt("f32", "f32", [0x00000001], ["rpi", "ftz"]) == [0]
    assert cvt("f32", "f32", [0x00000001], ["rpi"]) == [f32(1.0)]
    assert cvt("f32", "f32", [0x00000001], ["ftz"]) == [0]
    assert cvt("f32", "f32", [0x7FC00001]) == [0x7FC00001]                # plain cvt.f32.f32: a move


def test_tf32():
    # cvt.rna.tf32.f32: 10 mantissa bits, ties away from zero; rn: ties to even; low 13 bits zero
    tie = f32(1 + 2.0 ** -11)
    assert cvt1("tf32", "f32", tie, ["rna"]) == 0x3F802000
    assert cvt1("tf32", "f32", tie, ["rn"]) == 0x3F800000
    assert cvt1("tf32", "f32", tie | 1, ["rz"]) == 0x3F800000
    assert cvt1("tf32", "f32", 0x7F7FFFFF, ["rna", "satfinite"]) == 0x7F7FE000
    assert cvt1("tf32", "f32", f32(-3.0), ["rn", "relu"]) == 0


# -- packed conversions -------------------------------------------------------------------------------
def test_half2_packing_order():
    # "the value converted from input a is stored in the upper half of d and ... b in the lower half"
    a, b = np.array([f32(1.0)], np.uint32), np.array([f32(2.0)], np.uint32)
    assert int(CV.pack("bf16x2", a, b, frozenset({"rn"}))[0]) == 0x3F804000
    assert int(CV.pack("f16x2", a, b, frozenset({"rn"}))[0]) == (f16(1.0) << 16) | f16(2.0)
    r = CV.pack("bf16x2", np.array([f32(1 + 3 * 2.0 ** -8)], np.uint32), np.array([f32(-1e-39)], np.uint32),
                frozenset({"rz", "relu"}))
    assert int(r[0]) == 0x3F810000
    assert CV.pack("bf16x2", a, b, frozenset({"rn"})).dtype == np.uint32


E4M3 = [  # (value, encoding) under rn + satfinite
    (0.0, 0x00), (-0.0, 0x80), (1.0, 0x38), (448.0, 0x7E), (-448.0, 0xFE), (464.0, 0x7E),  # 464: tie -> even
    (480.0, 0x7E), (1e9, 0x7E), (INF, 0x7E), (-INF, 0xFE), (2.0 ** -9, 0x01), (2.0 ** -10, 0x00),
    (1.5 * 2.0 ** -10, 0x01), (2.0 ** -6, 0x08), (0.875 * 2.0 ** -6, 0x07), (3.0, 0x44), (-1.75, 0xBE)]
E5M2 = [
    (0.0, 0x00), (1.0, 0x3C), (57344.0, 0x7B), (61440.0, 0x7B), (-1e9, 0xFB), (INF, 0x7B), (-INF, 0xFB),
    (2.0 ** -16, 0x01), (2.0 ** -17, 0x00), (3 * 2.0 ** -17, 0x02), (2.0 ** -14, 0x04), (1.25, 0x3D)]


@pytest.mark.parametrize("dst, table", [("e4m3x2", E4M3), ("e5m2x2", E5M2)])
def test_fp8_encodings(dst, table):
    # 5.2.3: e4m3 has no infinities, NaN = 0x7F/0xFF, max 448; e5m2 max 57344. 9.7.9.21: .satfinite
    # clamps |x| > MAX_NORM (and infinities) to the signed MAX_NORM; a -> upper byte, b -> lower byte.
    vals = np.array([f32(v) for v, _ in table], np.uint32)
    out = CV.pack(dst, vals, np.array([f32(1.0)] * len(vals), np.uint32), frozenset({"rn", "satfinite"}))
    assert out.dtype == np.uint16
    one = 0x38 if dst == "e4m3x2" else 0x3C
    assert [(int(x) >> 8, int(x) & 0xFF) for x in out] == [(enc, one) for _, enc in table]
    nan = CV.pack(dst, np.array([f32(NAN), 0xFFC00000], np.uint32), np.array([0, 0], np.uint32),
                  frozenset({"rn", "satfinite"}))
    assert [int(x) >> 8 for x in nan] == [0x7F, 0x7F]
    relu = CV.pack(dst, np.array([f32(-2.0), f32(NAN)], np.uint32),
                   np.array([f32(2.0), f32(-0.0)], np.uint32), frozenset({"rn", "satfinite", "relu"}))
    assert [int(x) for x in relu] == [(0x00 << 8) | 0x40, (0x7F << 8) | 0x00]      # 2.0 is 0x40 in both


@pytest.mark.parametrize("src", ["e4m3x2", "e5m2x2"])
def test_fp8_round_trips_and_unpacks_exactly(src):
    # every non-NaN fp8 code -> f16 (exact) -> fp8 again gives the code back
    codes = np.arange(256, dtype=np.uint16)
    e, m, bias = (4, 3, 7) if src == "e4m3x2" else (5, 2, 15)
    pairs = (codes << np.uint16(8)) | codes
    h2 = CV.unpack("f16x2", src, pairs, frozenset({"rn"}))
    assert h2.dtype == np.uint32
    assert np.array_equal(h2 >> np.uint32(16), h2 & np.uint32(0xFFFF))
    for c in range(256):
        ex, man = (c >> m) & ((1 << e) - 1), c & ((1 << m) - 1)
        is_nan = (c & 0x7F) == 0x7F if src == "e4m3x2" else (ex == 31 and man != 0)
        is_inf = src == "e5m2x2" and ex == 31 and man == 0
        h = int(h2[c]) & 0xFFFF
        if is_nan:
            assert h == 0x7FFF
            continue
        if is_inf:
            assert h == (0xFC00 if c & 0x80 else 0x7C00)
            continue
        v = Fraction(man, 1 << m) * Fraction(2) ** (1 - bias) if ex == 0 else \
            (1 + Fraction(man, 1 << m)) * Fraction(2) ** (ex - bias)
        v = -v if c & 0x80 else v
        assert float(np.uint16(h).view(np.float16)) == float(v), hex(c)
        if not is_inf:
            back = CV.convert(src, "f16x2", np.array([(h << 16) | h], np.uint32),
                              frozenset({"rn", "satfinite"}))
            assert int(back[0]) == (c << 8) | c
    relu = CV.unpack("f16x2", src, np.array([(0xB8 << 8) | 0x38], np.uint16), frozenset({"rn", "relu"}))
    assert int(relu[0]) == f16(1.0 if src == "e4m3x2" else 0.5)           # negative upper half -> +0


def test_fp8_from_half2_order():
    # "the value converted from the upper 16 bits of input a is stored in the upper 8 bits of d"
    a = np.array([(f16(2.0) << 16) | f16(-1.0)], np.uint32)
    assert int(CV.convert("e4m3x2", "f16x2", a, frozenset({"rn", "satfinite"}))[0]) == (0x40 << 8) | 0xB8
    b = np.array([(bf16(1e10) << 16) | bf16(1.0)], np.uint32)
    assert int(CV.convert("e5m2x2", "bf16x2", b, frozenset({"rn", "satfinite"}))[0]) == (0x7B << 8) | 0x3C


# -- Unsupported forms ---------------------------------------------------------------------------
@pytest.mark.parametrize("dst, src, mods, text", [
    ("f32", "s32", (), r"cvt\.f32\.s32 is not supported by the emulator \(a rounding modifier"),
    ("s32", "f32", (), r"cvt\.s32\.f32 is not supported.*integer rounding modifier"),
    ("s32", "f32", ("rn",), r"cvt\.rn\.s32\.f32 is not supported"),
    ("f16", "f32", (), r"cvt\.f16\.f32 is not supported"),
    ("f32", "f32", ("rn",), r"cvt\.rn\.f32\.f32 is not supported"),
    ("f32", "f16", ("rn",), r"cvt\.rn\.f32\.f16 is not supported"),
    ("f32", "f64", ("rni",), r"cvt\.rni\.f32\.f64 is not supported"),
    ("s32", "s8", ("sat",), r"cvt\.sat\.s32\.s8 is not supported.*\.sat is illegal"),
    ("s32", "s16", ("rni",), r"cvt\.rni\.s32\.s16 is not supported"),
    ("f16", "f32", ("rm", "relu"), r"cvt\.rm\.relu\.f16\.f32 is not supported"),
    ("bf16", "f32", ("rn", "ftz", "satfinite"), r"cvt\.rn\.ftz\.satfinite\.bf16\.f32 is not supported"),
    ("f16", "f32", ("rn", "sat", "relu"), r"cvt\.rn\.sat\.relu\.f16\.f32 is not supported"),
    ("f32", "f64", ("rn", "relu"), r"cvt\.rn\.relu\.f32\.f64 is not supported"),
    ("bf16", "f32", ("rn", "sat"), r"cvt\.rn\.sat\.bf16\.f32 is not supported"),
    ("s32", "f64", ("rzi", "ftz"), r"cvt\.rzi\.ftz\.s32\.f64 is not supported"),
    ("tf32", "f32", ("rp",), r"cvt\.rp\.tf32\.f32 is not supported"),
    ("e4m3x2", "f32", ("rn", "satfinite"), r"use pack\(\)"),
    ("e4m3x2", "f16x2", ("rn",), r"cvt\.rn\.e4m3x2\.f16x2 is not supported.*satfinite"),
    ("f16x2", "f32", ("rn",), r"cvt\.rn\.f16x2\.f32 is not supported.*pack"),
    ("b32", "f32", ("rni",), r"cvt\.rni\.b32\.f32 is not supported"),
])
def test_unsupported_convert_forms(dst, src, mods, text):
    with pytest.raises(Unsupported, match=text):
        CV.convert(dst, src, np.zeros(1, np.uint32), frozenset(mods))


def test_unsupported_pack_unpack_forms():
    z = np.zeros(1, np.uint32)
    with pytest.raises(Unsupported, match=r"cvt\.rz\.satfinite\.e4m3x2\.f32 is not supported"):
        CV.pack("e4m3x2", z, z, frozenset({"rz", "satfinite"}))
    with pytest.raises(Unsupported, match=r"cvt\.rn\.e5m2x2\.f32 is not supported.*satfinite"):
        CV.pack("e5m2x2", z, z, frozenset({"rn"}))
    with pytest.raises(Unsupported, match=r"cvt\.rm\.bf16x2\.f32 is not supported"):
        CV.pack("bf16x2", z, z, frozenset({"rm"}))
    with pytest.raises(Unsupported, match=r"cvt\.bf16x2\.f32 is not supported"):
        CV.pack("bf16x2", z, z, frozenset())
    with pytest.raises(Unsupported, match=r"cvt\.rs\.f16x2\.f32 is not supported"):
        CV.pack("f16x2", z, z, frozenset({"rs"}))
    with pytest.raises(Unsupported, match=r"cvt\.f16x2\.e4m3x2 is not supported.*\.rn is required"):
        CV.unpack("f16x2", "e4m3x2", z, frozenset())
    with pytest.raises(Unsupported, match=r"cvt\.f16x2\.f16x2 is not supported"):
        CV.unpack("f16x2", "f16x2", z, frozenset())
