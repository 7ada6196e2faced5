"""fa4_mlir.emu.isa.integers against the PTX ISA (9.0) text and against values measured on an H100.

Edge cases come from the ISA's descriptions and pseudo-code (sections cited per test); random inputs are
checked against Python-int references written from the ISA's definitions. The rules the ISA leaves to
the machine (div/rem by zero) and the 24-bit operand rule of mul24 are pinned to what an H100 returned:
a differential probe ran 248 instruction forms (every type and mode of the instructions here) as PTX
kernels on an H100 (sm_90, driver 580.159.04, JIT from PTX 8.5), 837,934 input tuples of edge values
and seeded random values, and compared every result with this module: all equal, except the inputs
the module rejects with ProtocolError (see those tests).
"""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir.emu.errors import ProtocolError, Unsupported
from fa4_mlir.emu.isa import integers as I

U = {16: np.uint16, 32: np.uint32, 64: np.uint64}
NONE = frozenset()


def arr(bits, *values):
    return np.array([v & ((1 << bits) - 1) for v in values], U[bits])


def ints(a):
    return [int(v) for v in a]


def run(op, type_, mods, *operands):
    return I.arith(op, type_, list(operands), frozenset(mods))


def signed(v, bits):
    return v - (1 << bits) if v >> (bits - 1) else v


def sample(rng, bits, n):
    """Seeded values: edges, small, small negative and random ``bits``-bit patterns."""
    m = (1 << bits) - 1
    h = 1 << (bits - 1)
    edges = [0, 1, 2, m, m - 1, h, h - 1, h + 1, 7, m - 6]
    rand = [int(x) for x in rng.integers(0, 1 << 62, n)]
    rand = [(x * 4 + int(y)) & m for x, y in zip(rand, rng.integers(0, 4, n))]
    small = [int(x) & m for x in rng.integers(-9, 10, n)]
    return edges + [rand[i] if i % 3 else small[i] for i in range(n)]


# -- Python-int references of the ISA definitions ---------------------------------------------------
def ref(op, type_, mods, vals):
    kind, bits = type_[0], int(type_[1:])
    m = (1 << bits) - 1
    x = [signed(v, bits) if kind == "s" else v for v in vals]
    if op == "add":
        return (x[0] + x[1]) & m
    if op == "sub":
        return (x[0] - x[1]) & m
    if op in ("mul", "mad"):
        t = x[0] * x[1]
        mode = next(iter(set(mods)))
        wide = mode == "wide"
        r = t if wide else (t >> bits if mode == "hi" else t)
        if op == "mad":
            r += vals[2]
        return r & ((1 << 2 * bits) - 1 if wide else m)
    if op in ("div", "rem"):  # by zero: all ones (measured on an H100)
        if x[1] == 0:
            return m
        q = abs(x[0]) // abs(x[1]) * (1 if (x[0] < 0) == (x[1] < 0) else -1)  # toward zero
        return (q if op == "div" else x[0] - q * x[1]) & m
    if op == "min":
        return min(x[0], x[1]) & m
    if op == "max":
        return max(x[0], x[1]) & m
    if op == "shl":
        return (vals[0] << min(vals[1], bits)) & m
    if op == "shr":  # clamped to N; Python's >> on a negative int fills with the sign
        return (x[0] >> min(vals[1], bits)) & m
    raise AssertionError(op)


FORMS = [(op, (), 2) for op in ("add", "sub", "div", "rem", "min", "max")] + \
    [("mul", ("lo",), 2), ("mul", ("hi",), 2), ("mad", ("lo",), 3), ("mad", ("hi",), 3)]
TYPES = [f"{k}{b}" for k in "su" for b in (16, 32, 64)]


@pytest.mark.parametrize("type_", TYPES)
@pytest.mark.parametrize("op,mods,n", FORMS)
def test_random_against_python_ints(op, mods, n, type_):
    bits = int(type_[1:])
    rng = np.random.default_rng(sum(map(ord, op + type_)))
    cols = [sample(rng, bits, 150) for _ in range(n)]
    cols[1] = cols[1][::-1]  # pair edges with other edges
    got = run(op, type_, mods, *(np.array(c, U[bits]) for c in cols))
    assert got.dtype == U[bits]
    want = [ref(op, type_, mods, vals) for vals in zip(*cols)]
    assert ints(got) == want


@pytest.mark.parametrize("type_", ["s16", "u16", "s32", "u32"])
@pytest.mark.parametrize("op", ["mul", "mad"])
def test_random_wide_against_python_ints(op, type_):
    bits = int(type_[1:])
    rng = np.random.default_rng(7)
    cols = [sample(rng, bits, 200), sample(rng, bits, 200)[::-1]]
    operands = [np.array(c, U[bits]) for c in cols]
    if op == "mad":
        cols.append(sample(rng, 2 * bits, 200))
        operands.append(np.array(cols[2], U[2 * bits]))
    got = run(op, type_, ["wide"], *operands)
    assert got.dtype == U[2 * bits]
    assert ints(got) == [ref(op, type_, ["wide"], v) for v in zip(*cols)]


@pytest.mark.parametrize("type_", ["b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64"])
def test_random_shifts_against_python_ints(type_):
    bits = int(type_[1:])
    rng = np.random.default_rng(bits)
    vals = sample(rng, bits, 200)
    amounts = [0, 1, bits - 1, bits, bits + 1, 255, 2**32 - 1] + [int(v) for v in rng.integers(0, 80, 203)]
    a, s = np.array(vals, U[bits]), np.array(amounts[:len(vals)], np.uint32)
    if type_[0] == "b":
        want = [ref("shl", "u" + type_[1:], (), v) for v in zip(vals, ints(s))]
        assert ints(run("shl", type_, (), a, s)) == want
    ref_type = type_ if type_[0] == "s" else "u" + type_[1:]
    assert ints(run("shr", type_, (), a, s)) == [ref("shr", ref_type, (), v) for v in zip(vals, ints(s))]


# -- add/sub/mad saturation, mul.wide, mul.hi.64 (9.7.1.1-9.7.1.4) ----------------------------------
def test_wraparound_and_saturation():
    assert ints(run("add", "u32", (), arr(32, 0xFFFFFFFF), arr(32, 2))) == [1]
    assert ints(run("sub", "u16", (), arr(16, 0), arr(16, 1))) == [0xFFFF]
    assert ints(run("add", "s32", (), arr(32, 2**31 - 1), arr(32, 1))) == [0x80000000]
    # .sat "limits result to MININT..MAXINT (no overflow)", .s32 only
    assert ints(run("add", "s32", ["sat"], arr(32, 2**31 - 1, -2**31, 5), arr(32, 1, -1, -7))) == \
        [0x7FFFFFFF, 0x80000000, (-2) & 0xFFFFFFFF]
    assert ints(run("sub", "s32", ["sat"], arr(32, -2**31, 2**31 - 1), arr(32, 1, -1))) == \
        [0x80000000, 0x7FFFFFFF]
    # mad.hi.sat.s32: the high half plus c, saturated
    big = arr(32, 2**31 - 1)
    assert ints(run("mad", "s32", ["hi", "sat"], big, big, arr(32, 2**31 - 1))) == [0x7FFFFFFF]
    assert ints(run("mad", "s32", ["hi", "sat"], arr(32, -2**31), big, arr(32, -2**31))) == [0x80000000]
    hi = (-2**31 * (2**31 - 1)) >> 32
    assert ints(run("mad", "s32", ["hi"], arr(32, -2**31), big, arr(32, -2**31))) == \
        [(hi - 2**31) & 0xFFFFFFFF]


def test_mul_wide_sign_extends():
    # "If .wide is specified, then d is twice as wide as a and b to receive the full result"
    r = run("mul", "s32", ["wide"], arr(32, -1, -2**31, 3), arr(32, 1, -2**31, -5))
    assert r.dtype == np.uint64
    assert ints(r) == [2**64 - 1, 2**62, (-15) & (2**64 - 1)]
    assert ints(run("mul", "u32", ["wide"], arr(32, 2**32 - 1), arr(32, 2**32 - 1))) == [(2**32 - 1) ** 2]
    assert ints(run("mul", "s16", ["wide"], arr(16, -1), arr(16, 2))) == [0xFFFFFFFE]
    assert ints(run("mad", "s16", ["wide"], arr(16, -1), arr(16, 2), arr(32, 3))) == [1]


@pytest.mark.parametrize("kind", ["u", "s"])
def test_mul_hi_64_against_python_ints(kind):
    rng = np.random.default_rng(64)
    a = sample(rng, 64, 400)
    b = sample(rng, 64, 400)[::-1]
    conv = (lambda v: signed(v, 64)) if kind == "s" else (lambda v: v)
    want = [((conv(x) * conv(y)) >> 64) & (2**64 - 1) for x, y in zip(a, b)]
    assert ints(run("mul", f"{kind}64", ["hi"], np.array(a, np.uint64), np.array(b, np.uint64))) == want


def test_mul24_mad24_ignore_high_byte():
    # 9.7.1.5/6: "the product of two 24-bit integer values held in 32-bit source registers"; an H100
    # ignores bits 31..24 and sign-extends bit 23 for .s32.
    a, b = arr(32, 0xFF000003, 0x00800000, 0x7FFFFF), arr(32, 0x12000005, 2, 0x7FFFFF)
    assert ints(run("mul24", "u32", ["lo"], a, b)) == [15, 0x01000000, (0x7FFFFF**2) & 0xFFFFFFFF]
    assert ints(run("mul24", "s32", ["lo"], a, b)) == [15, (-2**24) & 0xFFFFFFFF, (0x7FFFFF**2) & 0xFFFFFFFF]
    assert ints(run("mul24", "u32", ["hi"], a, b)) == [0, 0x100, (0x7FFFFF**2 >> 16) & 0xFFFFFFFF]
    assert ints(run("mul24", "s32", ["hi"], arr(32, 0x800000), arr(32, 0x7FFFFF))) == \
        [((-2**23 * 0x7FFFFF) >> 16) & 0xFFFFFFFF]
    assert ints(run("mad24", "u32", ["lo"], a, b, arr(32, 1, 1, 1))) == \
        [16, 0x01000001, (0x7FFFFF**2 + 1) & 0xFFFFFFFF]
    m = arr(32, 0x7FFFFF)
    assert ints(run("mad24", "s32", ["hi", "sat"], m, m, arr(32, 2**31 - 1))) == [0x7FFFFFFF]


def test_sad_abs_neg_min_max():
    # 9.7.1.7 sad: d = c + ((a<b) ? b-a : a-b), signed or unsigned comparison
    assert ints(run("sad", "s32", (), arr(32, -3), arr(32, 4), arr(32, 10))) == [17]
    assert ints(run("sad", "u32", (), arr(32, -3), arr(32, 4), arr(32, 10))) == [3]  # 0xfffffffd - 4 + 10
    assert ints(run("abs", "s32", (), arr(32, -5, 5, -2**31))) == [5, 5, 0x80000000]  # |MIN| wraps
    assert ints(run("neg", "s16", (), arr(16, 1, 0, -2**15))) == [0xFFFF, 0, 0x8000]
    assert ints(run("min", "s32", (), arr(32, -1), arr(32, 1))) == [0xFFFFFFFF]
    assert ints(run("min", "u32", (), arr(32, -1), arr(32, 1))) == [1]
    # .relu "clamps the result to 0 if negative"
    assert ints(run("max", "s32", ["relu"], arr(32, -1, -9), arr(32, -3, 4))) == [0, 4]
    assert ints(run("min", "s32", ["relu"], arr(32, -1), arr(32, 4))) == [0]


def test_16x2_forms():
    a, b = arr(32, 0x7FFF_FFFF), arr(32, 0x0001_0002)
    assert ints(run("add", "u16x2", (), a, b)) == [0x8000_0001]
    assert ints(run("min", "s16x2", (), a, b)) == [0x0001_FFFF]
    assert ints(run("min", "u16x2", (), a, b)) == [0x0001_0002]
    assert ints(run("max", "s16x2", ["relu"], arr(32, 0x8000_FFFF), arr(32, 0x8001_FFFE))) == [0]


# -- div/rem (9.7.1.8/9): truncation toward zero; by zero as an H100 does it ------------------------
def test_div_rem_signed_rules():
    a, b = arr(32, -7, 7, -7, 7, -2**31, -2**31), arr(32, 2, -2, -2, 2, -1, 1)
    assert [signed(v, 32) for v in ints(run("div", "s32", (), a, b))] == [-3, -3, 3, 3, -2**31, -2**31]
    assert [signed(v, 32) for v in ints(run("rem", "s32", (), a, b))] == [-1, 1, -1, 1, 0, 0]
    assert ints(run("div", "s64", (), arr(64, -2**63), arr(64, -1))) == [2**63]


@pytest.mark.parametrize("type_", TYPES)
def test_division_by_zero_is_all_ones(type_):
    bits = int(type_[1:])
    a, z = arr(bits, 0, 1, 5, -7, -1, -2**(bits - 1)), arr(bits, 0, 0, 0, 0, 0, 0)
    ones = (1 << bits) - 1
    assert ints(run("div", type_, (), a, z)) == [ones] * 6
    assert ints(run("rem", type_, (), a, z)) == [ones] * 6


# -- shifts (9.7.8.7-9) --------------------------------------------------------------------------
def test_shift_amounts_clamp_to_width():
    x = arr(32, 0x80000001)
    amounts = np.array([0, 1, 31, 32, 33, 255, 2**32 - 1], np.uint32)
    xs = np.repeat(x, len(amounts))
    assert ints(run("shl", "b32", (), xs, amounts)) == [0x80000001, 2, 0x80000000, 0, 0, 0, 0]
    assert ints(run("shr", "u32", (), xs, amounts)) == [0x80000001, 0x40000000, 1, 0, 0, 0, 0]
    assert ints(run("shr", "b32", (), xs, amounts)) == [0x80000001, 0x40000000, 1, 0, 0, 0, 0]
    # signed shifts fill with the sign bit, also past the width
    assert ints(run("shr", "s32", (), xs, amounts)) == \
        [0x80000001, 0xC0000000, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF]
    assert ints(run("shr", "s32", (), arr(32, 0x7FFFFFFF), np.array([33], np.uint32))) == [0]
    assert ints(run("shr", "s16", (), arr(16, 0x8000), np.array([16], np.uint32))) == [0xFFFF]
    assert ints(run("shl", "b64", (), arr(64, 1), np.array([63], np.uint32))) == [2**63]
    # the amount operand is u32: a wider operand is chopped to its low 32 bits
    assert ints(run("shl", "b32", (), arr(32, 1), np.array([2**32 + 3], np.uint64))) == [8]


def test_shf_clamp_and_wrap():
    a, b = arr(32, 0x89ABCDEF), arr(32, 0x01234567)
    c = np.array([0, 4, 32, 33, 36, 2**32 - 1], np.uint32)
    A, B = np.repeat(a, 6), np.repeat(b, 6)
    # n = clamp ? min(c, 32) : c & 0x1f over the 64-bit [b, a]
    assert ints(run("shf", "b32", ["l", "clamp"], A, B, c)) == \
        [0x01234567, 0x12345678, 0x89ABCDEF, 0x89ABCDEF, 0x89ABCDEF, 0x89ABCDEF]
    assert ints(run("shf", "b32", ["l", "wrap"], A, B, c)) == \
        [0x01234567, 0x12345678, 0x01234567, 0x02468ACF, 0x12345678, 0xC4D5E6F7]
    assert ints(run("shf", "b32", ["r", "clamp"], A, B, c)) == \
        [0x89ABCDEF, 0x789ABCDE, 0x01234567, 0x01234567, 0x01234567, 0x01234567]
    assert ints(run("shf", "b32", ["r", "wrap"], A, B, c)) == \
        [0x89ABCDEF, 0x789ABCDE, 0x89ABCDEF, 0xC4D5E6F7, 0x789ABCDE, 0x02468ACF]
    # "perform 32-bit left or right rotate by supplying the same value for a and b"
    assert ints(run("shf", "b32", ["l", "wrap"], a, a, np.array([8], np.uint32))) == [0xABCDEF89]


# -- bit operations (9.7.1.14-22) ------------------------------------------------------------------
def test_popc_clz_bfind_brev():
    r = run("popc", "b64", (), arr(64, 0, 2**64 - 1, 0x8000000000000001))
    assert r.dtype == np.uint32 and ints(r) == [0, 64, 2]
    assert ints(run("clz", "b32", (), arr(32, 0, 1, 0x80000000, 0x00010000))) == [32, 31, 0, 15]
    assert ints(run("clz", "b64", (), arr(64, 0, 1, 2**63, 2**53 - 1))) == [64, 63, 0, 11]
    # bfind: 0xffffffff if no non-sign bit; negative signed inputs look for the msb 0
    assert ints(run("bfind", "u32", (), arr(32, 0, 1, 0x80000000))) == [0xFFFFFFFF, 0, 31]
    assert ints(run("bfind", "s32", (), arr(32, 0, -1, -2, 0x40000000, -2**31))) == \
        [0xFFFFFFFF, 0xFFFFFFFF, 0, 30, 30]
    assert ints(run("bfind", "u64", ["shiftamt"], arr(64, 0, 1, 2**63))) == [0xFFFFFFFF, 63, 0]
    assert ints(run("bfind", "s64", ["shiftamt"], arr(64, -2))) == [63]
    assert ints(run("brev", "b32", (), arr(32, 1, 0x12345678))) == [0x80000000, 0x1E6A2C48]
    assert ints(run("brev", "b64", (), arr(64, 1, 0x8000000000000002))) == [2**63, 0x4000000000000001]


def bfe_ref(kind, bits, a, b, c):
    """9.7.1.19's pseudo-code, literally."""
    msb = bits - 1
    pos, length = b & 0xFF, c & 0xFF
    sbit = 0 if kind == "u" or length == 0 else (a >> min(pos + length - 1, msb)) & 1
    return sum((((a >> (pos + i)) & 1) if (i < length and pos + i <= msb) else sbit) << i
               for i in range(bits))


def bfi_ref(bits, a, b, c, d):
    """9.7.1.20's pseudo-code, literally."""
    pos, length = c & 0xFF, d & 0xFF
    f = b
    i = 0
    while i < length and pos + i <= bits - 1:
        f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
        i += 1
    return f


def test_bfe_special_cases():
    a = arr(32, 0xF0F0A5C3)
    one = lambda kind, pos, ln: ints(run("bfe", f"{kind}32", (), a, np.array([pos], np.uint32),  # noqa: E731
                                         np.array([ln], np.uint32)))[0]
    # "If the bit field length is zero, the result is zero."
    assert one("u", 4, 0) == 0 and one("s", 4, 0) == 0
    assert one("u", 0, 8) == 0xC3 and one("s", 0, 8) == 0xFFFFFFC3  # sign of the field's msb
    assert one("s", 8, 8) == 0xFFFFFFA5 and one("s", 12, 4) == 0xFFFFFFFA
    assert one("s", 28, 8) == 0xFFFFFFFF                      # field runs past msb: sbit = a[msb]
    assert one("u", 28, 8) == 0xF
    assert one("s", 40, 3) == 0xFFFFFFFF and one("u", 40, 3) == 0  # start beyond msb: replicated sign
    assert one("u", 256 + 4, 256 + 4) == 0xC                  # b and c are masked to 0..255
    assert one("u", 0, 255) == 0xF0F0A5C3


@pytest.mark.parametrize("bits", [32, 64])
def test_bfe_bfi_random_against_pseudo_code(bits):
    rng = np.random.default_rng(bits + 1)
    a = sample(rng, bits, 300)
    b = sample(rng, bits, 300)[::-1]
    pos = [int(v) for v in rng.integers(0, 80 if bits == 64 else 300, len(a))]
    ln = [int(v) for v in rng.integers(0, 80 if bits == 64 else 300, len(a))]
    A, B, P, L = np.array(a, U[bits]), np.array(b, U[bits]), np.array(pos, np.uint32), np.array(ln, np.uint32)
    for kind in "us":
        assert ints(run("bfe", f"{kind}{bits}", (), A, P, L)) == \
            [bfe_ref(kind, bits, *v) for v in zip(a, pos, ln)]
    assert ints(run("bfi", f"b{bits}", (), A, B, P, L)) == [bfi_ref(bits, *v) for v in zip(a, b, pos, ln)]


def test_bfi_special_cases():
    a, b = arr(32, 0xFFFFFFFF), arr(32, 0x12345678)
    one = lambda pos, ln: ints(run("bfi", "b32", (), a, b, np.array([pos], np.uint32),  # noqa: E731
                                   np.array([ln], np.uint32)))[0]
    assert one(4, 0) == 0x12345678                 # "If the bit field length is zero, the result is b"
    assert one(32, 4) == 0x12345678                # "If the start position is beyond the msb ... b"
    assert one(4, 8) == 0x12345FF8 and one(28, 8) == 0xF2345678 and one(0, 255) == 0xFFFFFFFF


def test_bfe_bfi_64_position_over_255_is_rejected():
    # An H100 does not mask 64-bit bfe/bfi's position and length with 0xff as the ISA's pseudo-code does.
    with pytest.raises(ProtocolError, match=r"bfe\.u64: position and length must be in 0\.\.255"):
        run("bfe", "u64", (), arr(64, 1), np.array([256], np.uint32), np.array([200], np.uint32))
    with pytest.raises(ProtocolError, match=r"bfi\.b64"):
        run("bfi", "b64", (), arr(64, 1), arr(64, 1), np.array([0], np.uint32), np.array([256], np.uint32))


def test_fns_examples_and_rejected_operands():
    # 9.7.1.17's examples, then offset 0 and a search that runs out of bits
    mask = np.full(6, 0xAAAAAAAA, np.uint32)
    base = np.array([3, 3, 2, 2, 3, 31], np.uint32)
    offset = np.array([1, -1, 1, -1, 0, 2], np.int32).view(np.uint32)
    assert ints(run("fns", "b32", (), mask, base, offset)) == [3, 3, 3, 1, 3, 0xFFFFFFFF]
    assert ints(run("fns", "b32", (), arr(32, 0xAAAAAAAA), arr(32, 0), arr(32, 16))) == [31]
    with pytest.raises(ProtocolError, match="base must be <= 31"):
        run("fns", "b32", (), arr(32, 1), arr(32, 32), arr(32, 1))
    with pytest.raises(ProtocolError, match=r"offset -2\*\*31"):
        run("fns", "b32", (), arr(32, 1), arr(32, 0), arr(32, -2**31))


def test_bmsk_and_szext():
    # 9.7.1.22: "bmsk.wrap.b32 rd, 1, 2; // Creates a bitmask of 0x00000006."
    a, b = arr(32, 1, 0, 33, 33, 4, 4, 30), arr(32, 2, 32, 2, 2, 0, 40, 4)
    assert ints(run("bmsk", "b32", ["wrap"], a, b)) == [6, 0, 6, 6, 0, 0xFF0, 0xC0000000]
    assert ints(run("bmsk", "b32", ["clamp"], a, b)) == [6, 0xFFFFFFFF, 0, 0, 0, 0xFFFFFFF0, 0xC0000000]
    # 9.7.1.21: "szext.wrap.u32 rd, 0xffffffff, 0; // Result is 0."; N >= 32: clamp keeps a, wrap wraps N
    a, n = arr(32, 0xFFFFFFFF, 0x000000F0, 0x000000F0, 0x12345678, 0x12345678), arr(32, 0, 8, 5, 32, 36)
    assert ints(run("szext", "u32", ["wrap"], a, n)) == [0, 0xF0, 0x10, 0, 0x8]
    assert ints(run("szext", "s32", ["wrap"], a, n)) == [0, 0xFFFFFFF0, 0xFFFFFFF0, 0, 0xFFFFFFF8]
    assert ints(run("szext", "s32", ["clamp"], a, n)) == [0, 0xFFFFFFF0, 0xFFFFFFF0, 0x12345678, 0x12345678]


# -- prmt (9.7.9.7), lop3 (9.7.8.6), logic ops ------------------------------------------------------
A_BYTES, B_BYTES = 0x33221100, 0x77665544  # byte k of {b, a} is 0x11 * k


def test_prmt_generic():
    # cub's documented example: bytes {b, a} = 7..0, control 0x7531 -> 0x07050301
    low, high = arr(32, 0x03020100), arr(32, 0x07060504)
    assert ints(run("prmt", "b32", (), low, high, arr(32, 0x7531))) == [0x07050301]
    a, b = arr(32, A_BYTES), arr(32, B_BYTES)
    assert ints(run("prmt", "b32", (), a, b, arr(32, 0x3210, 0x0123, 0x4567))) == \
        [A_BYTES, 0x00112233, 0x44556677]
    # msb of a selector replicates the selected byte's sign; high control bits are ignored
    a = arr(32, 0x80_7F_00_FF)
    assert ints(run("prmt", "b32", (), a, arr(32, 0), arr(32, 0xFFFF_3210))) == [0x807F00FF]
    assert ints(run("prmt", "b32", (), a, arr(32, 0), arr(32, 0x0000_BA98))) == [0xFF0000FF]
    assert ints(run("prmt", "b32", (), a, arr(32, 0), arr(32, 0x0000_8A9B))) == [0xFF0000FF]


@pytest.mark.parametrize("mode,rows", [
    ("f4e", [(3, 2, 1, 0), (4, 3, 2, 1), (5, 4, 3, 2), (6, 5, 4, 3)]),
    ("b4e", [(5, 6, 7, 0), (6, 7, 0, 1), (7, 0, 1, 2), (0, 1, 2, 3)]),
    ("rc8", [(0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)]),
    ("ecl", [(3, 2, 1, 0), (3, 2, 1, 1), (3, 2, 2, 2), (3, 3, 3, 3)]),
    ("ecr", [(0, 0, 0, 0), (1, 1, 1, 0), (2, 2, 1, 0), (3, 2, 1, 0)]),
    ("rc16", [(1, 0, 1, 0), (3, 2, 3, 2), (1, 0, 1, 0), (3, 2, 3, 2)]),
])
def test_prmt_modes_follow_the_selector_table(mode, rows):
    c = arr(32, 0, 1, 2, 3, 0xFFFFFFF4, 0x80000007)  # only c[1:0] counts
    got = ints(run("prmt", "b32", [mode], np.repeat(arr(32, A_BYTES), 6), np.repeat(arr(32, B_BYTES), 6), c))
    want = [sum((0x11 * k) << (8 * (3 - j)) for j, k in enumerate(rows[sel])) for sel in (0, 1, 2, 3, 0, 3)]
    assert got == want


@pytest.mark.parametrize("lut", [0x00, 0xFF, 0x80, 0xFE, 0x40, 0x1A, 0x96, 0xE8, 0xCA, 0x3C, 0x01, 0x6B])
def test_lop3_matches_its_truth_table(lut):
    rng = np.random.default_rng(lut)
    a, b, c = (rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    got = run("lop3", "b32", (), a, b, c, np.full(64, lut, np.uint32))

    def bitwise(x, y, z):  # evaluate the table bit by bit: row index = (a << 2) | (b << 1) | c
        return sum(((lut >> (((x >> i & 1) << 2) | ((y >> i & 1) << 1) | (z >> i & 1))) & 1) << i
                   for i in range(32))
    assert ints(got) == [bitwise(*v) for v in zip(ints(a), ints(b), ints(c))]


def test_lop3_isa_examples():
    ta, tb, tc = arr(32, 0xF0), arr(32, 0xCC), arr(32, 0xAA)
    for lut, f in [(0x80, lambda a, b, c: a & b & c), (0xFE, lambda a, b, c: a | b | c),
                   (0x40, lambda a, b, c: a & b & ~c), (0x1A, lambda a, b, c: (a & b | c) ^ a)]:
        assert ints(run("lop3", "b32", (), ta, tb, tc, arr(32, lut))) == [lut]
        x, y, z = arr(32, 0x12345678), arr(32, 0x9ABCDEF0), arr(32, 0x0F0F0F0F)
        assert ints(run("lop3", "b32", (), x, y, z, arr(32, lut))) == ints(f(x, y, z))


def test_logic_ops():
    a, b = arr(16, 0x00FF, 0), arr(16, 0x0F0F, 0)
    assert ints(run("and", "b16", (), a, b)) == [0x000F, 0]
    assert ints(run("or", "b16", (), a, b)) == [0x0FFF, 0]
    assert ints(run("xor", "b16", (), a, b)) == [0x0FF0, 0]
    assert ints(run("not", "b64", (), arr(64, 0))) == [2**64 - 1]
    r = run("cnot", "b32", (), arr(32, 0, 1, 0xFFFFFFFF))
    assert r.dtype == np.uint32 and ints(r) == [1, 0, 0]
    p, q = np.array([True, True, False]), np.array([True, False, False])
    assert run("and", "pred", (), p, q).tolist() == [True, False, False]
    assert run("or", "pred", (), p, q).tolist() == [True, True, False]
    assert run("xor", "pred", (), p, q).tolist() == [False, True, False]
    assert run("not", "pred", (), p).tolist() == [False, False, True]


# -- dp4a / dp2a (9.7.1.23/24) -----------------------------------------------------------------------
@pytest.mark.parametrize("atype", ["u32", "s32"])
@pytest.mark.parametrize("btype", ["u32", "s32"])
def test_dp4a_dp2a_against_python_ints(atype, btype):
    rng = np.random.default_rng(42)
    a, b, c = (sample(rng, 32, 100) for _ in range(3))
    def part(v, i, w, is_signed):  # part i of w bits, sign- or zero-extended
        p = v >> (w * i) & ((1 << w) - 1)
        return signed(p, w) if is_signed else p
    acc = lambda v: signed(v, 32) if "s32" in (atype, btype) else v  # noqa: E731
    A, B, C = (np.array(x, np.uint32) for x in (a, b, c))
    want4 = [(acc(z) + sum(part(x, i, 8, atype == "s32") * part(y, i, 8, btype == "s32") for i in range(4)))
             & 0xFFFFFFFF for x, y, z in zip(a, b, c)]
    assert ints(run("dp4a", f"{atype}.{btype}", (), A, B, C)) == want4
    for mode, sel in (("lo", 0), ("hi", 2)):
        want2 = [(acc(z) + sum(part(x, i, 16, atype == "s32") * part(y, sel + i, 8, btype == "s32")
                               for i in range(2))) & 0xFFFFFFFF for x, y, z in zip(a, b, c)]
        assert ints(run("dp2a", f"{atype}.{btype}", [mode], A, B, C)) == want2


def test_dp4a_single_type_means_both():
    minus_ones, ones = arr(32, 0xFF_FF_FF_FF), arr(32, 0x01_01_01_01)
    assert ints(run("dp4a", "s32", (), minus_ones, ones, arr(32, 0))) == [2**32 - 4]


# -- compare / select (9.3.1.1, 9.7.6) -------------------------------------------------------------
@pytest.mark.parametrize("type_", TYPES + ["b16", "b32", "b64"])
def test_compare_against_python_ints(type_):
    bits = int(type_[1:])
    rng = np.random.default_rng(bits * 3)
    a, b = sample(rng, bits, 120), sample(rng, bits, 120)[::-1]
    a[:5] = b[:5]  # some equal pairs
    ops = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
           "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}
    unsigned = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
    names = {"b": ["eq", "ne"], "s": list(ops), "u": list(ops) + list(unsigned)}[type_[0]]
    conv = (lambda v: signed(v, bits)) if type_[0] == "s" else (lambda v: v)
    A, B = np.array(a, U[bits]), np.array(b, U[bits])
    for cmp in names:
        got = I.compare(cmp, type_, A, B)
        assert got.dtype == np.bool_
        assert got.tolist() == [ops[unsigned.get(cmp, cmp)](conv(x), conv(y)) for x, y in zip(a, b)]


def test_select():
    p = np.array([True, False])
    assert ints(I.select("b32", arr(32, 1, 2), arr(32, 3, 4), p)) == [1, 4]
    assert I.select("f32", arr(32, 1, 2), arr(32, 3, 4), p).dtype == np.uint32
    assert I.select("pred", p, ~p, p).tolist() == [True, True]


# -- operand widths, dtypes, load-time probing -------------------------------------------------------
def test_wider_operands_use_low_bits_and_results_have_storage_dtype():
    r = run("add", "u16", (), arr(32, 0x1234FFFF), arr(32, 0x00000001))
    assert r.dtype == np.uint16 and ints(r) == [0]
    assert run("clz", "b64", (), arr(64, 1)).dtype == np.uint32
    assert run("bfind", "s64", (), arr(64, 1)).dtype == np.uint32
    assert run("mul", "u16", ["wide"], arr(16, 2), arr(16, 3)).dtype == np.uint32


def test_every_form_accepts_zero_operands():
    # ops/alu.py probes each instruction once with zeros at load time: no form may fail on them.
    z = lambda bits: np.zeros(1, U[bits])  # noqa: E731
    for op, type_, mods, n in [("div", "s32", (), 2), ("rem", "u64", (), 2), ("bfe", "s64", (), 3),
                               ("fns", "b32", (), 3), ("prmt", "b32", ["rc16"], 3), ("lop3", "b32", (), 4),
                               ("szext", "s32", ["clamp"], 2), ("bmsk", "b32", ["wrap"], 2),
                               ("mad", "s32", ["hi", "sat"], 3), ("dp2a", "u32", ["lo"], 3)]:
        bits = int(type_[1:])
        assert run(op, type_, mods, *([z(bits)] * n)).shape == (1,)


# -- one test per error message --------------------------------------------------------------------
@pytest.mark.parametrize("op,type_,mods,n,message", [
    ("add", "u32", ["cc"], 2, r"add\.cc\.u32: the carry flag"),
    ("addc", "u32", (), 2, r"addc\.u32: the carry flag"),
    ("foo", "u32", (), 2, r"foo\.u32: not an integer instruction"),
    ("shl", "u32", (), 2, r"shl\.u32: type \.u32 is not allowed"),
    ("bfe", "b32", (), 3, r"bfe\.b32: type \.b32 is not allowed"),
    ("lop3", "b32", ["or"], 4, r"lop3\.or\.b32: lop3\.BoolOp writes a predicate"),
    ("mul", "u32", (), 2, r"mul\.u32: modifiers must be \{\.lo\} or \{\.hi\} or \{\.wide\}"),
    ("prmt", "b32", ["f4"], 3, r"prmt\.f4\.b32: modifiers must be"),
    ("add", "u32", ["sat"], 2, r"add\.sat\.u32: \.sat applies to \.s32 only"),
    ("max", "u32", ["relu"], 2, r"max\.relu\.u32: .*\.relu to \.s32/\.s16x2 only"),
    ("mul", "u64", ["wide"], 2, r"mul\.wide\.u64: \.wide is supported only"),
    ("add", "u32", (), 3, r"add\.u32: expected 2 source operands, got 3"),
    ("dp4a", "f32.u32", (), 3, r"dp4a\.f32\.u32: the types must be \.u32 or \.s32"),
    ("dp2a", "u32", (), 3, r"dp2a\.u32: dp2a takes \.lo or \.hi"),
])
def test_unsupported_forms_name_the_form(op, type_, mods, n, message):
    with pytest.raises(Unsupported, match=message):
        run(op, type_, mods, *([np.zeros(1, np.uint32)] * n))


@pytest.mark.parametrize("cmp,type_,message", [
    ("lt", "b32", r"setp\.lt\.b32: ordering comparisons are not defined for bit-size types"),
    ("lo", "s32", r"setp\.lo\.s32: lo is an unsigned comparison"),
    ("equ", "u32", r"setp\.equ\.u32: 'equ' is not an integer comparison"),
    ("eq", "u8", r"setp\.eq\.u8: 8-bit types are not setp types"),
    ("eq", "f32", r"integer type \.f32 is not an integer or bit-size type"),
])
def test_compare_errors_name_the_form(cmp, type_, message):
    with pytest.raises(Unsupported, match=message):
        I.compare(cmp, type_, np.zeros(1, np.uint32), np.zeros(1, np.uint32))
