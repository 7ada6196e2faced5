"""Floating-point encodings of PTX and an exact, vectorised rounding core (NumPy only).

Public helpers (all take and return raw-bit arrays in unsigned dtypes; inputs may be wider unsigned
dtypes, whose low bits are used):

``f32_to_bits(x: float32 array) -> uint32``            the bits of float32 values
``bits_to_f32(bits) -> float32``                       float32 values of 32-bit patterns
``f64_to_bits(x: float64 array) -> uint64`` / ``bits_to_f64(bits) -> float64``
``bf16_to_f32_bits(bits_u16) -> uint32``               exact widening (a shift: NaN payloads kept)
``f16_to_f32_bits(bits_u16) -> uint32``                exact widening (NaN -> canonical 0x7FFFFFFF)
``round_f32_to_bf16(bits_u32, mode="rn") -> uint16``   IEEE rounding, NaN -> 0x7FFF
``round_f32_to_f16(bits_u32, mode="rn") -> uint16``    IEEE rounding, NaN -> 0x7FFF
``round_f64_to_f32(bits_u64, mode="rn") -> uint32``    IEEE rounding, NaN -> 0x7FFFFFFF
``decode(fmt, bits) -> float64``                       exact value of any format below (NaN -> nan)
``encode(x: float64, fmt, mode, *, ftz, satfinite, err) -> bits``   x (+ exact remainder err) rounded
                                                       to ``fmt``; NaN -> the canonical NaN
``round_parts(neg, sig, e, sticky, fmt, mode, ...)``   the rounding core, documented below
``parts_f64(x, err=None)``                             float64 (+ remainder) -> round_parts' inputs
``two_sum(a, b) -> (s, err)``                          Knuth's error-free float64 addition
``round_to_odd(x, err)`` / ``ro_narrow(x, ftype, utype, err=None)``  rounding to odd (exact double
                                                       rounding) in float64 / into float32/float16 bits
``is_nan(fmt, bits)``, ``is_subnormal(fmt, bits)``, ``flush(fmt, bits)`` (the .ftz input rule)
``F64 F32 TF32 F16 BF16 E4M3 E5M2 F64HI``, ``FORMATS``, ``fmt_of(name)``   the format descriptions

Round-to-nearest into f32/f16 (and bf16 via an f32 rounded to odd) takes a fast path through NumPy's
IEEE casts, after rounding the float64 value to odd when an exact remainder is given; every other
case goes through ``round_parts`` (integer arithmetic on the significand with a sticky bit).

Formats (PTX ISA 5.2.3 "Alternate Floating-Point Data Formats", 5.2.1 "Fundamental Types"):
``f64`` (11/52), ``f32`` (8/23), ``tf32`` (8/10, stored in the upper 19 bits of a .b32), ``f16``
(5/10), ``bf16`` (8/7), ``e4m3`` (4/3, bias 7, no infinities, NaN = S.1111.111, max 448) and ``e5m2``
(5/2, bias 15, IEEE-like with infinities, max 57344).

Rounding modes are PTX's names (6.5.2 "Rounding Modifiers"): ``rn`` (nearest, ties to even), ``rna``
(nearest, ties away from zero), ``rz``, ``rm`` (toward -inf), ``rp`` (toward +inf).

Canonical NaNs are the ones the hardware writes (checked on an H100): 0x7FFFFFFF for f32 (PTX ISA 9.7.3:
"Single-precision instructions return an unspecified NaN"), 0x7FFF for f16/bf16, 0x7F for e4m3/e5m2.
f64 arithmetic propagates payloads instead (handled in ``floats``); its generated NaN is
0xFFF8000000000000.

FTZ (PTX ISA 9.7.3 "Floating-Point Instructions": "flush subnormal inputs and results to
sign-preserving zero"): a result is flushed when it is tiny, tininess being detected after rounding
to the format's precision with an unbounded exponent range (IEEE 754-2008 7.5). So 0x3F7FFFFF * 2^-126,
which rounds to the smallest normal in the subnormal range, is still flushed to +0 (as on the
hardware), while an fma result -2^-126 + 2^-252 rounds to -2^-126.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U64 = np.uint64
MODES = ("rn", "rna", "rz", "rm", "rp")


@dataclass(frozen=True)
class Format:
    """A binary floating-point encoding: ``ebits`` exponent bits, ``mbits`` stored mantissa bits."""

    name: str
    ebits: int
    mbits: int
    has_inf: bool = True
    nan: int = -1            # canonical (positive) NaN encoding; -1: all ones but the sign
    max_enc: int = -1        # largest finite magnitude encoding; -1: IEEE (exponent all ones - 1)

    @property
    def width(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def max_finite(self) -> int:
        if self.max_enc >= 0:
            return self.max_enc
        return (((1 << self.ebits) - 2) << self.mbits) | ((1 << self.mbits) - 1)

    @property
    def emax(self) -> int:
        return (self.max_finite >> self.mbits) - self.bias

    @property
    def inf_enc(self) -> int:
        return ((1 << self.ebits) - 1) << self.mbits

    @property
    def nan_enc(self) -> int:
        return self.nan if self.nan >= 0 else (1 << (self.width - 1)) - 1

    @property
    def sign_bit(self) -> int:
        return 1 << (self.width - 1)

    @property
    def dtype(self):
        return {8: np.uint8, 16: np.uint16, 19: np.uint32, 32: np.uint32, 64: np.uint64}[self.width]


F64 = Format("f64", 11, 52)
F32 = Format("f32", 8, 23)
TF32 = Format("tf32", 8, 10)                       # 19-bit encoding; stored as f32 bits << 13
F16 = Format("f16", 5, 10)
BF16 = Format("bf16", 8, 7)
E4M3 = Format("e4m3", 4, 3, has_inf=False, nan=0x7F, max_enc=0x7E)
E5M2 = Format("e5m2", 5, 2, nan=0x7F)
# The 1.11.20 format of the upper word of an f64 (rcp.approx.ftz.f64, rsqrt.approx.ftz.f64).
F64HI = Format("f64hi", 11, 20, nan=0x7FFFFFFF)
FORMATS = {f.name: f for f in (F64, F32, TF32, F16, BF16, E4M3, E5M2, F64HI)}


def fmt_of(name) -> Format:
    return name if isinstance(name, Format) else FORMATS[name]


# -- bit views ------------------------------------------------------------------------------------
def f32_to_bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def bits_to_f32(bits) -> np.ndarray:
    return np.asarray(bits).astype(np.uint32).view(np.float32)


def f64_to_bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).view(np.uint64)


def bits_to_f64(bits) -> np.ndarray:
    return np.asarray(bits).astype(np.uint64).view(np.float64)


def low(bits, dtype) -> np.ndarray:
    """The low bits of ``bits`` (any unsigned dtype at least as wide) in ``dtype``."""
    bits = np.asarray(bits)
    if bits.dtype == dtype:
        return bits
    return bits.astype(dtype)


# -- decoding -------------------------------------------------------------------------------------
def _decode_generic(fmt: Format, bits: np.ndarray) -> np.ndarray:
    b = bits.astype(U64)
    neg = (b >> U64(fmt.width - 1)) & U64(1)
    mag = b & U64(fmt.sign_bit - 1)
    ex = (mag >> U64(fmt.mbits)).astype(np.int64)
    man = (mag & U64((1 << fmt.mbits) - 1)).astype(np.float64)
    val = np.where(ex == 0, np.ldexp(man, fmt.emin - fmt.mbits),
                   np.ldexp(man + (1 << fmt.mbits), ex - fmt.bias - fmt.mbits))
    if fmt.has_inf:
        val = np.where(mag == U64(fmt.inf_enc), np.inf, val)
        val = np.where(mag > U64(fmt.inf_enc), np.nan, val)
    else:
        val = np.where(mag > U64(fmt.max_finite), np.nan, val)
    return np.where(neg == 1, -val, val)


_TABLES: dict = {}


def _table(fmt: Format) -> np.ndarray:
    t = _TABLES.get(fmt.name)
    if t is None:
        t = _decode_generic(fmt, np.arange(1 << fmt.width, dtype=np.uint64))
        _TABLES[fmt.name] = t
    return t


def decode(fmt, bits) -> np.ndarray:
    """Exact float64 values of ``bits`` in format ``fmt`` (NaNs become NumPy NaNs)."""
    fmt = fmt_of(fmt)
    bits = np.asarray(bits)
    with np.errstate(invalid="ignore"):
        return _decode(fmt, bits)


def _decode(fmt, bits):
    if fmt is F64:
        return low(bits, np.uint64).view(np.float64)
    if fmt is F32:
        return low(bits, np.uint32).view(np.float32).astype(np.float64)
    if fmt is TF32:
        return (low(bits, np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if fmt is F16:
        return low(bits, np.uint16).view(np.float16).astype(np.float64)
    if fmt is BF16:
        return (low(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if fmt.width <= 8:
        return _table(fmt)[low(bits, np.uint8)]
    return _decode_generic(fmt, low(bits, np.uint64) & U64((1 << fmt.width) - 1))


def is_nan(fmt, bits) -> np.ndarray:
    fmt = fmt_of(fmt)
    if fmt is TF32:
        return is_nan(F32, bits)
    dt = fmt.dtype
    mag = low(bits, dt) & dt(fmt.sign_bit - 1)
    return mag > dt(fmt.inf_enc if fmt.has_inf else fmt.max_finite)


def is_subnormal(fmt, bits) -> np.ndarray:
    fmt = fmt_of(fmt)
    dt = fmt.dtype
    mag = low(bits, dt) & dt(fmt.sign_bit - 1)
    return (mag != 0) & (mag < dt(1 << fmt.mbits))


def flush(fmt, bits) -> np.ndarray:
    """``bits`` with subnormals replaced by a zero of the same sign (the .ftz input rule)."""
    fmt = fmt_of(fmt)
    bits = low(bits, fmt.dtype)
    return np.where(is_subnormal(fmt, bits), bits & fmt.dtype(fmt.sign_bit), bits)


# -- the rounding core ----------------------------------------------------------------------------
def _bitlen(x: np.ndarray) -> np.ndarray:
    """Number of significant bits of each uint64 (0 for 0)."""
    n = np.frexp(x.astype(np.float64))[1].astype(np.int64)      # may be one too many (rounding up)
    sh = np.clip(n - 1, 0, 63).astype(U64)
    return np.where((n > 64) | ((x >> sh) == 0) & (n > 0), n - 1, n)


def _round_at(neg, sig, e, sticky, q, mode):
    """Round ``(sig + sticky) * 2^e`` to a multiple of ``2^q``: (multiple, inexact)."""
    shift = q - e
    big = shift >= 64                                                   # value < half a quantum
    sh = np.clip(shift, 0, 63).astype(U64)
    left = np.clip(-shift, 0, 63).astype(U64)
    kept = np.where(shift <= 0, sig << left, sig >> sh)
    rem = np.where(shift <= 0, U64(0), sig & ((U64(1) << sh) - U64(1)))
    half = np.where(shift <= 0, U64(0), U64(1) << (np.maximum(sh, U64(1)) - U64(1)))
    kept = np.where(big, U64(0), kept)
    rem_nz = np.where(big, sig != 0, rem != 0)
    at_half = ~big & (shift > 0) & (rem == half)
    above = ~big & (shift > 0) & ((rem > half) | (at_half & sticky))
    tie = at_half & ~sticky
    inexact = rem_nz | sticky
    if mode == "rn":
        up = above | (tie & ((kept & U64(1)) == 1))
    elif mode == "rna":
        up = above | tie
    elif mode == "rz":
        up = np.zeros(kept.shape, bool)
    elif mode == "rp":
        up = inexact & ~neg
    elif mode == "rm":
        up = inexact & neg
    else:
        raise ValueError(f"unknown rounding mode {mode!r}")
    return kept + up.astype(U64), inexact


def round_parts(neg, sig, e, sticky, fmt, mode: str, *, ftz: bool = False, satfinite: bool = False,
                nan=None, inf=None) -> np.ndarray:
    """Round the exact value ``(-1)^neg * (sig + s) * 2^e`` to ``fmt`` with ``mode``; return its bits.

    ``sig`` is uint64, ``e`` int64; ``sticky`` says that the exact value lies strictly between
    ``sig * 2^e`` and ``(sig + 1) * 2^e`` (0 < s < 1). When ``sticky`` is set, ``sig`` must carry at least
    two more bits than the format's precision (so the sticky part sits below the rounding bit).
    ``nan``/``inf`` are masks of lanes whose result is NaN / an infinity of sign ``neg``.

    IEEE 754 overflow rules per mode (rn, rna -> inf; rz -> max finite; rm/rp -> inf on their side,
    max finite on the other); ``satfinite`` clamps overflows and infinities to the signed max finite
    (PTX ISA 9.7.9.21 cvt ".satfinite"); a format without infinities (e4m3) needs ``satfinite``.
    ``ftz`` flushes tiny results to signed zero, tininess being detected after rounding to the format's
    precision with an unbounded exponent (IEEE 754 7.5; what the hardware does: 0x3F7FFFFF * 2^-126
    is flushed, -2^-126 + 2^-252 rounds to -2^-126).
    Exact zeros keep the sign ``neg``. Returns the encoding in ``fmt.dtype`` (as uint64 for F64HI).
    """
    fmt = fmt_of(fmt)
    neg = np.asarray(neg, bool)
    sig = np.asarray(sig).astype(U64)
    e = np.asarray(e).astype(np.int64)
    sticky = np.asarray(sticky, bool)
    shape = np.broadcast(neg, sig, e, sticky).shape
    neg, sig, e, sticky = (np.broadcast_to(v, shape) for v in (neg, sig, e, sticky))
    mb = fmt.mbits
    nb = _bitlen(sig)
    nonzero = (nb > 0) | sticky
    E = np.where(nb > 0, nb - 1 + e, np.int64(-(1 << 30)))          # exponent of the leading bit
    q = np.maximum(E, fmt.emin) - mb                                    # exponent of the quantum
    kept, _ = _round_at(neg, sig, e, sticky, q, mode)
    over = E > fmt.emax
    qc = np.minimum(q, fmt.emax - mb).astype(np.int64)
    enc = (((qc + mb + fmt.bias - 1).astype(U64)) << U64(mb)) + kept
    enc = np.where(nonzero, enc, U64(0))
    over |= enc > U64(fmt.max_finite)
    # overflow: rn/rna -> inf, rz -> max, rp/rm -> inf on their own side
    if satfinite or mode == "rz":
        to_inf = np.zeros(shape, bool)
    elif mode in ("rn", "rna"):
        to_inf = np.ones(shape, bool)
    elif mode == "rp":
        to_inf = ~neg
    else:
        to_inf = neg.copy()
    inf_enc = U64(fmt.inf_enc if fmt.has_inf else fmt.nan_enc)
    enc = np.where(over, np.where(to_inf, inf_enc, U64(fmt.max_finite)), enc)
    if ftz:
        tiny = E < fmt.emin
        edge = E == fmt.emin - 1
        if edge.any():
            k2, _ = _round_at(neg, sig, e, sticky, E - mb, mode)
            tiny &= ~(edge & ((k2 >> U64(mb + 1)) != 0))
        enc = np.where(tiny, U64(0), enc)
    if inf is not None:
        enc = np.where(inf, U64(fmt.max_finite) if satfinite else inf_enc, enc)
    enc = enc | (neg.astype(U64) << U64(fmt.width - 1))
    if nan is not None:
        enc = np.where(nan, U64(fmt.nan_enc), enc)
    if fmt is F64HI:
        return enc
    return enc.astype(fmt.dtype)


def parts_f64(x, err=None):
    """Split float64 ``x`` (finite) into ``(neg, sig, e, sticky)`` for ``round_parts``.

    With ``err`` (float64, the exact remainder: exact value = x + err, |err| <= ulp(x)/2, e.g. from
    TwoSum), the parts describe ``x + err`` exactly up to a sticky bit.
    """
    x = np.asarray(x, np.float64)
    b = x.view(U64)
    neg = (b >> U64(63)) == 1
    ex = ((b >> U64(52)) & U64(0x7FF)).astype(np.int64)
    fr = b & U64((1 << 52) - 1)
    sig = np.where(ex == 0, fr, fr | U64(1 << 52))
    e = np.where(ex == 0, np.int64(-1074), ex - 1075)
    if err is None:
        return neg, sig, e, np.zeros(x.shape, bool)
    err = np.asarray(err, np.float64)
    # t = err in units of 2^(e-2), signed relative to the direction of x: |t| <= 2
    with np.errstate(invalid="ignore", over="ignore"):
        t = np.ldexp(np.where(neg, -err, err), -(e - 2))
    t = np.where(np.isfinite(t), t, 0.0)
    k = np.floor(t)
    frac = t - k
    sig4 = (sig << U64(2)).astype(np.int64) + k.astype(np.int64)
    return neg, sig4.astype(U64), e - 2, frac != 0


def round_to_odd(x, err):
    """float64 ``x`` with exact remainder ``err`` rounded to odd: RZ(x + err) with the last bit forced to 1
    when inexact. Rounding that value to any format of at most 51 bits of precision, in any mode, gives
    the correctly rounded x + err (Boldo & Melquiond, "When double rounding is odd")."""
    b = np.asarray(x, np.float64).view(U64)
    with np.errstate(invalid="ignore"):
        inexact = (err != 0) & np.isfinite(err)
        toward_zero = inexact & ((err > 0) != (x > 0))
    b = np.where(toward_zero, b - U64(1), b)
    return np.where(inexact, b | U64(1), b).view(np.float64)


_NP_FLOAT = {"f32": (np.float32, np.uint32, 0x00800000), "f16": (np.float16, np.uint16, 0x0400)}


def _encode_fast(x, fmt, ftz, err):
    """Round-to-nearest into f32/f16 with NumPy's IEEE casts; None when .ftz meets a result at the
    smallest normal (whose tininess needs the exact rule)."""
    ft, ut, min_normal = _NP_FLOAT[fmt.name]
    if err is not None:
        x = round_to_odd(x, err)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(ft).view(ut)
    sign = ut(fmt.sign_bit)
    mag = r & ut(fmt.sign_bit - 1)
    if ftz:
        if (mag == ut(min_normal)).any():
            return None
        r = np.where(mag < ut(min_normal), r & sign, r)
    return np.where(mag > ut(fmt.inf_enc), ut(fmt.nan_enc), r)


def ro_narrow(x, ftype, utype, err=None):
    """float64 ``x`` (+ exact ``err``) rounded to odd into float32/float16 ``ftype``: its bits (``utype``).

    NaNs stay NaNs; values beyond the format's range give its largest finite value, odd (so a later
    rounding to a narrower format overflows correctly).
    """
    if err is not None:
        x = round_to_odd(x, err)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(ftype)
        back = r.astype(np.float64)
        inexact = (back != x) & ~np.isnan(x)
        toward_zero = inexact & (np.abs(back) > np.abs(x))
    b = r.view(utype)
    b = np.where(toward_zero, b - utype(1), b)
    return np.where(inexact, b | utype(1), b)


def encode(x, fmt, mode: str = "rn", *, ftz: bool = False, satfinite: bool = False, err=None) -> np.ndarray:
    """float64 ``x`` (plus optional exact remainder ``err``) rounded to ``fmt``; NaN -> canonical NaN."""
    fmt = fmt_of(fmt)
    x = np.asarray(x, np.float64)
    if mode == "rn" and not satfinite:
        if fmt.name in _NP_FLOAT:
            r = _encode_fast(x, fmt, ftz, err)
            if r is not None:
                return r
        elif fmt is BF16 and not ftz:
            return round_f32_to_bf16(ro_narrow(x, np.float32, np.uint32, err))
    nan = np.isnan(x)
    inf = np.isinf(x)
    xf = np.where(nan | inf, np.where(np.signbit(x), -0.0, 0.0), x)
    if err is not None:
        err = np.where(nan | inf, 0.0, err)
    neg, sig, e, sticky = parts_f64(xf, err)
    return round_parts(neg, sig, e, sticky, fmt, mode, ftz=ftz, satfinite=satfinite, nan=nan, inf=inf)


def two_sum(a, b):
    """Knuth's TwoSum in float64: ``s = fl(a + b)`` and the exact ``err = (a + b) - s``."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
        bb = s - a
        err = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), err, 0.0)


# -- conveniences other modules use ---------------------------------------------------------------
def bf16_to_f32_bits(bits) -> np.ndarray:
    """bf16 -> f32 bits: exact (the value is the upper half of an f32); NaN payloads are kept."""
    return low(bits, np.uint16).astype(np.uint32) << np.uint32(16)


def f16_to_f32_bits(bits) -> np.ndarray:
    """f16 -> f32 bits: exact; NaN inputs give the canonical 0x7FFFFFFF (as cvt.f32.f16 does)."""
    h = low(bits, np.uint16)
    out = h.view(np.float16).astype(np.float32).view(np.uint32)
    return np.where(is_nan(F16, h), np.uint32(0x7FFFFFFF), out)


def round_f32_to_bf16(bits, mode: str = "rn") -> np.ndarray:
    """f32 bits -> bf16 bits with IEEE rounding ``mode``; NaN -> 0x7FFF (cvt.{mode}.bf16.f32)."""
    b = low(bits, np.uint32)
    if mode == "rn":
        nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        r = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
        return np.where(nan, np.uint32(0x7FFF), r).astype(np.uint16)
    return encode(decode(F32, b), BF16, mode)


def round_f32_to_f16(bits, mode: str = "rn") -> np.ndarray:
    """f32 bits -> f16 bits with IEEE rounding ``mode``; NaN -> 0x7FFF (cvt.{mode}.f16.f32)."""
    return encode(decode(F32, bits), F16, mode)


def round_f64_to_f32(bits, mode: str = "rn") -> np.ndarray:
    """f64 bits -> f32 bits with IEEE rounding ``mode``; NaN -> 0x7FFFFFFF (cvt.{mode}.f32.f64)."""
    return encode(decode(F64, bits), F32, mode)
