"""wgmma K-step numerics (fa4_mlir.emu.isa.mma_numerics) against an H100, bit for bit.

``data/mma_numerics_h100.npz`` holds 2,710 single-output vectors measured on an H100 80GB HBM3 (sm_90a,
driver 580), chosen from 7.3 million probe outputs so that every rival model the probe ruled out fails
on some of them (float64 summation rounded once, F - 1 / F + 1 alignment bits, no 2^-158 clamp, a
2^-157 clamp, floor instead of truncation toward zero, round to nearest, C's own exponent below -126,
the product's own exponent as its tag, true exponents for subnormal inputs, -0 results, the 14-bit fp8
step left out, a 24- or 14-bit truncation before an f16 result), plus a spread over the eight input
regimes. Groups (``groups``: "name,kind,acc,scale_a,scale_d"): f32.bf16 (also with imm-scale-a = -1,
with A from registers, with scale-d = 0), f32.f16, f16.f16 (also scale-d = 0), f32.e4m3 (also
scale-d = 0), f32.e5m2, f16.e4m3, f32.tf32 (also scale-d = 0; the A and B words keep the random low 13
bits the probe put in half of its tf32 inputs: the tensor core ignores them). ``<name>_a`` / ``_b``:
the K raw input elements of A's row and B's column (uint16 / uint8 / uint32), ``_c``: the accumulator
bits (absent for scale-d = 0), ``_d``: what the H100 wrote.

The probe: one CUDA kernel per form, 128 threads, no other arithmetic. It copies a 4 KiB image of A
(64 x 32 bytes) and B (64 x 32 bytes) in the no-swizzle K-major layout (8-row x 16-byte core matrices,
LBO 128 bytes along K, SBO 256 bytes along M/N) into shared memory, ``fence.proxy.async``, loads the
accumulator fragment from global memory, then ``wgmma.fence``; ``wgmma.mma_async.sync.aligned.
m64n64k16.f32.bf16.bf16 {d0..d31}, descA, descB, p, 1, 1, 0, 0`` (one instruction: cuobjdump shows one
HGMMA.64x64x16 / QGMMA.64x64x32 per kernel); ``commit_group``; ``wait_group 0``; stores the fragment
raw. The inputs mix eight regimes per CTA: wide exponent spreads, cancelling halves, C = -(sum) +- a
few ulps, sparse rows with C far above or below the products and power-of-two significands, tiny
(subnormal inputs and results), huge (f32 overflow), inf/NaN/signed zeros, and near-ulp ties. Every
output (4,718,592 with C, 2,621,440 with scale-d = 0) agrees with ``dot_accumulate``.
"""

from __future__ import annotations

import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from fa4_mlir.emu.isa.mma_numerics import KINDS, dot_accumulate
from fa4_mlir.emu.ops.wgmma import to_float64

DATA = Path(__file__).parent / "data" / "mma_numerics_h100.npz"


def _groups():
    z = np.load(DATA)
    for line in z["groups"]:
        name, kind, acc, scale_a, scale_d = str(line).split(",")
        yield name, kind, acc, int(scale_a), scale_d == "1", z


# -- an independent reference: the model of the module docstring in exact rational arithmetic ---------
EMIN = {"bf16": -126, "f16": -14, "tf32": -126, "e4m3": -6, "e5m2": -14}
F_BITS = {"bf16": 25, "f16": 25, "tf32": 25, "e4m3": 13, "e5m2": 13}


def _floor_log2(x: Fraction) -> int:
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    return e


def _trunc_to(x: Fraction, g: int) -> Fraction:
    """x truncated toward zero to a multiple of 2^g."""
    q = x / Fraction(2) ** g
    n = q.numerator // q.denominator if q >= 0 else -((-q.numerator) // q.denominator)
    return n * Fraction(2) ** g


def _round_sig(x: Fraction, p: int, emin: int, mode: str) -> Fraction:
    """x rounded to p significant bits, exponent at least emin (subnormal grid), toward zero or to
    nearest even."""
    if x == 0:
        return x
    g = max(_floor_log2(x), emin) - (p - 1)
    if mode == "rz":
        return _trunc_to(x, g)
    q = x / Fraction(2) ** g
    n = q.numerator // q.denominator  # floor
    r = q - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    return n * Fraction(2) ** g


def reference(a, b, c, kind, acc):
    """One output: a, b lists of K Python floats (inf/nan allowed), c a float (None: scale-d false).
    Returns the raw result bits (int)."""
    c = 0.0 if c is None else c
    prods = [x * y for x, y in zip(a, b)]  # Python float products: only used for the special values
    nan_out = 0x7FFFFFFF if acc == "f32" else 0x7FFF
    finite = all(np.isfinite(x) for x in list(a) + list(b) + [c])
    if not finite:
        with np.errstate(invalid="ignore"):
            s = float(np.sum(np.array(prods + [c], np.float64)))
        if np.isnan(s):
            return nan_out
        if acc == "f32":
            return 0x7F800000 if s > 0 else 0xFF800000
        return 0x7C00 if s > 0 else 0xFC00
    terms, tags = [], []
    for x, y in zip(a, b):
        if x != 0 and y != 0:
            terms.append(Fraction(x) * Fraction(y))
            tags.append(max(_floor_log2(Fraction(x)), EMIN[kind]) + max(_floor_log2(Fraction(y)), EMIN[kind]))
    if c != 0:
        terms.append(Fraction(c))
        tags.append(max(_floor_log2(Fraction(c)), -126))
    if not terms:
        return 0
    g = max(max(tags) - F_BITS[kind], -158)
    v = sum(_trunc_to(t, g) for t in terms)
    if acc == "f32":
        if kind in ("e4m3", "e5m2"):
            v = _round_sig(v, 14, -100000, "rz")
        v = _round_sig(v, 24, -126, "rz")
        if abs(v) >= 2 ** 128:
            return 0x7F800000 if v > 0 else 0xFF800000
        bits = struct.unpack("<I", struct.pack("<f", float(v)))[0]
    else:
        v = _round_sig(v, 11, -14, "rn")
        if abs(v) >= 2 ** 16:
            return 0x7C00 if v > 0 else 0xFC00
        bits = int(np.array(float(v), np.float16).view(np.uint16))
    return 0 if bits in (0x80000000, 0x8000) else bits


def _one(a, b, c, kind, acc="f32"):
    """dot_accumulate of a single output from Python floats; c: float, or None for scale-d false."""
    cb = None
    if c is not None:
        dt = np.float32 if acc == "f32" else np.float16
        cb = np.array([[c]], dt).view(np.uint32 if acc == "f32" else np.uint16)
    return int(dot_accumulate(np.array([a], np.float64), np.array([b], np.float64), cb, kind, acc)[0, 0])


def f32(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


# -- the H100's vectors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("group", [g[0] for g in _groups()])
def test_h100_vectors(group):
    for name, kind, acc, scale_a, with_c, z in _groups():
        if name != group:
            continue
        a = to_float64(z[name + "_a"], kind) * scale_a
        b = to_float64(z[name + "_b"], kind)
        c = z[name + "_c"] if with_c else None
        want = z[name + "_d"]
        got = np.array([dot_accumulate(a[i:i + 1], b[i:i + 1], None if c is None else c[i:i + 1, None], kind,
                                       acc)[0, 0] for i in range(len(want))])
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, (f"{name}: {bad.size} of {len(want)} differ from the H100, first case "
                               f"{bad[0]}: got 0x{int(got[bad[0]]):x}, H100 0x{int(want[bad[0]]):x}")


def test_h100_vectors_batched():
    """The same vectors through one call per group (rows x cols), reading the diagonal: the function's
    per-element results do not depend on the other rows and columns of the call."""
    for name, kind, acc, scale_a, with_c, z in _groups():
        a = to_float64(z[name + "_a"], kind) * scale_a
        b = to_float64(z[name + "_b"], kind)
        n = len(a)
        c = None
        if with_c:
            c = np.zeros((n, n), z[name + "_c"].dtype)
            c[np.arange(n), np.arange(n)] = z[name + "_c"]
        got = np.diagonal(dot_accumulate(a, b, c, kind, acc))
        assert (got == z[name + "_d"]).all(), name


def test_reference_agrees_with_h100_sample():
    """The exact-rational reference above reproduces the H100's vectors (so the property test below
    checks dot_accumulate against something proven on the hardware)."""
    for name, kind, acc, scale_a, with_c, z in _groups():
        a = to_float64(z[name + "_a"], kind) * scale_a
        b = to_float64(z[name + "_b"], kind)
        dt = np.float32 if acc == "f32" else np.float16
        for i in range(0, len(a), 7):
            c = float(z[name + "_c"][i:i + 1].view(dt)[0]) if with_c else None
            assert reference(list(a[i]), list(b[i]), c, kind, acc) == int(z[name + "_d"][i]), (name, i)


# -- random inputs against the reference -----------------------------------------------------------------
def _random_bits(rng, kind, shape):
    if kind in ("e4m3", "e5m2"):
        bits = rng.integers(0, 256, shape, dtype=np.uint64)
        bits = np.where(rng.random(shape) < 0.1, 0, bits)
        nan = 0x7F if kind == "e4m3" else 0x7C
        return np.where((bits & 0x7F) >= nan, bits & 0x3F, bits)  # finite only
    if kind == "tf32":
        exp = rng.integers(100, 150, shape, dtype=np.uint64)
        return (rng.integers(0, 2, shape, dtype=np.uint64) << np.uint64(31) | exp << np.uint64(23)
                | rng.integers(0, 1 << 23, shape, dtype=np.uint64))
    lo, hi = (1, 30) if kind == "f16" else (100, 150)
    m = 10 if kind == "f16" else 7
    exp = rng.integers(lo, hi, shape, dtype=np.uint64)
    exp = np.where(rng.random(shape) < 0.05, 0, exp)
    return (rng.integers(0, 2, shape, dtype=np.uint64) << np.uint64(15) | exp << np.uint64(m)
            | rng.integers(0, 1 << m, shape, dtype=np.uint64))


@pytest.mark.parametrize("kind,acc", [("bf16", "f32"), ("f16", "f32"), ("tf32", "f32"), ("e4m3", "f32"),
                                      ("e5m2", "f32"), ("f16", "f16"), ("e4m3", "f16"), ("e5m2", "f16")])
def test_random_against_reference(kind, acc):
    rng = np.random.default_rng(hash((kind, acc)) % 2**32)
    k = {"bf16": 16, "f16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}[kind]
    for trial in range(6):
        a = to_float64(_random_bits(rng, kind, (3, k)), kind)
        b = to_float64(_random_bits(rng, kind, (5, k)), kind)
        if trial % 2:  # cancellation: the second half of each A row negates the first
            a[:, k // 2:] = -a[:, :k // 2]
            b[:, k // 2:] = b[:, :k // 2] * (1 + (rng.random((5, k // 2)) < 0.3) * 2.0 ** -7)
        ref_ab = a @ b.T
        mag = np.abs(ref_ab) + 1e-30
        scale = 2.0 ** rng.integers(-30, 30, (3, 5))
        if acc == "f32":
            cv = (rng.standard_normal((3, 5)) * mag * scale).astype(np.float32)
            cv[0, 0] = 0.0
            c = cv.view(np.uint32)
        else:
            cv = np.clip(rng.standard_normal((3, 5)) * mag * scale, -6e4, 6e4).astype(np.float16)
            c = cv.view(np.uint16)
        got = dot_accumulate(a, b, c, kind, acc)
        for i in range(3):
            for j in range(5):
                want = reference(list(a[i]), list(b[j]), float(cv[i, j]), kind, acc)
                assert int(got[i, j]) == want, (kind, acc, trial, i, j, hex(int(got[i, j])), hex(want))


# -- the model's rules, one at a time (expected bits worked out by hand) --------------------------------
def test_products_below_the_window_are_dropped():
    # c = 1, sixteen products of 2^-26: each is below the 2^-25 grid (E = 0, F = 25) and truncated to 0,
    # so D = 1.0 although the exact sum 1 + 2^-22 is an f32.
    assert _one([2.0 ** -13] * 16, [2.0 ** -13] * 16, 1.0, "bf16") == 0x3F800000
    # the same products without c: E = -26, all kept: 2^-22 exactly
    assert _one([2.0 ** -13] * 16, [2.0 ** -13] * 16, None, "bf16") == f32(2.0 ** -22)
    # a negative product below the grid does not pull the result under 1.0 either
    assert _one([-(2.0 ** -15)] + [0.0] * 15, [2.0 ** -15] + [0.0] * 15, 1.0, "bf16") == 0x3F800000


def test_result_rounds_toward_zero():
    # 1 + 1.5 * 2^-24 (the product 3 * 2^-25 sits on the grid): RZ gives 1.0, RN would give 1 + 2^-23
    assert _one([1.5 * 2.0 ** -12] + [0.0] * 15, [2.0 ** -12] + [0.0] * 15, 1.0, "bf16") == 0x3F800000
    assert _one([-1.5 * 2.0 ** -12] + [0.0] * 15, [2.0 ** -12] + [0.0] * 15, -1.0, "bf16") == 0xBF800000
    # 1 + 2^-23 + 2^-24: RZ keeps 1 + 2^-23
    a, b = [2.0 ** -11, 2.0 ** -12] + [0.0] * 14, [2.0 ** -12] * 2 + [0.0] * 14
    assert _one(a, b, 1.0, "bf16") == 0x3F800001


def test_cancellation_exposes_the_truncation():
    # 2^10 - 2^10 + 2^-20 * (1 + 2^-7): the small term lies below 2^(10-25) and is lost: +0
    a = [1.0, -1.0, 2.0 ** -20] + [0.0] * 13
    b = [2.0 ** 10, 2.0 ** 10, 1.0 + 2.0 ** -7] + [0.0] * 13
    assert _one(a, b, None, "bf16") == 0
    # the product's tag is e(a) + e(b), not its own exponent: 1.5 * 1.5 = 2.25 has tag 0, so the grid is
    # 2^-25 (not 2^-24) and 2^-25 survives next to it
    assert _one([1.5, 2.0 ** -12] + [0.0] * 14, [1.5, 2.0 ** -13] + [0.0] * 14, None, "bf16") == f32(2.25)
    assert _one([1.5, -1.5, 2.0 ** -12] + [0.0] * 13, [1.5, 1.5, 2.0 ** -13] + [0.0] * 13, None,
                "bf16") == f32(2.0 ** -25)


def test_subnormal_inputs_count_as_the_minimum_exponent():
    # f16 subnormal 2^-20 has tag -14: with b = 2^6 the product 2^-14 has tag -8, the grid 2^-33, and
    # the second product 2^-35 is dropped (with its true exponent the grid would be 2^-39 and keep it)
    a = [2.0 ** -20, 2.0 ** -20] + [0.0] * 14
    b = [2.0 ** 6, 2.0 ** -15] + [0.0] * 14
    assert _one(a, b, None, "f16") == f32(2.0 ** -14)
    # an f32 subnormal C counts as 2^-126: it sets the grid to 2^-151
    # (and drops a -2^-152 product that C's own exponent, -130, would keep: 2^-130 - 2^-149 after RZ)
    a, b = [-(2.0 ** -70)] + [0.0] * 15, [2.0 ** -82] + [0.0] * 15
    assert _one(a, b, 2.0 ** -130, "bf16") == f32(2.0 ** -130)


def test_grid_never_below_2_to_minus_158():
    # products with tag -136: the grid would be 2^-161 but stops at 2^-158; 2^-159 is dropped.
    # 2^-136 - 2^-149 - 2^-159: exact RZ on the subnormal grid would give 2^-136 - 2 * 2^-149
    a = [2.0 ** -68, -(2.0 ** -75), -(2.0 ** -80)] + [0.0] * 13
    b = [2.0 ** -68, 2.0 ** -74, 2.0 ** -79] + [0.0] * 13
    assert _one(a, b, None, "bf16") == (1 << 13) - 1
    assert reference(a, b, None, "bf16", "f32") == (1 << 13) - 1


def test_zero_results_are_plus_zero():
    neg0 = [-0.0] * 16
    assert _one(neg0, [1.0] * 16, -0.0, "bf16") == 0  # every product -0 and C = -0
    assert _one(neg0, [1.0] * 16, None, "bf16") == 0
    assert _one([1.0, -1.0] + [0.0] * 14, [3.0, 3.0] + [0.0] * 14, None, "bf16") == 0  # exact cancellation
    assert _one([-(2.0 ** -100)] + [0.0] * 15, [2.0 ** -100] + [0.0] * 15, None, "bf16") == 0  # below f32
    assert _one([-0.0] * 16, [1.0] * 16, -0.0, "f16", "f16") == 0
    assert _one([-(2.0 ** -14)] + [0.0] * 15, [2.0 ** -12] + [0.0] * 15, None, "f16", "f16") == 0


def test_specials():
    inf, nan = float("inf"), float("nan")
    z = [0.0] * 15
    assert _one([nan] + z, [1.0] + z, 1.0, "bf16") == 0x7FFFFFFF
    assert _one([inf] + z, [0.0] + z, 1.0, "bf16") == 0x7FFFFFFF  # inf * 0
    assert _one([inf, inf] + z[1:], [1.0, -1.0] + z[1:], 1.0, "bf16") == 0x7FFFFFFF  # inf - inf
    assert _one([inf] + z, [1.0] + z, -inf, "bf16") == 0x7FFFFFFF  # inf + (-inf) from C
    assert _one([inf] + z, [-2.0] + z, 5.0, "bf16") == 0xFF800000
    assert _one([1.0] + z, [1.0] + z, -inf, "bf16") == 0xFF800000
    assert _one([1.0] + z, [1.0] + z, nan, "bf16") == 0x7FFFFFFF
    assert _one([inf] + z, [1.0] + z, 1.0, "f16", "f16") == 0x7C00
    assert _one([nan] + z, [1.0] + z, 1.0, "f16", "f16") == 0x7FFF
    # e4m3 has no infinity: 0x7F is its NaN
    nan8 = float(to_float64(np.array([0x7F]), "e4m3")[0])
    assert _one([nan8] + [0.0] * 31, [1.0] * 32, 0.0, "e4m3") == 0x7FFFFFFF


def test_overflow():
    z = [0.0] * 15
    assert _one([2.0 ** 127] + z, [2.0] + z, None, "bf16") == 0x7F800000
    assert _one([-(2.0 ** 127)] + z, [2.0] + z, 0.0, "bf16") == 0xFF800000
    # no overflow inside the sum: 2^130 - 2^130 + 2^110 (2^110 is inside the window 2^(130 - 25))
    assert _one([2.0 ** 65, -(2.0 ** 65), 2.0 ** 55] + z[2:], [2.0 ** 65, 2.0 ** 65, 2.0 ** 55] + z[2:], None,
                "bf16") == f32(2.0 ** 110)
    # the largest f32 plus half an ulp: IEEE RN gives inf, the tensor core truncates to 0x7F7FFFFF
    maxf = float(np.array([0x7F7FFFFF], np.uint32).view(np.float32)[0])
    assert _one([2.0 ** 103] + z, [1.0] + z, maxf, "bf16") == 0x7F7FFFFF
    # f16 accumulator: 65504 + 16 = 65520 rounds to nearest even, 65536: inf
    assert _one([16.0] + z, [1.0] + z, 65504.0, "f16", "f16") == 0x7C00
    assert _one([8.0] + z, [1.0] + z, 65504.0, "f16", "f16") == 0x7BFF


def test_fp8_keeps_14_bits():
    # e4m3 / e5m2 results are truncated to 14 significant bits, even the accumulator passed through
    # with zero products: C = 1 + 2^-20 comes back as 1.0; C = 1 + 2^-13 is kept
    zeros = [0.0] * 32
    assert _one(zeros, zeros, 1.0 + 2.0 ** -20, "e4m3") == 0x3F800000
    assert _one(zeros, zeros, 1.0 + 2.0 ** -13, "e5m2") == f32(1.0 + 2.0 ** -13)
    # 16-bit inputs pass the full f32 through
    assert _one([0.0] * 16, [0.0] * 16, 1.0 + 2.0 ** -20, "bf16") == f32(1.0 + 2.0 ** -20)
    # the grid is E - 13: a product 2^-14 next to C = 1 is dropped
    assert _one([2.0 ** -7] + [0.0] * 31, [2.0 ** -7] + [0.0] * 31, 1.0, "e4m3") == 0x3F800000
    assert _one([2.0 ** -6] + [0.0] * 31, [2.0 ** -7] + [0.0] * 31, 1.0, "e4m3") == f32(1.0 + 2.0 ** -13)


def test_f16_accumulator_rounds_to_nearest_even():
    z = [0.0] * 15
    assert _one([2.0 ** -6] + z, [2.0 ** -5] + z, 1.0, "f16", "f16") == 0x3C00  # 1 + 2^-11: tie, even
    assert _one([3 * 2.0 ** -7] + z, [2.0 ** -5] + z, 1.0, "f16", "f16") == 0x3C01  # 1 + 0.75 ulp
    assert _one([3 * 2.0 ** -6] + z, [2.0 ** -5] + z, 1.0, "f16", "f16") == 0x3C02  # 1 + 1.5 ulp
    assert _one([2.0 ** -6] + z, [2.0 ** -5] + z, 1.0 + 2.0 ** -10, "f16", "f16") == 0x3C02  # tie to even
    # e4m3 into f16: no 14-bit truncation first. C = 2 - 2^-10 plus 2^-9 + 2^-13 is 2 + 2^-10 + 2^-13,
    # above the f16 midpoint 2 + 2^-10: 2 + 2^-9. Truncated to 14 bits first it would be the tie 2 + 2^-10,
    # rounding to the even 2.0.
    a = [2.0 ** -4, 2.0 ** -6] + [0.0] * 30
    b = [2.0 ** -5, 2.0 ** -7] + [0.0] * 30
    assert _one(a, b, 2.0 - 2.0 ** -10, "e4m3", "f16") == 0x4001


def test_shapes_and_kinds():
    rng = np.random.default_rng(1)
    a = np.round(rng.standard_normal((16, 16)) * 8) / 8
    b = np.round(rng.standard_normal((256, 16)) * 8) / 8
    c = (np.round(rng.standard_normal((16, 256)) * 32) / 8).astype(np.float32).view(np.uint32)
    out = dot_accumulate(a, b, c, "bf16")
    assert out.shape == (16, 256) and out.dtype == np.uint32
    # small integers: the sums are exact
    assert (out.view(np.float32) == (a @ b.T + c.view(np.float32)).astype(np.float32)).all()
    out16 = dot_accumulate(a, b, None, "f16", "f16")
    assert out16.dtype == np.uint16 and (out16.view(np.float16) == (a @ b.T).astype(np.float16)).all()
    assert set(KINDS) == {"bf16", "f16", "tf32", "e4m3", "e5m2"}
    assert dot_accumulate(a[:, :8], b[:, :8], None, ("e4m3", "e5m2")).shape == (16, 256)
    with pytest.raises(ValueError):
        dot_accumulate(a, b, c, "f32")
    with pytest.raises(ValueError):
        dot_accumulate(a, b, c, ("bf16", "f16"))
    with pytest.raises(ValueError):
        dot_accumulate(a, b, c, "bf16", "f16")  # wgmma has no bf16 -> f16 form
    with pytest.raises(ValueError):
        dot_accumulate(a, b, c[:, :8], "bf16")
