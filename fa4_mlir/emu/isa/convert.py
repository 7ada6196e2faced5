"""PTX ``cvt`` as NumPy functions on raw bits (PTX ISA 9.1, 9.7.9.21 "Data Movement and Conversion
Instructions: cvt", 6.5.1 "Scalar Conversions", 6.5.2 "Rounding Modifiers").

API (values are raw-bit arrays in unsigned dtypes; inputs may be wider, their low bits are used; results
are in the destination type's storage dtype: uint8 for s8/u8, uint16 for 16-bit types and e4m3x2/e5m2x2,
uint32 for 32-bit types, f16x2/bf16x2 and tf32, uint64 for 64-bit types):

``convert(dst_type, src_type, value, modifiers) -> bits``   ``cvt{mods}.dst.src d, a``
``pack(dst_type, a, b, modifiers) -> bits``
    ``cvt{mods}.{f16x2,bf16x2,e4m3x2,e5m2x2}.f32 d, a, b``
``unpack(dst_type, src_type, value, modifiers) -> bits``    ``cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a``

Bit helpers re-exported from ``fpformats`` for other modules: ``f32_to_bits``, ``bits_to_f32``,
``bf16_to_f32_bits`` (exact), ``f16_to_f32_bits`` (exact), ``round_f32_to_bf16(bits, mode)``,
``round_f32_to_f16(bits, mode)``, ``round_f64_to_f32(bits, mode)``, ``decode(fmt, bits)``.

Rules (the ISA text, with ptxas 13.0 deciding where the text is loose; anything else raises
``Unsupported`` naming the form):

* int -> int: sign/zero extension or chop (Table 15); ``.sat`` clamps to the destination range and is
  only legal where that range does not contain the source's. No rounding modifier.
* int -> float: a rounding modifier (rn rz rm rp) is required; IEEE rounding, overflow to inf (rn) or
  the largest finite value (rz, and rm/rp on the far side) -- the hardware gives IEEE results, also for
  f16 (the ~131,000 of 6.5.1 is not what an H100 does). ``.sat`` (f16/f32/f64) clamps to [0, 1].
* float -> int: an integer rounding modifier (rni rzi rmi rpi) is required. Results saturate to the
  destination range ("float-to-int saturates by default", ``.sat`` is redundant); NaN gives 0, except
  from an f64 source or into a 64-bit destination, where it gives 1 << (width - 1).
  ``.ftz`` flushes f32 subnormal inputs (only with an f32 source).
* float -> float:
  - same type: optional integer rounding (round to an integral value in the same format), ``.ftz``
    (f32), ``.sat`` (f16, f32, f64). NaN: f32 -> 0x7FFFFFFF, f16 -> 0x7FFF, f64 -> quieted payload;
    a plain ``cvt.f32.f32`` (no modifier) is a move and keeps NaNs unchanged (as the hardware does).
  - ``.ftz`` with an f32 source also canonicalises NaN inputs to 0x7FFFFFFF (so cvt.ftz.f64.f32 of a
    NaN gives 0x7FFFFFFFE0000000), and ``cvt.ftz.f32.bf16`` gives 0x7FFFFFFF for NaNs (hardware).
  - widening (f16/bf16 -> f32/f64, f32 -> f64) is exact; no rounding modifier (ptxas tolerates one
    with a bf16 source; it is accepted and ignored). NaN: f16 -> f32 gives 0x7FFFFFFF, bf16 -> f32 is a
    shift (payload kept, as the hardware does), -> f64 keeps the payload, quieted.
  - narrowing (f64 -> f32/f16/bf16, f32 -> f16/bf16, f16 <-> bf16) needs rn/rz/rm/rp (optional for
    f16 <-> bf16, where it defaults to rn). ``.relu`` and ``.satfinite`` need an f32 source, an
    f16/bf16 destination and rn/rz; NaN: from f32 -> canonical 0x7FFF; from f64 -> sign, quiet bit and
    the top payload bits (IEEE narrowing, as the hardware does).
  - ``.ftz`` applies to f32 inputs and f32 results only (results: tininess after rounding).
  - ``.satfinite``: |x| > MAX (and +-inf) -> +-MAX, NaN stays NaN. ``.relu``: negative and -0 -> +0,
    NaN -> canonical NaN. ``.sat``: clamp to [0, 1], NaN -> +0 (f16, f32, f64 destinations).
  - tf32 (``cvt.rna{.satfinite}.tf32.f32``, ``cvt.{rn,rz}{.satfinite}{.relu}.tf32.f32``): f32 rounded
    to 10 mantissa bits, kept in the f32 layout with the low 13 bits zero. The ISA leaves the layout
    implementation-defined; NaN inputs follow the H100: ``.rna`` truncates the payload
    (``bits & 0xFFFFE000``, so 0x7F800001 becomes +inf), ``.rna.satfinite`` then subtracts 0x2000,
    ``.rn``/``.rz`` give 0x7FFFE000.
* fp8 (sm_89+): ``cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32 d, a, b`` (a -> upper byte),
  ``cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.{f16x2,bf16x2} d, a`` (upper half -> upper byte) and
  ``cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a`` (upper byte -> upper half). ``.rn`` and ``.satfinite``
  are mandatory for the narrowing forms. e4m3 has no infinities (max 448, NaN 0x7F/0xFF); e5m2 max is
  57344; satfinite clamps overflow and infinities to +-MAX; NaN -> 0x7F. e4m3/e5m2 -> f16 is exact
  (NaN -> 0x7FFF).
* f16x2/bf16x2 packing: ``cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`` puts a's result
  in the upper half of d, b's in the lower half.

All 278 cvt forms above were compared bit for bit with an H100 (see ``floats``): every result matched.
"""

from __future__ import annotations

import functools

import numpy as np

from fa4_mlir.emu.errors import Unsupported
from fa4_mlir.emu.isa import fpformats as FF
from fa4_mlir.emu.isa.fpformats import BF16, E4M3, E5M2, F16, F32, F64, TF32, low
from fa4_mlir.emu.isa.fpformats import (  # noqa: F401  (re-exported helpers)
    bf16_to_f32_bits, bits_to_f32, decode, f16_to_f32_bits, f32_to_bits, round_f32_to_bf16, round_f32_to_f16,
    round_f64_to_f32)
from fa4_mlir.emu.isa.floats import form

U64 = np.uint64
INTS = {"s8": (8, True), "s16": (16, True), "s32": (32, True), "s64": (64, True),
        "u8": (8, False), "u16": (16, False), "u32": (32, False), "u64": (64, False)}
FLOATS = {"f16": F16, "bf16": BF16, "f32": F32, "f64": F64, "tf32": TF32}
UDT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
SDT = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
FRND = frozenset({"rn", "rz", "rm", "rp"})
IRND = frozenset({"rni", "rzi", "rmi", "rpi"})
FP8 = {"e4m3x2": E4M3, "e5m2x2": E5M2}
PACKED16 = {"f16x2": F16, "bf16x2": BF16}


def _unsupported(dst, src, mods, why=""):
    extra = f" ({why})" if why else ""
    return Unsupported(f"{form('cvt', mods, dst, src)} is not supported by the emulator{extra}")


def _check(dst, src, mods, allowed, why=None):
    extra = mods - frozenset(allowed)
    if extra:
        raise _unsupported(dst, src, mods, why or ("modifier " + ", ".join("." + m for m in sorted(extra))
                                                   + " not allowed for this conversion"))


def _one(mods, group):
    got = mods & group
    if len(got) > 1:
        raise Unsupported(f"more than one rounding modifier: {sorted(got)}")
    return next(iter(got)) if got else None


# -- integers ------------------------------------------------------------------------------------
def _int_value(type_, bits):
    """(negative, magnitude as uint64) of integer ``bits`` of ``type_``."""
    w, signed = INTS[type_]
    u = low(bits, UDT[w])
    if not signed:
        return np.zeros(u.shape, bool), u.astype(U64)
    s = u.view(SDT[w]).astype(np.int64)
    neg = s < 0
    mag = np.where(neg, (~s.view(U64)) + U64(1), s.view(U64))
    return neg, mag


def _int_bounds(type_):
    w, signed = INTS[type_]
    if signed:
        return 1 << (w - 1), (1 << (w - 1)) - 1          # |min|, max
    return 0, (1 << w) - 1


def _int_to_int(dst, src, bits, sat):
    dw, _ = INTS[dst]
    sw, ssigned = INTS[src]
    u = low(bits, UDT[sw])
    wide = u.view(SDT[sw]).astype(np.int64).view(U64) if ssigned else u.astype(U64)
    if sat:
        neg, mag = _int_value(src, bits)
        lo_mag, hi = _int_bounds(dst)
        wide = np.where(neg & (mag > U64(lo_mag)), U64((-lo_mag) & 0xFFFFFFFFFFFFFFFF), wide)
        wide = np.where(~neg & (mag > U64(hi)), U64(hi), wide)
    return wide.astype(UDT[dw])


def _int_to_float(dst, src, bits, mode, sat):
    fmt = FLOATS[dst]
    neg, mag = _int_value(src, bits)
    out = FF.round_parts(neg, mag, np.zeros(mag.shape, np.int64), np.zeros(mag.shape, bool), fmt, mode)
    if sat:
        out = _sat(fmt, out)
    return out


_IROUND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def _float_to_int(dst, src, bits, irnd, ftz):
    fmt = FLOATS[src]
    b = FF.flush(fmt, bits) if ftz else low(bits, fmt.dtype)
    x = FF.decode(fmt, b)
    nan = np.isnan(x)
    with np.errstate(invalid="ignore"):
        r = _IROUND[irnd](np.where(nan, 0.0, x))
    w, signed = INTS[dst]
    lo_mag, hi = _int_bounds(dst)
    lo = -float(lo_mag)
    if w == 64:
        big = r >= float(hi) + 1.0               # 2^63 or 2^64: exact in float64
        small = r < lo if signed else r <= -1.0
        mid = np.where(big | small, 0.0, r)
        vals = mid.astype(np.int64).view(U64) if signed else mid.astype(U64)
        vals = np.where(big, U64(hi), np.where(small, U64((-lo_mag) & 0xFFFFFFFFFFFFFFFF), vals))
    else:
        c = np.clip(r, lo, float(hi))
        vals = c.astype(np.int64).view(U64)
    nan_val = 1 << (w - 1) if (src == "f64" or w == 64) else 0
    vals = np.where(nan, U64(nan_val), vals)
    return vals.astype(UDT[w])


# -- floats --------------------------------------------------------------------------------------
def _sat(fmt, bits):
    v = FF.decode(fmt, bits)
    one = FF.encode(np.ones(1), fmt)[0]
    out = np.where(v > 1.0, one, bits)
    return np.where(~(v > 0.0), fmt.dtype(0), out).astype(fmt.dtype)


def _relu(fmt, bits):
    v = FF.decode(fmt, bits)
    out = np.where(v <= 0.0, fmt.dtype(0), bits)
    return np.where(np.isnan(v), fmt.dtype(fmt.nan_enc), out).astype(fmt.dtype)


def _nan_narrow(src_fmt, dst_fmt, bits):
    """IEEE narrowing of NaN payloads: sign, quiet bit and the top payload bits (f64 sources)."""
    b = low(bits, src_fmt.dtype).astype(U64)
    sign = (b >> U64(src_fmt.width - 1)) & U64(1)
    payload = (b & U64((1 << src_fmt.mbits) - 1)) >> U64(src_fmt.mbits - dst_fmt.mbits)
    quiet = U64(1 << (dst_fmt.mbits - 1))
    enc = (sign << U64(dst_fmt.width - 1)) | U64(dst_fmt.inf_enc) | quiet | payload
    return enc.astype(dst_fmt.dtype)


def _nan_widen(src_fmt, dst_fmt, bits):
    """IEEE widening of NaN payloads (quieted) into f64."""
    b = low(bits, src_fmt.dtype).astype(U64)
    sign = (b >> U64(src_fmt.width - 1)) & U64(1)
    payload = (b & U64((1 << src_fmt.mbits) - 1)) << U64(dst_fmt.mbits - src_fmt.mbits)
    enc = (sign << U64(dst_fmt.width - 1)) | U64(dst_fmt.inf_enc) | U64(1 << (dst_fmt.mbits - 1)) | payload
    return enc.astype(dst_fmt.dtype)


def _to_tf32(bits, mode, satfinite, relu):
    b = low(bits, np.uint32)
    x = FF.decode(F32, b)
    enc = FF.encode(x, TF32, mode, satfinite=satfinite).astype(np.uint32) << np.uint32(13)
    if mode == "rna":
        # NaN inputs: the hardware truncates the payload (and .satfinite then subtracts one tf32 ulp)
        raw = b & np.uint32(0xFFFFE000)
        if satfinite:
            raw = raw - np.uint32(0x2000)
        enc = np.where(np.isnan(x), raw, enc)
    if relu:
        v = FF.decode(F32, enc)
        enc = np.where(v <= 0.0, np.uint32(0), enc)
        enc = np.where(np.isnan(x), np.uint32(0x7FFFE000), enc)
    return enc


def _float_to_float(dst, src, bits, mods):
    sfmt, dfmt = FLOATS[src], FLOATS[dst]
    ftz = "ftz" in mods
    b = low(bits, sfmt.dtype)
    if src == dst == "f32" and not mods:
        return b                                   # a plain cvt.f32.f32 is a move (NaNs unchanged)
    if src == "bf16" and dst == "f32" and not mods:
        return FF.bf16_to_f32_bits(b)              # exact, NaN payloads kept
    x = FF.decode(sfmt, b)
    nan = np.isnan(x)
    if ftz and src == "f32":
        # .ftz on an f32 source flushes subnormals and canonicalises NaNs (0x7FFFFFFF), as the hardware
        b = np.where(nan, np.uint32(0x7FFFFFFF), FF.flush(sfmt, b))
        x = FF.decode(sfmt, b)
    irnd = _one(mods, IRND)
    mode = _one(mods, FRND | {"rna"}) or "rn"
    out_ftz = ftz and dst == "f32"
    if dst == "tf32":
        return _to_tf32(b, mode, "satfinite" in mods, "relu" in mods)
    if src == "f32" and dst == "bf16" and mods <= {"rn", "rz", "rm", "rp"} and mode == "rn":
        return FF.round_f32_to_bf16(b)
    if irnd:
        with np.errstate(invalid="ignore"):
            x = _IROUND[irnd](x)
    out = FF.encode(x, dfmt, mode, ftz=out_ftz, satfinite="satfinite" in mods)
    # NaN payload rules (see the module docstring)
    if dst == "f64":
        out = np.where(nan, _nan_widen(sfmt, dfmt, b) if src != "f64" else (b | U64(1 << 51)), out)
    elif src == "f64":
        out = np.where(nan, _nan_narrow(sfmt, dfmt, b), out)
    elif src == "bf16" and dst == "f32" and not ftz:
        out = np.where(nan, FF.bf16_to_f32_bits(b), out)
    if "relu" in mods:
        out = _relu(dfmt, out)
    if "sat" in mods:
        out = _sat(dfmt, out)
    return out.astype(dfmt.dtype)


_RANK = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}


@functools.lru_cache(maxsize=1024)
def _compile(dst, src, mods):
    if src in FP8 or dst in FP8 and src not in ("f16x2", "bf16x2"):
        raise _unsupported(dst, src, mods, "use pack()/unpack() for this form")
    if dst in FP8:                                            # cvt.rn.satfinite{.relu}.e4m3x2.f16x2
        if "rn" not in mods or "satfinite" not in mods:
            raise _unsupported(dst, src, mods, ".rn and .satfinite are required")
        _check(dst, src, mods, {"rn", "satfinite", "relu"})
        fmt, sfmt = FP8[dst], PACKED16[src]
        relu = "relu" in mods

        def fp8_from_half(bits):
            b = low(bits, np.uint32)
            hi = _fp8(fmt, FF.decode(sfmt, (b >> np.uint32(16)).astype(np.uint16)), relu)
            lo = _fp8(fmt, FF.decode(sfmt, (b & np.uint32(0xFFFF)).astype(np.uint16)), relu)
            return (hi.astype(np.uint16) << np.uint16(8)) | lo.astype(np.uint16)
        if src == "f16x2":
            table = _fp8_table(fmt.name, relu).astype(np.uint16)

            def fp8_from_half(bits):  # noqa: F811  (f16 inputs: one exact table lookup per half)
                b = low(bits, np.uint32)
                return (table[b >> np.uint32(16)] << np.uint16(8)) | table[b & np.uint32(0xFFFF)]
        return fp8_from_half
    if dst in PACKED16 or src in PACKED16:
        raise _unsupported(dst, src, mods, "packed conversions take two sources (use pack())"
                           if src == "f32" else "not a cvt form")
    irnd, frnd = _one(mods, IRND), _one(mods, FRND | {"rna"})
    if src in INTS and dst in INTS:
        _check(dst, src, mods, {"sat"})
        if "sat" in mods:
            lo_d, hi_d = _int_bounds(dst)
            lo_s, hi_s = _int_bounds(src)
            if lo_d >= lo_s and hi_d >= hi_s:
                raise _unsupported(dst, src, mods,
                                   ".sat is illegal: the destination range contains the source's")
        sat = "sat" in mods
        return lambda v: _int_to_int(dst, src, v, sat)
    if src in INTS and dst in FLOATS and dst != "tf32":
        if frnd is None or frnd == "rna":
            raise _unsupported(dst, src, mods, "a rounding modifier .rn/.rz/.rm/.rp is required")
        _check(dst, src, mods,
               FRND | ({"sat"} if dst != "bf16" else set()) | ({"ftz"} if dst == "f32" else set()))
        sat = "sat" in mods
        return lambda v: _int_to_float(dst, src, v, frnd, sat)
    if src in FLOATS and dst in INTS:
        if src == "tf32":
            raise _unsupported(dst, src, mods, "tf32 is only a destination format")
        if irnd is None:
            raise _unsupported(dst, src, mods, "an integer rounding modifier .rni/.rzi/.rmi/.rpi is required")
        _check(dst, src, mods, IRND | {"sat"} | ({"ftz"} if src == "f32" else set()))
        ftz = "ftz" in mods
        return lambda v: _float_to_int(dst, src, v, irnd, ftz)
    if src not in FLOATS or dst not in FLOATS:
        raise _unsupported(dst, src, mods, "unknown type")
    # float -> float
    if dst == "tf32":
        if src != "f32":
            raise _unsupported(dst, src, mods, "tf32 conversions take an f32 source")
        if frnd == "rna":
            _check(dst, src, mods, {"rna", "satfinite"})
        elif frnd in ("rn", "rz"):
            _check(dst, src, mods, {"rn", "rz", "satfinite", "relu"})
        else:
            raise _unsupported(dst, src, mods, ".rna, .rn or .rz is required")
        return lambda v: _float_to_float(dst, src, v, mods)
    if src == "tf32":
        raise _unsupported(dst, src, mods, "tf32 is only a destination format")
    allowed = set()
    if "f32" in (src, dst):
        allowed.add("ftz")
    if dst in ("f16", "f32", "f64"):
        allowed.add("sat")
    if src == dst:
        if frnd:
            raise _unsupported(dst, src, mods, "a floating-point rounding modifier is illegal here")
        _check(dst, src, mods, allowed | IRND)
        return lambda v: _float_to_float(dst, src, v, mods)
    if irnd:
        raise _unsupported(dst, src, mods, "integer rounding needs the same source and destination type")
    narrowing = {src, dst} == {"f16", "bf16"} or _RANK[dst] < _RANK[src]
    if narrowing:
        if frnd is None and {src, dst} != {"f16", "bf16"}:
            raise _unsupported(dst, src, mods, "a rounding modifier .rn/.rz/.rm/.rp is required")
        if frnd == "rna":
            raise _unsupported(dst, src, mods, ".rna is only defined for tf32")
        allowed |= FRND
        if src == "f32" and dst in ("f16", "bf16") and frnd in ("rn", "rz"):
            allowed |= {"relu", "satfinite"}
            for a, b in (("relu", "sat"), ("satfinite", "ftz"), ("relu", "ftz")):
                if a in mods and b in mods:
                    raise _unsupported(dst, src, mods, f".{a} cannot be combined with .{b}")
        _check(dst, src, mods, allowed)
        return lambda v: _float_to_float(dst, src, v, mods)
    # exact widening
    if frnd and src != "bf16":
        raise _unsupported(dst, src, mods, "the conversion is exact; a rounding modifier is illegal")
    _check(dst, src, mods, allowed | (FRND if src == "bf16" else set()))
    return lambda v: _float_to_float(dst, src, v, mods - FRND)


def convert(dst_type: str, src_type: str, value, modifiers: frozenset = frozenset()) -> np.ndarray:
    """``cvt{modifiers}.dst_type.src_type d, a`` on raw bits (see the module docstring)."""
    return _compile(dst_type, src_type, frozenset(modifiers))(value)


# -- packed forms ---------------------------------------------------------------------------------
def _fp8_exact(fmt, x, relu):
    out = FF.encode(x, fmt, "rn", satfinite=True)
    if relu:
        out = np.where(x <= 0.0, fmt.dtype(0), out)
    return np.where(np.isnan(x), fmt.dtype(fmt.nan_enc), out).astype(np.uint8)


@functools.lru_cache(maxsize=8)
def _fp8_table(fmt_name, relu):
    """e4m3/e5m2 encodings (rn, satfinite, optional relu) of all 65536 f16 values."""
    fmt = FF.FORMATS[fmt_name]
    return _fp8_exact(fmt, FF.decode(F16, np.arange(65536, dtype=np.uint32).astype(np.uint16)), relu)


def _fp8(fmt, x, relu):
    """float64 ``x`` -> e4m3/e5m2 (rn, satfinite): rounded to odd into f16 first (11 bits >= 3 + 2, so the
    second rounding is exact), then a table of the f16 values."""
    return _fp8_table(fmt.name, relu)[FF.ro_narrow(x, np.float16, np.uint16)]


@functools.lru_cache(maxsize=256)
def _compile_pack(dst, mods):
    if dst in FP8:
        if "rn" not in mods or "satfinite" not in mods:
            raise _unsupported(dst, "f32", mods, ".rn and .satfinite are required")
        _check(dst, "f32", mods, {"rn", "satfinite", "relu"})
        fmt, relu = FP8[dst], "relu" in mods

        def fp8(a, b):
            hi = _fp8(fmt, FF.decode(F32, a), relu)
            lo = _fp8(fmt, FF.decode(F32, b), relu)
            return (hi.astype(np.uint16) << np.uint16(8)) | lo.astype(np.uint16)
        return fp8
    if dst in PACKED16:
        frnd = _one(mods, FRND | {"rna", "rs"})
        if frnd not in ("rn", "rz"):
            raise _unsupported(dst, "f32", mods, ".rn or .rz is required" if frnd is None or frnd in FRND
                               else f".{frnd} is not supported")
        _check(dst, "f32", mods, {"rn", "rz", "relu", "satfinite"})
        elem = "f16" if dst == "f16x2" else "bf16"
        inner = _compile(elem, "f32", mods)

        def half2(a, b):
            return (inner(a).astype(np.uint32) << np.uint32(16)) | inner(b).astype(np.uint32)
        return half2
    raise _unsupported(dst, "f32", mods, "not a two-source cvt form")


def pack(dst_type: str, a, b, modifiers: frozenset = frozenset()) -> np.ndarray:
    """``cvt{modifiers}.dst_type.f32 d, a, b``: a's result in the upper half (byte) of d, b's in the lower.

    dst_type is f16x2 or bf16x2 (uint32 result) or e4m3x2/e5m2x2 (uint16 result).
    """
    return _compile_pack(dst_type, frozenset(modifiers))(low(a, np.uint32), low(b, np.uint32))


@functools.lru_cache(maxsize=64)
def _compile_unpack(dst, src, mods):
    if dst != "f16x2" or src not in FP8:
        raise _unsupported(dst, src, mods, "only .f16x2 from .e4m3x2/.e5m2x2 is an unpacking cvt")
    if "rn" not in mods:
        raise _unsupported(dst, src, mods, ".rn is required")
    _check(dst, src, mods, {"rn", "relu"})
    fmt, relu = FP8[src], "relu" in mods
    table = FF.encode(FF.decode(fmt, np.arange(256, dtype=np.uint8)), F16, "rn")
    if relu:
        table = _relu(F16, table)
    table = table.astype(np.uint32)

    def unpack_fn(bits):
        b = low(bits, np.uint16)
        hi = table[(b >> np.uint16(8)).astype(np.uint8)]
        return (hi << np.uint32(16)) | table[(b & np.uint16(0xFF)).astype(np.uint8)]
    return unpack_fn


def unpack(dst_type: str, src_type: str, value, modifiers: frozenset = frozenset()) -> np.ndarray:
    """``cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a``: the upper byte of a goes to the upper half of d."""
    return _compile_unpack(dst_type, src_type, frozenset(modifiers))(value)
