"""PTX integer, bit-manipulation and logic instructions as pure NumPy functions over the lanes of a warp.

Values are raw bits in unsigned arrays (uint16 / uint32 / uint64 for 16 / 32 / 64-bit types, bool for
``.pred``). An operand may be wider than its type: its low bits are used (PTX ISA 9.4.1, "Operand Size
Exceeding Instruction-Type Size": sources are chopped). Results have the storage dtype of the result
type: the instruction type, ``u32`` for popc/clz/bfind, the doubled width for ``.wide``. Arithmetic
wraps modulo 2**n unless ``.sat`` is given. Sections cited are those of the PTX ISA 9.0 document
(9.7.1 Integer Arithmetic, 9.7.6 Comparison and Selection, 9.7.8 Logic and Shift, 9.7.9.7 prmt).

Rules the ISA leaves to the machine ("Division by zero yields an unspecified, machine-specific
value", 9.7.1.8 div / 9.7.1.9 rem), as measured on an H100 (sm_90, driver 580 JIT) for every 16/32/64-bit
form (the hardware probe is described in ``test/python/test_emu_integers.py``):

* ``div`` and ``rem`` by zero give all ones, signed or unsigned, whatever the dividend (``rem.u32 5, 0``
  is 0xffffffff, not 5; ``div.s32 -7, 0`` is -1).
* Signed quotients truncate toward zero and remainders take the dividend's sign (C rules);
  ``MIN / -1`` wraps to ``MIN`` and ``MIN % -1`` is 0.
* ``shl``/``shr``: the amount is a u32 and "Shift amounts greater than the register width N are
  clamped to N" (9.7.8.8/9): ``shl`` and ``shr.u``/``shr.b`` give 0, ``shr.s`` the sign fill.
* ``mul24``/``mad24``: the operands' bits 31..24 are ignored; ``.s32`` sign-extends bit 23.
* Where the ISA's pseudo-code and the H100 disagree on inputs the ISA rules out, a ``ProtocolError``
  is raised instead of picking one: bfe/bfi ``.b64``/``.u64``/``.s64`` position or length over 255,
  ``fns`` offset -2**31, ``fns`` base over 31.

Forms outside the ISA's syntax, and forms whose meaning needs state this module does not hold (the
carry flag of ``.cc``, the predicate output of ``lop3.BoolOp``), raise ``Unsupported`` naming the form.
"""

from __future__ import annotations

import functools

import numpy as np

from fa4_mlir.emu.errors import ProtocolError, Unsupported

_UD = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SD = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_WIDE = {16: 32, 32: 64}
_ARITH_TYPES = {f"{k}{n}" for k in "su" for n in (16, 32, 64)}
_BIT_TYPES = _ARITH_TYPES | {f"b{n}" for n in (16, 32, 64)}


# -- helpers ------------------------------------------------------------------------------------------
def _form(op: str, type_name: str, mods) -> str:
    return ".".join([op, *sorted(mods), type_name])


def _unsupported(op, type_name, mods, why: str) -> Unsupported:
    return Unsupported(f"{_form(op, type_name, mods)}: {why}")


def _kind_bits(type_name: str) -> tuple[str, int]:
    kind, bits = type_name[:1], type_name[1:]
    if kind not in "bsu" or bits not in ("8", "16", "32", "64"):
        raise Unsupported(f"integer type .{type_name} is not an integer or bit-size type")
    return kind, int(bits)


def _u(x, bits: int) -> np.ndarray:
    """The low ``bits`` bits of ``x`` as an unsigned array (zero-extended if ``x`` is narrower)."""
    x = np.asarray(x)
    if x.dtype == np.bool_:
        x = x.astype(np.uint8)
    elif x.dtype.kind == "i":
        x = x.view(_UD[8 * x.dtype.itemsize])
    return x.astype(_UD[bits], copy=False)


def _s(x, bits: int) -> np.ndarray:
    return _u(x, bits).view(_SD[bits])


def _ones(bits: int):
    return _UD[bits](~np.uint64(0) >> np.uint64(64 - bits))


def _shl(x: np.ndarray, amount, bits: int) -> np.ndarray:
    """``x << amount`` in ``bits`` bits; 0 where ``amount >= bits`` (NumPy's shifts are undefined there)."""
    amount = np.asarray(amount, np.int64)
    sh = np.minimum(amount, bits - 1).astype(_UD[bits])
    return np.where(amount >= bits, _UD[bits](0), x << sh)


def _shr(x: np.ndarray, amount, bits: int) -> np.ndarray:
    """Logical ``x >> amount``; 0 where ``amount >= bits``."""
    amount = np.asarray(amount, np.int64)
    sh = np.minimum(amount, bits - 1).astype(_UD[bits])
    return np.where(amount >= bits, _UD[bits](0), x >> sh)


def _low_mask(k, bits: int) -> np.ndarray:
    """Per lane, the mask of the ``k`` low bits (0 <= k <= bits)."""
    k = np.asarray(k, np.int64)
    return np.where(k >= bits, _ones(bits), _shl(np.ones(k.shape, _UD[bits]), k, bits) - _UD[bits](1))


def _popc(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x).astype(np.uint32)
    count = np.zeros(x.shape, np.uint32)
    for i in range(8 * x.dtype.itemsize):
        count += ((x >> x.dtype.type(i)) & x.dtype.type(1)).astype(np.uint32)
    return count


def _clz(x: np.ndarray, bits: int) -> np.ndarray:
    """Leading zeros of ``x`` in ``bits`` bits (``bits`` for 0): smear the top set bit down, count."""
    x = x.copy()
    s = 1
    while s < bits:
        x |= x >> _UD[bits](s)
        s *= 2
    return np.uint32(bits) - _popc(x)


def _saturate32(value: np.ndarray) -> np.ndarray:
    return np.clip(value, -(1 << 31), (1 << 31) - 1).astype(np.int32).view(np.uint32)


def _mul_wide64(a: np.ndarray, b: np.ndarray, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) 64-bit halves of the 128-bit product of 64-bit ``a`` and ``b``, with 32-bit limbs."""
    m32, s32 = np.uint64(0xFFFFFFFF), np.uint64(32)
    a0, a1, b0, b1 = a & m32, a >> s32, b & m32, b >> s32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> s32) + (p01 & m32) + (p10 & m32)
    hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
    lo = (mid << s32) | (p00 & m32)
    if signed:  # two's complement: subtract b (a) from the high half where a (b) is negative
        zero = np.uint64(0)
        top = np.uint64(63)
        hi = hi - np.where(a >> top != zero, b, zero) - np.where(b >> top != zero, a, zero)
    return hi, lo


def _mul(mode: str, kind: str, bits: int, a, b) -> np.ndarray:
    """``mul.mode`` (9.7.1.3): t = a * b; lo = t<n-1..0>, hi = t<2n-1..n>, wide = t (2n bits)."""
    if bits == 64:
        ua, ub = _u(a, 64), _u(b, 64)
        return ua * ub if mode == "lo" else _mul_wide64(ua, ub, kind == "s")[0]
    if mode == "lo":
        return _u(a, bits) * _u(b, bits)
    wide = _WIDE[bits]
    ext = _s if kind == "s" else _u
    t = _u(ext(a, bits).astype(_SD[wide] if kind == "s" else _UD[wide]), wide)
    t = t * _u(ext(b, bits).astype(_SD[wide] if kind == "s" else _UD[wide]), wide)
    return t if mode == "wide" else (t >> _UD[wide](bits)).astype(_UD[bits])


def _mul24(mode: str, kind: str, a, b) -> np.ndarray:
    """``mul24`` (9.7.1.5): the 48-bit product of the low 24 bits; lo = t<31..0>, hi = t<47..16>."""
    def ext(x):
        x = (_u(x, 32) & np.uint32(0xFFFFFF)).astype(np.int64)
        return np.where(x >= 1 << 23, x - (1 << 24), x) if kind == "s" else x
    t = ext(a) * ext(b)
    return _u(t if mode == "lo" else t >> np.int64(16), 32)


def _divmod(kind: str, bits: int, a, b) -> tuple[np.ndarray, np.ndarray]:
    """Quotient and remainder (9.7.1.8 div, 9.7.1.9 rem): truncation toward zero; by zero see module doc."""
    U = _UD[bits]
    ua, ub = _u(a, bits), _u(b, bits)
    zero = ub == 0
    if kind == "u":
        safe = np.where(zero, U(1), ub)
        q, r = ua // safe, ua % safe
    else:
        sa, sb = _s(a, bits), _s(b, bits)
        mag_a = np.where(sa < 0, U(0) - ua, ua)  # |MIN| = 2**(n-1) is representable unsigned
        mag_b = np.where(sb < 0, U(0) - ub, np.where(zero, U(1), ub))
        q, r = mag_a // mag_b, mag_a % mag_b
        q = np.where((sa < 0) != (sb < 0), U(0) - q, q)  # MIN / -1 wraps to MIN
        r = np.where(sa < 0, U(0) - r, r)
    return np.where(zero, _ones(bits), q), np.where(zero, _ones(bits), r)


def _pos_len(form: str, bits: int, pos, length) -> tuple[np.ndarray, np.ndarray]:
    """bfe/bfi's position and length: u32 operands "restricted to the 8-bit value range 0..255" and
    masked with 0xff by the pseudo-code. An H100 does that for the 32-bit forms, but its 64-bit forms
    behave as the pseudo-code without the masks (bfe.u64 1, 256, 200 is 0 there, 1 by the ISA): values
    over 255 in a 64-bit form are a ProtocolError rather than a choice between the two."""
    pos, length = _u(pos, 32), _u(length, 32)
    if bits == 64 and ((pos > 255) | (length > 255)).any():
        raise ProtocolError(f"{form}: position and length must be in 0..255 (9.7.1.19/20), got position "
                            f"{sorted(set(pos.tolist()))[-1]}, length {sorted(set(length.tolist()))[-1]}; "
                            f"sm_90 does not mask them with 0xff as the ISA's pseudo-code does")
    return (pos & np.uint32(0xFF)).astype(np.int64), (length & np.uint32(0xFF)).astype(np.int64)


def _bfe(kind: str, bits: int, a, b, c) -> np.ndarray:
    """``bfe`` (9.7.1.19), the ISA's pseudo-code: pos = b & 0xff, len = c & 0xff; bit i of d is
    a[pos+i] if i < len and pos+i <= msb, else sbit; sbit = 0 for .u or len == 0, else
    a[min(pos+len-1, msb)]."""
    x = _u(a, bits)
    pos, length = _pos_len(f"bfe.{kind}{bits}", bits, b, c)
    k = np.clip(np.minimum(length, bits - pos), 0, bits)  # bits taken from a
    field = _shr(x, pos, bits) & _low_mask(k, bits)
    if kind == "u":
        return field
    sbit_pos = np.minimum(pos + length - 1, bits - 1)
    sbit = (length > 0) & ((_shr(x, np.maximum(sbit_pos, 0), bits) & _UD[bits](1)) != 0)
    return np.where(sbit, field | ~_low_mask(k, bits), field)


def _bfi(bits: int, a, b, c, d) -> np.ndarray:
    """``bfi`` (9.7.1.20): f = b; f[pos+i] = a[i] for i < len and pos+i <= msb (pos, len & 0xff)."""
    pos, length = _pos_len(f"bfi.b{bits}", bits, c, d)
    k = np.clip(np.minimum(length, bits - pos), 0, bits)
    mask = _shl(_low_mask(k, bits), pos, bits)
    return (_u(b, bits) & ~mask) | (_shl(_u(a, bits), pos, bits) & mask)


def _brev(x: np.ndarray, bits: int) -> np.ndarray:
    """``brev`` (9.7.1.18): d[i] = a[msb-i]; swap ever larger blocks."""
    U = _UD[bits]
    s = 1
    while s < bits:
        pattern = 0
        for start in range(0, bits, 2 * s):
            pattern |= ((1 << s) - 1) << start
        m = U(pattern)
        x = ((x >> U(s)) & m) | ((x & m) << U(s))
        s *= 2
    return x


def _fns(mask, base, offset) -> np.ndarray:
    """``fns.b32`` (9.7.1.17), the ISA's pseudo-code: the |offset|-th set bit of mask counting up
    (offset > 0) or down (offset < 0) from bit base; offset 0 tests bit base; not found = 0xffffffff."""
    m = _u(mask, 32)
    base = _u(base, 32).astype(np.int64)
    if (base > 31).any():
        raise ProtocolError(f"fns.b32: base must be <= 31 (9.7.1.17: otherwise undefined), got lanes with "
                            f"{sorted(set(base[base > 31].tolist()))[:4]}")
    off = _s(offset, 32).astype(np.int64)
    if (off == -(1 << 31)).any():  # |offset| overflows 32 bits; an H100 returns 0, the pseudo-code ~0
        raise ProtocolError("fns.b32: offset -2**31 has no 32-bit |offset| (9.7.1.17)")
    bit = lambda p: ((m >> np.uint32(p)) & np.uint32(1)) != 0  # noqa: E731
    d = np.full(m.shape, 0xFFFFFFFF, np.int64)
    at_base = ((m >> base.astype(np.uint32)) & np.uint32(1)) != 0
    d = np.where((off == 0) & at_base, base, d)
    seen = np.zeros(m.shape, np.int64)
    for p in range(32):  # upward search
        hit = (off > 0) & (p >= base) & bit(p)
        seen += hit
        d = np.where(hit & (seen == off), p, d)
    seen[:] = 0
    for p in range(31, -1, -1):  # downward search
        hit = (off < 0) & (p <= base) & bit(p)
        seen += hit
        d = np.where(hit & (seen == -off), p, d)
    return d.astype(np.uint32)


# prmt (9.7.9.7): the d.b3..d.b0 source bytes for each mode and selector c[1:0].
_PRMT = {
    "f4e": ((3, 2, 1, 0), (4, 3, 2, 1), (5, 4, 3, 2), (6, 5, 4, 3)),
    "b4e": ((5, 6, 7, 0), (6, 7, 0, 1), (7, 0, 1, 2), (0, 1, 2, 3)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((3, 2, 1, 0), (3, 2, 1, 1), (3, 2, 2, 2), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (1, 1, 1, 0), (2, 2, 1, 0), (3, 2, 1, 0)),
    "rc16": ((1, 0, 1, 0), (3, 2, 3, 2), (1, 0, 1, 0), (3, 2, 3, 2)),
}


def _prmt(mode: str | None, a, b, c) -> np.ndarray:
    """``prmt.b32{.mode}`` (9.7.9.7): bytes of {b, a} picked by c's nibbles (generic, msb = replicate the
    byte's sign) or by the mode's table row c[1:0]."""
    tmp64 = (_u(b, 64) << np.uint64(32)) | _u(a, 64)
    c = _u(c, 32)
    d = np.zeros(tmp64.shape, np.uint32)
    for i in range(4):  # destination byte i
        if mode is None:
            sel = (c >> np.uint32(4 * i)) & np.uint32(0xF)
        else:
            rows = np.array([row[3 - i] for row in _PRMT[mode]], np.uint32)
            sel = rows[c & np.uint32(3)]
        byte = ((tmp64 >> (np.uint64(8) * (sel & np.uint32(7)).astype(np.uint64))) & np.uint64(0xFF))
        byte = byte.astype(np.uint32)
        if mode is None:
            byte = np.where((sel & np.uint32(8)) != 0,
                            np.where(byte & np.uint32(0x80), np.uint32(0xFF), np.uint32(0)), byte)
        d |= byte << np.uint32(8 * i)
    return d


def _lop3(a, b, c, lut) -> np.ndarray:
    """``lop3.b32`` (9.7.8.6): bit i of immLut is F at (a, b, c) = (i>>2 & 1, i>>1 & 1, i & 1), since
    ta = 0xF0, tb = 0xCC, tc = 0xAA."""
    a, b, c, lut = _u(a, 32), _u(b, 32), _u(c, 32), _u(lut, 32)
    d = np.zeros(a.shape, np.uint32)
    for i in range(8):
        term = (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
        d |= term & (np.uint32(0) - ((lut >> np.uint32(i)) & np.uint32(1)))
    return d


def _bmsk(clamp: bool, a, b) -> np.ndarray:
    """``bmsk.mode.b32`` (9.7.1.22), the ISA's pseudo-code."""
    a, b = _u(a, 32), _u(b, 32)
    a1, b1 = (a & np.uint32(31)).astype(np.int64), (b & np.uint32(31)).astype(np.int64)
    ones = np.full(a.shape, 0xFFFFFFFF, np.uint32)
    mask0 = _shl(ones, a1, 32)
    total = a1 + b1
    overflow = total >= 32
    if clamp:
        mask0 = np.where(a >= 32, np.uint32(0), mask0)
        overflow = overflow | (a >= 32) | (b >= 32)
    mask1 = np.where(overflow, np.uint32(0), np.where(b1 == 0, ones, _shl(ones, total, 32)))
    return mask0 & ~mask1


def _szext(clamp: bool, signed: bool, a, b) -> np.ndarray:
    """``szext.mode.type`` (9.7.1.21), the ISA's pseudo-code."""
    a, b = _u(a, 32), _u(b, 32)
    b1 = (b & np.uint32(31)).astype(np.int64)
    too_large = (b >= 32) if clamp else np.zeros(a.shape, bool)
    mask = np.where(too_large, np.uint32(0), _shl(np.full(a.shape, 0xFFFFFFFF, np.uint32), b1, 32))
    sign_pos = ((b1 - 1) & 31).astype(np.uint32)
    sign = (b1 != 0) & ~too_large & (((a >> sign_pos) & np.uint32(1)) != 0) if signed else False
    return (a & ~mask) | np.where(sign, mask, np.uint32(0))


def _dot(op: str, type_name: str, mods, a, b, c) -> np.ndarray:
    """``dp4a.atype.btype`` / ``dp2a.mode.atype.btype`` (9.7.1.23/24): c plus the sum of the products of
    sign- or zero-extended parts, wrapped to 32 bits. ``type_name`` is "atype.btype" or one type for
    both."""
    types = type_name.split(".")
    atype, btype = (types * 2)[:2]
    if len(types) > 2 or {atype, btype} - {"u32", "s32"}:
        raise _unsupported(op, type_name, mods, "the types must be .u32 or .s32 (atype.btype)")
    modes = set(mods)
    if op == "dp4a" and modes or op == "dp2a" and modes not in ({"lo"}, {"hi"}):
        raise _unsupported(op, type_name, mods, "dp2a takes .lo or .hi, dp4a no modifier")

    def parts(x, width, signed):
        x = _u(x, 32)
        out = []
        for i in range(32 // width):
            p = ((x >> np.uint32(width * i)) & np.uint32((1 << width) - 1)).astype(np.int64)
            out.append(np.where(p >= 1 << (width - 1), p - (1 << width), p) if signed else p)
        return out
    vb = parts(b, 8, btype == "s32")
    va = parts(a, 8 if op == "dp4a" else 16, atype == "s32")
    if op == "dp2a":
        vb = vb[2:] if "hi" in modes else vb[:2]
    acc = _s(c, 32).astype(np.int64) if "s32" in (atype, btype) else _u(c, 32).astype(np.int64)
    for x, y in zip(va, vb):
        acc = acc + x * y
    return _u(acc, 32)


def _x2(op: str, kind: str, mods, a, b) -> np.ndarray:
    """add / min / max on .u16x2 / .s16x2 (9.7.1.1, 9.7.1.12/13): each half word on its own."""
    a, b = _u(a, 32), _u(b, 32)
    out = np.zeros(a.shape, np.uint32)
    for half in (0, 16):
        x = (a >> np.uint32(half)).astype(np.uint16)
        y = (b >> np.uint32(half)).astype(np.uint16)
        if op == "add":
            r = x + y
        else:
            xs, ys = (x.view(np.int16), y.view(np.int16)) if kind == "s" else (x, y)
            r = np.where((xs < ys) if op == "min" else (xs > ys), x, y)
            if "relu" in mods:
                r = np.where(r.view(np.int16) < 0, np.uint16(0), r)
        out |= r.astype(np.uint32) << np.uint32(half)
    return out


# -- the instruction table: op -> (operand count, allowed modifier sets) --------------------------------
_NONE = (frozenset(),)
_MODES = (frozenset({"lo"}), frozenset({"hi"}), frozenset({"wide"}))
_SPEC = {
    "add": (2, "arith"), "sub": (2, "arith"), "mul": (2, "arith"), "mad": (3, "arith"),
    "mul24": (2, "s32u32"), "mad24": (3, "s32u32"), "sad": (3, "arith"), "div": (2, "arith"),
    "rem": (2, "arith"),
    "abs": (1, "signed"), "neg": (1, "signed"), "min": (2, "arith"), "max": (2, "arith"),
    "popc": (1, "b3264"), "clz": (1, "b3264"), "brev": (1, "b3264"), "bfind": (1, "su3264"),
    "bfe": (3, "su3264"), "bfi": (4, "b3264"), "fns": (3, "b32"), "shl": (2, "b"), "shr": (2, "bsu"),
    "shf": (3, "b32"), "prmt": (3, "b32"), "lop3": (4, "b32"), "and": (2, "logic"), "or": (2, "logic"),
    "xor": (2, "logic"), "not": (1, "logic"), "cnot": (1, "b"), "bmsk": (2, "b32"), "szext": (2, "s32u32"),
    "dp4a": (3, "dot"), "dp2a": (3, "dot"),
}
# Exactly the types of each instruction's ISA syntax (ptxas 13.0 rejects the others, e.g. shl.u32,
# popc.u32, bfe.b32, and.u32, min.b32).
_B = {"b16", "b32", "b64"}
_TYPES = {
    "arith": _ARITH_TYPES, "signed": {"s16", "s32", "s64"}, "s32u32": {"s32", "u32"}, "b": _B,
    "bsu": _BIT_TYPES, "b3264": {"b32", "b64"}, "su3264": {"s32", "s64", "u32", "u64"}, "b32": {"b32"},
    "logic": _B | {"pred"},
}
_MODS = {
    "add": (frozenset(), frozenset({"sat"})), "sub": (frozenset(), frozenset({"sat"})),
    "mul": _MODES, "mad": _MODES + (frozenset({"hi", "sat"}),), "mul24": _MODES[:2],
    "mad24": _MODES[:2] + (frozenset({"hi", "sat"}),), "min": (frozenset(), frozenset({"relu"})),
    "max": (frozenset(), frozenset({"relu"})), "bfind": (frozenset(), frozenset({"shiftamt"})),
    "shf": tuple(frozenset({d, m}) for d in ("l", "r") for m in ("clamp", "wrap")),
    "prmt": (frozenset(),) + tuple(frozenset({m}) for m in _PRMT),
    "bmsk": (frozenset({"clamp"}), frozenset({"wrap"})), "szext": (frozenset({"clamp"}), frozenset({"wrap"})),
}


def _check(op: str, type_name: str, mods: frozenset, n_operands: int) -> None:
    if op in ("addc", "subc", "madc") or "cc" in mods:
        raise _unsupported(op, type_name, mods, "the carry flag (.cc, addc/subc/madc) is not modelled")
    if op not in _SPEC:
        raise _unsupported(op, type_name, mods, "not an integer instruction this module implements")
    arity, types = _SPEC[op]
    x2 = type_name in ("u16x2", "s16x2") and op in ("add", "min", "max")
    if types != "dot" and type_name not in _TYPES[types] and not x2:
        raise _unsupported(op, type_name, mods, f"type .{type_name} is not allowed (ISA syntax of {op})")
    if op == "lop3" and mods & {"and", "or"}:
        raise _unsupported(op, type_name, mods, "lop3.BoolOp writes a predicate too; not modelled")
    allowed = _MODS.get(op, _NONE)
    if types != "dot" and mods not in allowed:
        want = " or ".join("{" + " ".join("." + m for m in sorted(s)) + "}" if s else "none"
                           for s in allowed)
        raise _unsupported(op, type_name, mods, f"modifiers must be {want}")
    if "sat" in mods and type_name != "s32" or "relu" in mods and type_name not in ("s32", "s16x2"):
        raise _unsupported(op, type_name, mods, ".sat applies to .s32 only, .relu to .s32/.s16x2 only")
    if "wide" in mods and type_name[1:] == "64":
        raise _unsupported(op, type_name, mods, ".wide is supported only for 16- and 32-bit types")
    if n_operands != arity:
        raise _unsupported(op, type_name, mods, f"expected {arity} source operands, got {n_operands}")


@functools.lru_cache(maxsize=None)
def _checked(op: str, type_name: str, mods: frozenset, n_operands: int) -> bool:
    _check(op, type_name, mods, n_operands)
    return True


# -- public API ---------------------------------------------------------------------------------------
def arith(op: str, type: str, operands: list, modifiers: frozenset = frozenset()) -> np.ndarray:
    """The result of integer/bit instruction ``op.<modifiers>.<type>`` on ``operands``, the sources in
    PTX order (shl/shr's amount, bfe's and bfi's position and length, shf's c, lop3's immLut, fns's base
    and offset are u32 arrays; mad.wide's c has the doubled width; .pred operands are bool arrays).
    dp4a/dp2a take ``type`` "atype.btype" (one name means both). Returns the result type's storage
    dtype. Raises ``Unsupported`` (at the first call, whatever the values) for forms outside the ISA or
    not modelled, ``ProtocolError`` for operand values the ISA rules out (see the module doc)."""
    mods = frozenset(modifiers)
    _checked(op, type, mods, len(operands))
    operands = np.broadcast_arrays(*(np.asarray(o) for o in operands))  # a scalar operand is fine
    with np.errstate(all="ignore"):
        return _arith(op, type, operands, mods)


def _arith(op: str, type_name: str, ops: list, mods: frozenset) -> np.ndarray:
    if op in ("dp4a", "dp2a"):
        return _dot(op, type_name, mods, *ops)
    if type_name == "pred":
        x = [np.asarray(o, bool) for o in ops]
        return {"and": lambda: x[0] & x[1], "or": lambda: x[0] | x[1], "xor": lambda: x[0] ^ x[1],
                "not": lambda: ~x[0]}[op]()
    if type_name in ("u16x2", "s16x2"):
        return _x2(op, type_name[0], mods, *ops)
    kind, bits = _kind_bits(type_name)
    U = _UD[bits]
    a = _u(ops[0], bits)
    if op in ("add", "sub"):
        b = _u(ops[1], bits)
        if "sat" in mods:
            sa, sb = _s(a, 32).astype(np.int64), _s(b, 32).astype(np.int64)
            return _saturate32(sa + sb if op == "add" else sa - sb)
        return a + b if op == "add" else a - b
    if op in ("mul", "mad"):
        mode = next(iter(mods - {"sat"}))
        t = _mul(mode, kind, bits, a, ops[1])
        if op == "mul":
            return t
        if "sat" in mods:
            return _saturate32(_s(t, 32).astype(np.int64) + _s(ops[2], 32).astype(np.int64))
        return t + _u(ops[2], 2 * bits if mode == "wide" else bits)
    if op in ("mul24", "mad24"):
        mode = next(iter(mods - {"sat"}))
        t = _mul24(mode, kind, a, ops[1])
        if op == "mul24":
            return t
        if "sat" in mods:
            return _saturate32(_s(t, 32).astype(np.int64) + _s(ops[2], 32).astype(np.int64))
        return t + _u(ops[2], 32)
    if op in ("div", "rem"):
        q, r = _divmod(kind, bits, a, ops[1])
        return q if op == "div" else r
    signed = kind == "s"
    if op == "sad":  # 9.7.1.7: d = c + ((a < b) ? b - a : a - b)
        b = _u(ops[1], bits)
        less = _s(a, bits) < _s(b, bits) if signed else a < b
        return _u(ops[2], bits) + np.where(less, b - a, a - b)
    if op == "abs":
        return np.where(_s(a, bits) < 0, U(0) - a, a)
    if op == "neg":
        return U(0) - a
    if op in ("min", "max"):
        b = _u(ops[1], bits)
        x, y = (_s(a, bits), _s(b, bits)) if signed else (a, b)
        r = np.where((x < y) if op == "min" else (x > y), a, b)
        return np.where(_s(r, bits) < 0, U(0), r) if "relu" in mods else r
    if op == "popc":
        return _popc(a)
    if op == "clz":
        return _clz(a, bits)
    if op == "bfind":  # 9.7.1.16: negative signed inputs are inverted; not found = 0xffffffff
        x = np.where(_s(a, bits) < 0, ~a, a) if signed else a
        d = np.uint32(bits - 1) - _clz(x, bits)
        if "shiftamt" in mods:
            d = np.uint32(bits - 1) - d
        return np.where(x == 0, np.uint32(0xFFFFFFFF), d)
    if op == "brev":
        return _brev(a, bits)
    if op == "bfe":
        return _bfe(kind, bits, a, ops[1], ops[2])
    if op == "bfi":
        return _bfi(bits, a, ops[1], ops[2], ops[3])
    if op == "fns":
        return _fns(a, ops[1], ops[2])
    if op in ("shl", "shr"):  # 9.7.8.8/9: amount is u32; amounts > N are clamped to N
        amount = _u(ops[1], 32).astype(np.int64)
        if op == "shl":
            return _shl(a, amount, bits)
        if signed:
            return (_s(a, bits) >> np.minimum(amount, bits - 1).astype(_SD[bits])).view(U)
        return _shr(a, amount, bits)
    if op == "shf":  # 9.7.8.7: n = clamp ? min(c, 32) : c & 0x1f over the 64-bit value [b, a]
        c = _u(ops[2], 32)
        n = np.minimum(c, np.uint32(32)) if "clamp" in mods else c & np.uint32(31)
        n = n.astype(np.uint64)
        value = (_u(ops[1], 64) << np.uint64(32)) | _u(a, 64)
        if "l" in mods:
            return ((value << n) >> np.uint64(32)).astype(np.uint32)
        return (value >> n).astype(np.uint32)
    if op == "prmt":
        mode = next(iter(mods)) if mods else None
        return _prmt(mode, a, ops[1], ops[2])
    if op == "lop3":
        return _lop3(a, ops[1], ops[2], ops[3])
    if op in ("and", "or", "xor"):
        b = _u(ops[1], bits)
        return a & b if op == "and" else (a | b if op == "or" else a ^ b)
    if op == "not":
        return ~a
    if op == "cnot":
        return (a == 0).astype(U)
    if op == "bmsk":
        return _bmsk("clamp" in mods, a, ops[1])
    if op == "szext":
        return _szext("clamp" in mods, signed, a, ops[1])
    raise _unsupported(op, type_name, mods, "not implemented")  # pragma: no cover (table and code agree)


_UNSIGNED_CMP = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


def compare(cmp: str, type: str, a, b) -> np.ndarray:
    """``a cmp b`` per lane for setp/set (9.3.1.1 "Integer and Bit-Size Comparisons", 9.7.6.2): eq ne lt
    le gt ge are signed on .s and unsigned on .u types; lo ls hi hs are the unsigned orderings (.u
    types); bit-size types have only eq and ne."""
    kind, bits = _kind_bits(type)
    if bits == 8:
        raise Unsupported(f"setp.{cmp}.{type}: 8-bit types are not setp types")
    if cmp not in _CMP and cmp not in _UNSIGNED_CMP:
        raise Unsupported(f"setp.{cmp}.{type}: '{cmp}' is not an integer comparison")
    if kind == "b" and cmp not in ("eq", "ne"):
        raise Unsupported(f"setp.{cmp}.{type}: ordering comparisons are not defined for bit-size types "
                          f"(9.3.1.1); use .u or .s")
    if cmp in _UNSIGNED_CMP and kind == "s":
        raise Unsupported(f"setp.{cmp}.{type}: {cmp} is an unsigned comparison; use .u{bits}")
    x, y = _u(a, bits), _u(b, bits)
    if kind == "s":
        x, y = x.view(_SD[bits]), y.view(_SD[bits])
    return _CMP[_UNSIGNED_CMP.get(cmp, cmp)](x, y)


def select(type: str, a, b, pred) -> np.ndarray:
    """``selp.type d, a, b, c`` (9.7.6.3): a where the predicate is true, else b."""
    if type == "pred":
        return np.where(np.asarray(pred, bool), np.asarray(a, bool), np.asarray(b, bool))
    bits = _FLOAT_BITS[type] if type in _FLOAT_BITS else _kind_bits(type)[1]
    return np.where(np.asarray(pred, bool), _u(a, bits), _u(b, bits))


_FLOAT_BITS = {"f16": 16, "bf16": 16, "f16x2": 32, "bf16x2": 32, "f32": 32, "f64": 64}
