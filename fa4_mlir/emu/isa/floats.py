"""PTX floating-point instructions as NumPy functions on raw bits (vectorised over the lanes of a warp).

API (values are raw-bit arrays: uint16 for f16/bf16, uint32 for f32/f16x2/bf16x2, uint64 for
f64/f32x2; wider unsigned inputs are accepted and their low bits used):

``arith(op, type, operands, modifiers) -> bits``      add sub mul fma mad div rcp sqrt rsqrt ex2 lg2 sin
                                                       cos tanh min max neg abs copysign
``compare(cmp, type, a, b, modifiers) -> bool array``  setp/set comparisons (scalar types)
``compare_pair(cmp, type, a, b, modifiers) -> (lo, hi)`` setp on f16x2/bf16x2 (p gets lo, q gets hi)
``testp(kind, type, a) -> bool array``                 testp.{finite,infinite,number,notanumber,normal,
                                                       subnormal}

Every form outside the PTX ISA (or outside what is implemented) raises ``Unsupported`` naming it, e.g.
``fma.f32 is not supported by the emulator (a rounding modifier is required)``.

Semantics, from the PTX ISA 9.1 sections 9.7.3 "Floating-Point Instructions", 9.7.4 "Half Precision
Floating-Point Instructions" and 9.7.6/9.7.7 "Comparison and Selection Instructions":

* Instructions with a rounding modifier are IEEE 754 correctly rounded in that direction (``rn`` is the
  default where the ISA gives one: add/sub/mul of every type, half-precision fma). f32, f16 and bf16
  results are computed exactly and rounded once (``fpexact``): float32 arithmetic for round-to-nearest
  add/sub/mul, exact float64 products with TwoSum and rounding to odd for fma and the directed modes,
  float64 division/square root for round-to-nearest (correctly rounded again since 53 >= 2p + 2),
  integer quotients and square roots with a sticky bit for the directed modes. f64 round-to-nearest
  add/sub/mul/div/sqrt use NumPy's IEEE float64; f64 fma and the directed f64 modes are computed
  exactly with Python integers per lane.
* ``.ftz``: subnormal inputs become signed zeros; tiny results become signed zeros, tininess being
  detected after rounding to the precision with an unbounded exponent (so (1 - 2^-24) * 2^-126 is
  flushed although it rounds to 2^-126; the hardware agrees).
* ``.sat`` clamps to [0.0, 1.0]; NaN and -0.0 give +0.0. ``.relu`` (half fma) clamps negatives (and -0.0)
  to +0.0; NaN gives the canonical NaN.
* NaN results: f32 -> 0x7FFFFFFF, f16/bf16 -> 0x7FFF (ISA: "unspecified NaN"; these are what the
  hardware writes). f64 keeps payloads ("NaN payloads are supported for double-precision
  instructions"): the result is the first NaN operand in the hardware's priority order (add/sub/mul/
  min/max: b then a; div: a then b; fma: b, c, a), quieted, else 0xFFF8000000000000.
  neg/abs.f64 pass NaNs through unchanged (9.7.3.9 "abs"); neg/abs of f32/f16/bf16 NaN give the
  canonical NaN; copysign is a pure sign-bit operation.
* ``mad`` is ``fma`` (9.7.3.7: "mad.{f32,f64} is the same as fma.{f32,f64}" for sm_20+); the rounding
  modifier is required, as ptxas requires it (legacy sm_1x ``mad.f32`` is not supported).
* min/max follow the pseudo-code of 9.7.3.11/12: without ``.NaN`` a NaN operand is ignored (both NaN ->
  canonical NaN), with ``.NaN`` any NaN gives the canonical NaN; -0.0 < +0.0; ``.xorsign.abs``
  computes on magnitudes and sets the sign to sign(a) XOR sign(b) unless the result is NaN.

Approximate instructions are modelled as the correctly rounded (round-to-nearest-even) value of the
exact function, computed in float64 with NumPy (one extra rounding for rsqrt and the transcendental
functions, < 2^-28 ulp of the target format) and then the ISA's special-value tables and subnormal
rules. The ISA only bounds their error:

=========================  ===================================================  ======================
instruction                ISA guarantee                                          model
=========================  ===================================================  ======================
ex2.approx.f32             2 ulp from correctly rounded, full range              the H100's, exactly (a)
ex2.approx.f16 / bf16      rel. error 2^-9.9 / 2^-7                               RN(2^a) in the format
lg2.approx.f32             abs. 2^-22 in (0.5, 2), rel. 2^-22 elsewhere          the H100's, exactly (a)
sin/cos.approx.f32         abs. 2^-20.5 in [-2pi, 2pi], 2^-14.7 in [-100pi,..]   RN(sin a), RN(cos a)
tanh.approx.f32            rel. 2^-11                                             RN(tanh a)
tanh.approx.f16 / bf16     abs. 2^-10.987 / 2^-8                                  RN(tanh a)
rcp.approx.f32             1 ulp                                                  RN(1/a)
sqrt.approx.f32            rel. 2^-23                                             RN(sqrt a)
rsqrt.approx.f32           rel. 2^-22.9                                           RN(1/sqrt a)
rsqrt.approx.f64           (none given)                                           RN(1/sqrt a)
div.full.f32               2 ulp, full range                                      RN(a/b)
div.approx.f32             2 ulp for |b| in [2^-126, 2^126]; computed as a*(1/b)  RN(a * F(RN(1/b)))
rcp/rsqrt.approx.ftz.f64   1.11.20 format on the upper word, low word zero        RZ in 1.11.20, flushed
=========================  ===================================================  ======================

(a) ``ex2.approx[.ftz].f32`` and ``lg2.approx[.ftz].f32`` are the H100's own results, bit for bit on
every input: the measured table models of ``mufu`` (they and the code ptxas emits are documented there).

``div.approx.f32`` follows the ISA's definition ``d = a * (1/b)``: the reciprocal is rounded to f32 and a
subnormal reciprocal is flushed to zero (which gives the documented behaviour for 2^126 < |b| < 2^128:
NaN when a is infinite, otherwise a signed zero); a subnormal b (without .ftz) gives RN(a/b).

Checked against an H100 (sm_90a, driver 580): 510 instruction forms (232 of this module, 278 cvt forms of
``convert``), 13 million input tuples of edge and seeded random values, run as PTX kernels and compared
bit for bit. Every exactly specified form matched. The approximate ones differ from the model by at
most 1 unit in the last place (rcp, sqrt, rsqrt, ex2/tanh of f16/bf16, rsqrt.f64) or 2 (div.approx,
div.full); ex2.f32 and lg2.f32 match everywhere (``mufu``, all 2^32 inputs); rcp/rsqrt.approx.ftz.f64
match on 94-97% of inputs and are within one unit of the upper word otherwise; sin, cos and tanh.f32
are within the ISA's bounds. Known hardware departures from the ISA that the model does not copy:
sin/cos.approx flush arguments below about 2^-124 to zero even without .ftz, and give 0/1 far outside
[-100pi, 100pi] ("only best effort").
"""

from __future__ import annotations

import functools

import numpy as np

from fa4_mlir.emu.errors import Unsupported
from fa4_mlir.emu.isa import fpexact as EX
from fa4_mlir.emu.isa import fpformats as FF
from fa4_mlir.emu.isa.fpformats import BF16, F16, F32, F64, F64HI, low
from fa4_mlir.emu.isa.mufu import ex2_approx_f32, lg2_approx_f32

U64 = np.uint64
ELEM = {"f32": F32, "f64": F64, "f16": F16, "bf16": BF16}
# packed type -> (element type, element bits, storage dtype)
PACKED = {"f16x2": ("f16", 16, np.uint32), "bf16x2": ("bf16", 16, np.uint32), "f32x2": ("f32", 32, np.uint64)}
RND = frozenset({"rn", "rz", "rm", "rp"})
F64_QUIET = EX.F64_QUIET
_ORDER = ["approx", "full", "rn", "rna", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "ftz", "sat",
          "satfinite", "relu", "oob", "NaN", "xorsign", "abs"]


def form(op: str, mods, *types: str) -> str:
    """The PTX spelling of an instruction form, modifiers in a canonical order."""
    mods = list(mods)
    ordered = sorted(m for m in mods if m not in _ORDER) + [m for m in _ORDER if m in mods]
    return ".".join([op, *ordered, *types])


def unsupported(op: str, mods, types, why: str = "") -> Unsupported:
    types = (types,) if isinstance(types, str) else tuple(types)
    extra = f" ({why})" if why else ""
    return Unsupported(f"{form(op, mods, *types)} is not supported by the emulator{extra}")


# -- modifier rules -------------------------------------------------------------------------------
def _rounding(op, mods, type_, allowed, required: bool, default="rn"):
    given = mods & (RND | {"rna"})
    if len(given) > 1:
        raise unsupported(op, mods, type_, "more than one rounding modifier")
    if given - allowed:
        raise unsupported(op, mods, type_, f"rounding modifier .{next(iter(given))} is not allowed here")
    if not given:
        if required:
            raise unsupported(op, mods, type_, "a rounding modifier is required")
        return default
    return next(iter(given))


def _only(op, mods, type_, allowed):
    extra = mods - frozenset(allowed)
    if extra:
        names = ", ".join("." + m for m in sorted(extra))
        raise unsupported(op, mods, type_, f"modifier {names} not allowed")


# -- helpers --------------------------------------------------------------------------------------
def _split(type_, values):
    elem, w, dtype = PACKED[type_]
    mask = (1 << w) - 1
    edt = ELEM[elem].dtype
    vals = [low(v, dtype) for v in values]
    lo = [(v & dtype(mask)).astype(edt) for v in vals]
    hi = [(v >> dtype(w)).astype(edt) for v in vals]
    return lo, hi


def _join(type_, lo, hi):
    elem, w, dtype = PACKED[type_]
    return lo.astype(dtype) | (hi.astype(dtype) << dtype(w))


def _neg_zero(fmt):
    return fmt.dtype(fmt.sign_bit)


def _sat(fmt, bits):
    """.sat: clamp to [0, 1]; NaN and -0 -> +0."""
    v = FF.decode(fmt, bits)
    one = FF.encode(np.ones(1), fmt)[0]
    out = np.where(v > 1.0, one, bits)
    return np.where(~(v > 0.0) & ~(v > 1.0), fmt.dtype(0), out).astype(fmt.dtype)


def _relu(fmt, bits):
    """.relu: negative (and -0) -> +0; NaN -> canonical NaN."""
    v = FF.decode(fmt, bits)
    out = np.where(v <= 0.0, fmt.dtype(0), bits)
    return np.where(np.isnan(v), fmt.dtype(fmt.nan_enc), out).astype(fmt.dtype)


def _basic(op, fmt, ins, mode, ftz):
    """add/sub/mul/fma/div/sqrt/rcp on f32/f16/bf16 element bits, correctly rounded with ``mode``."""
    if mode == "rn" and fmt is F32 and op in ("add", "sub", "mul", "fma"):
        r = EX.f32_rn(op, ins, ftz)
        if r is not None:
            return r
    if ftz:
        ins = [FF.flush(fmt, v) for v in ins]
    x = [FF.decode(fmt, v) for v in ins]
    with np.errstate(all="ignore"):
        if mode == "rn" and op in ("div", "rcp", "sqrt"):
            # float64 division / square root rounded again is correctly rounded for p <= 24 (53 >= 2p + 2)
            r = x[0] / x[1] if op == "div" else (1.0 / x[0] if op == "rcp" else np.sqrt(x[0]))
            return FF.encode(r, fmt, "rn", ftz=ftz)
        if op in ("add", "sub", "fma"):
            if op == "fma":
                t1, t2 = x[0] * x[1], x[2]
            else:
                t1, t2 = x[0], (-x[1] if op == "sub" else x[1])
            s, err = FF.two_sum(t1, t2)
            bits = FF.encode(s, fmt, mode, ftz=ftz, err=err)
            if mode == "rm":
                both_pos = (t1 == 0) & (t2 == 0) & ~np.signbit(t1) & ~np.signbit(t2)
                bits = np.where((s == 0) & (err == 0) & ~both_pos, _neg_zero(fmt), bits)
            return bits.astype(fmt.dtype)
        if op == "mul":
            return FF.encode(x[0] * x[1], fmt, mode, ftz=ftz)
        if op == "div":
            return EX.div_exact(fmt, x[0], x[1], mode, ftz)
        if op == "rcp":
            return EX.div_exact(fmt, np.ones_like(x[0]), x[0], mode, ftz)
        if op == "sqrt":
            return EX.sqrt_exact(fmt, x[0], mode, ftz)
    raise AssertionError(op)


def _approx(op, fmt, ins, ftz):
    """Approximate instructions: the H100's MUFU.EX2 / MUFU.LG2 for ex2.f32 / lg2.f32, otherwise the
    correctly rounded exact function (see the module docstring)."""
    if op == "ex2" and fmt is F32:
        return ex2_approx_f32(low(ins[0], np.uint32), ftz)
    if op == "lg2" and fmt is F32:
        return lg2_approx_f32(low(ins[0], np.uint32), ftz)
    a_bits = FF.flush(fmt, ins[0]) if ftz else low(ins[0], fmt.dtype)
    a = FF.decode(fmt, a_bits)
    with np.errstate(all="ignore"):
        if op == "ex2":
            r = np.exp2(a)
        elif op == "lg2":
            r = np.log2(a)
        elif op == "sin":
            r = np.sin(a)
        elif op == "cos":
            r = np.cos(a)
        elif op == "tanh":
            r = np.tanh(a)
        elif op == "rsqrt":
            r = 1.0 / np.sqrt(a)
        elif op == "rcp":
            r = 1.0 / a
        elif op == "sqrt":
            r = np.sqrt(a)
        else:  # pragma: no cover
            raise AssertionError(op)
    if fmt is F64:
        return EX.f64_nan(r, [a_bits], (0,))
    return FF.encode(r, fmt, "rn", ftz=ftz)


def _div_approx(ins, ftz):
    """div.approx.f32: d = a * (1/b), the reciprocal rounded to f32 and flushed when subnormal.

    For subnormal b (without .ftz, where 1/b may not fit an f32) the model is RN(a/b), as the hardware
    scales such operands (0x7FFFFF / 0x1 gives 0x4AFFFFFE there, not infinity).
    """
    a_bits, b_bits = (FF.flush(F32, v) if ftz else low(v, np.uint32) for v in ins)
    a, b = FF.decode(F32, a_bits), FF.decode(F32, b_bits)
    rcp = FF.encode(_recip(b_bits), F32, "rn", ftz=True)
    with np.errstate(all="ignore"):
        prod = a * FF.decode(F32, rcp)
        prod = np.where(FF.is_subnormal(F32, b_bits), a / b, prod)
    return FF.encode(prod, F32, "rn", ftz=ftz)


def _recip(bits):
    with np.errstate(all="ignore"):
        return 1.0 / FF.decode(F32, bits)


def _approx_f64hi(op, ins):
    """rcp.approx.ftz.f64 / rsqrt.approx.ftz.f64 (9.7.3.14, 9.7.3.17): the upper word in 1.11.20 format."""
    hi = low(ins[0], U64) & U64(0xFFFFFFFF00000000)
    hi = np.where(FF.is_subnormal(F64, hi), hi & U64(1 << 63), hi)
    x = hi.view(np.float64)
    with np.errstate(all="ignore"):
        r = 1.0 / x if op == "rcp" else 1.0 / np.sqrt(x)
    enc = FF.encode(r, F64HI, "rz", ftz=True).astype(U64)
    return enc << U64(32)


def _minmax(op, fmt, ins, mods, ftz):
    vals = [FF.flush(fmt, v) if ftz else low(v, fmt.dtype) for v in ins]
    sign = fmt.dtype(fmt.sign_bit)
    xorsign = None
    if "xorsign" in mods:
        xorsign = (vals[0] ^ vals[1]) & sign
    if "abs" in mods:
        vals = [v & fmt.dtype(fmt.sign_bit - 1) for v in vals]
    nan_val = fmt.dtype(fmt.nan_enc)

    def two(x, y):
        xv, yv = FF.decode(fmt, x), FF.decode(fmt, y)
        xn, yn = np.isnan(xv), np.isnan(yv)
        if op == "min":
            pick_x = (xv < yv) | ((xv == yv) & ((x & sign) != 0))       # -0.0 < +0.0
        else:
            pick_x = (xv > yv) | ((xv == yv) & ((x & sign) == 0))
        r = np.where(pick_x, x, y)
        r = np.where(yn & ~xn, x, np.where(xn & ~yn, y, r))
        if "NaN" in mods:
            return np.where(xn | yn, nan_val, r)
        return np.where(xn & yn, nan_val, r)

    d = two(vals[0], vals[1])
    if len(vals) == 3:
        d = two(d, vals[2])
    if fmt is F64:
        # f64 min/max: a NaN result (both NaN) propagates b's payload, quieted (as the hardware does)
        both = np.isnan(FF.decode(F64, d))
        d = np.where(both, low(ins[1], U64) | F64_QUIET, d)
    if xorsign is not None:
        d = np.where(FF.is_nan(fmt, d), d, (d & fmt.dtype(fmt.sign_bit - 1)) | xorsign)
    return d.astype(fmt.dtype)


def _signop(op, fmt, ins, ftz):
    v = FF.flush(fmt, ins[0]) if ftz else low(ins[0], fmt.dtype)
    sign = fmt.dtype(fmt.sign_bit)
    if op == "copysign":
        b = low(ins[1], fmt.dtype)
        return (b & fmt.dtype(fmt.sign_bit - 1)) | (v & sign)
    r = (v ^ sign) if op == "neg" else (v & fmt.dtype(fmt.sign_bit - 1))
    if fmt is F64:
        return np.where(FF.is_nan(fmt, v), v | F64_QUIET, r)      # abs/neg.f64 pass NaNs through, quieted
    return np.where(FF.is_nan(fmt, v), fmt.dtype(fmt.nan_enc), r)


# -- the instruction table ------------------------------------------------------------------------
_BASIC2 = ("add", "sub", "mul")
_ARITY = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "mad": 3, "div": 2, "rcp": 1, "sqrt": 1, "rsqrt": 1,
          "ex2": 1, "lg2": 1, "sin": 1, "cos": 1, "tanh": 1, "min": 2, "max": 2, "neg": 1, "abs": 1,
          "copysign": 2}
_TYPES = {
    "add": ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2", "f32x2"),
    "fma": ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2", "f32x2"),
    "mad": ("f32", "f64"),
    "div": ("f32", "f64"), "rcp": ("f32", "f64"), "sqrt": ("f32", "f64"), "rsqrt": ("f32", "f64"),
    "ex2": ("f32", "f16", "bf16", "f16x2", "bf16x2"),
    "lg2": ("f32",), "sin": ("f32",), "cos": ("f32",),
    "tanh": ("f32", "f16", "bf16", "f16x2", "bf16x2"),
    "min": ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2"),
    "neg": ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2"),
    "copysign": ("f32", "f64"),
}
_TYPES["sub"] = _TYPES["mul"] = _TYPES["add"]
_TYPES["max"] = _TYPES["min"]
_TYPES["abs"] = _TYPES["neg"]


@functools.lru_cache(maxsize=1024)
def _compile(op: str, type_: str, mods: frozenset, nops: int):
    """Validate a form against the ISA and return ``fn(list_of_element_bit_arrays) -> bits``."""
    if op not in _ARITY:
        raise unsupported(op, mods, type_, "not a floating-point instruction")
    if type_ not in _TYPES[op]:
        raise unsupported(op, mods, type_, f"type .{type_} is not defined for {op}")
    elem = PACKED[type_][0] if type_ in PACKED else type_
    fmt = ELEM[elem]
    arity = _ARITY[op]
    if op in ("min", "max") and nops == 3 and type_ == "f32":
        arity = 3
    if nops != arity:
        raise unsupported(op, mods, type_, f"expected {arity} source operands, got {nops}")
    half = elem in ("f16", "bf16")
    ftz_ok = elem in ("f32", "f16")
    ftz = "ftz" in mods

    if op in _BASIC2 or op in ("fma", "mad"):
        is_fma = op in ("fma", "mad")
        if half:
            mode = _rounding(op, mods, type_, {"rn"}, required=False)
            allowed = {"rn"} | ({"ftz", "sat"} if elem == "f16" else set())
            if is_fma:
                allowed |= {"relu"}
            if "oob" in mods:
                raise unsupported(op, mods, type_, ".oob needs the tensor out-of-bounds NaN, not modelled")
            _only(op, mods, type_, allowed)
            if "sat" in mods and "relu" in mods:
                raise unsupported(op, mods, type_, ".relu cannot be combined with .sat")
        else:
            mode = _rounding(op, mods, type_, RND, required=is_fma)
            allowed = set(RND)
            if elem == "f32":
                allowed |= {"ftz"} | ({"sat"} if type_ == "f32" else set())
            _only(op, mods, type_, allowed)
        sat, relu = "sat" in mods, "relu" in mods
        name = "fma" if is_fma else op
        if fmt is F64:
            return lambda ins: EX.f64_op(name, mode, ins)

        def basic(ins):
            r = _basic(name, fmt, ins, mode, ftz)
            if sat:
                r = _sat(fmt, r)
            if relu:
                r = _relu(fmt, r)
            return r
        return basic

    if op in ("div", "rcp", "sqrt"):
        approx, full = "approx" in mods, "full" in mods
        if fmt is F64:
            if op == "rcp" and approx:
                _only(op, mods, type_, {"approx", "ftz"})
                if not ftz:
                    raise unsupported(op, mods, type_, ".ftz is required with .approx.f64")
                return lambda ins: _approx_f64hi("rcp", ins)
            mode = _rounding(op, mods, type_, RND, required=True)
            _only(op, mods, type_, RND)
            if op == "rcp":
                one = U64(0x3FF0000000000000)
                return lambda ins: EX.f64_op("div", mode, [np.full(np.shape(ins[0]), one), ins[0]])
            return lambda ins: EX.f64_op(op, mode, ins)
        if (approx + full + bool(mods & RND)) != 1 or (full and op != "div"):
            need = "one of .approx, .full or a rounding modifier" if op == "div" else \
                "one of .approx or a rounding modifier"
            raise unsupported(op, mods, type_, f"{need} is required")
        _only(op, mods, type_, RND | {"approx", "full", "ftz"})
        if approx and op == "div":
            return lambda ins: _div_approx(ins, ftz)
        if approx:
            return lambda ins: _approx(op, fmt, ins, ftz)
        mode = "rn" if full else next(iter(mods & RND))
        return lambda ins: _basic(op, fmt, ins, mode, ftz)

    if op in ("rsqrt", "ex2", "lg2", "sin", "cos", "tanh"):
        if "approx" not in mods:
            raise unsupported(op, mods, type_, ".approx is required")
        if op == "rsqrt" and fmt is F64 and ftz:
            _only(op, mods, type_, {"approx", "ftz"})
            return lambda ins: _approx_f64hi("rsqrt", ins)
        if op == "ex2" and elem == "bf16":
            if not ftz:
                raise unsupported(op, mods, type_, ".ftz is required for bf16")
            _only(op, mods, type_, {"approx", "ftz"})
        elif op == "tanh" or half or fmt is F64:
            _only(op, mods, type_, {"approx"})
        else:
            _only(op, mods, type_, {"approx", "ftz"})
        return lambda ins: _approx(op, fmt, ins, ftz)

    if op in ("min", "max"):
        allowed = {"NaN", "xorsign", "abs"} | ({"ftz"} if ftz_ok else set())
        if fmt is F64:
            allowed = set()
        _only(op, mods, type_, allowed)
        if arity == 3:
            if "xorsign" in mods:
                raise unsupported(op, mods, type_, ".xorsign needs two inputs")
        elif ("xorsign" in mods) != ("abs" in mods):
            raise unsupported(op, mods, type_, ".xorsign and .abs must be used together")
        return lambda ins: _minmax(op, fmt, ins, mods, ftz)

    # neg, abs, copysign
    _only(op, mods, type_, {"ftz"} if (ftz_ok and op != "copysign") else set())
    return lambda ins: _signop(op, fmt, ins, ftz)


def arith(op: str, type: str, operands: list, modifiers: frozenset = frozenset()) -> np.ndarray:
    """Execute floating-point instruction ``op.modifiers.type`` on raw-bit operand arrays.

    ``mad`` is ``fma``; packed types (f16x2, bf16x2, f32x2) apply the element operation to both halves
    (element 0 in the low bits). Returns the destination bits in the type's storage dtype.
    """
    fn = _compile(op, type, frozenset(modifiers), len(operands))
    if type in PACKED:
        ops = np.broadcast_arrays(*[np.asarray(v) for v in operands])
        shape = ops[0].shape
        lo, hi = _split(type, [v.ravel() for v in ops])
        r = fn([np.concatenate([x, y]) for x, y in zip(lo, hi)])   # both halves in one pass
        n = lo[0].shape[0]
        return _join(type, r[:n], r[n:]).reshape(shape)
    return fn([low(v, ELEM[type].dtype) for v in operands])


# -- comparisons ----------------------------------------------------------------------------------
_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}


def _compare_values(cmp, a, b):
    nan = np.isnan(a) | np.isnan(b)
    base = cmp[:-1] if cmp in ("equ", "neu", "ltu", "leu", "gtu", "geu") else cmp
    if cmp == "num":
        return ~nan
    if cmp == "nan":
        return nan
    with np.errstate(invalid="ignore"):
        t = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[base]
    if base != cmp:
        return t | nan
    return t & ~nan


def _cmp_check(cmp, type_, mods, scalar_types):
    if cmp not in _CMP:
        raise unsupported("setp", {cmp, *mods}, type_, f"comparison .{cmp} is not defined for floats")
    if type_ not in scalar_types:
        raise unsupported("setp", {cmp, *mods}, type_, "use compare_pair for packed types" if type_ in PACKED
                          else f"type .{type_} is not a comparable float type")
    elem = PACKED[type_][0] if type_ in PACKED else type_
    allowed = {"ftz"} if elem in ("f32", "f16") else set()
    extra = frozenset(mods) - allowed
    if extra:
        raise unsupported("setp", {cmp, *mods}, type_, "modifier " + ", ".join("." + m for m in sorted(extra))
                          + " not allowed")
    return ELEM[elem], "ftz" in mods


def compare(cmp: str, type: str, a, b, modifiers: frozenset = frozenset()) -> np.ndarray:
    """``setp.cmp{.ftz}.type`` on raw bits: the predicate (9.7.6.2 "setp", Floating Point Notes).

    Ordered comparisons (eq ne lt le gt ge) are false when either input is NaN; the unordered ones
    (equ neu ltu leu gtu geu) are true then; num/nan test for NaN. -0.0 == +0.0. ``.ftz`` flushes
    subnormal inputs (f32 and f16 only).
    """
    fmt, ftz = _cmp_check(cmp, type, modifiers, ("f32", "f64", "f16", "bf16"))
    a, b = (FF.flush(fmt, v) if ftz else low(v, fmt.dtype) for v in (a, b))
    return _compare_values(cmp, FF.decode(fmt, a), FF.decode(fmt, b))


def compare_pair(cmp: str, type: str, a, b, modifiers: frozenset = frozenset()):
    """``setp.cmp{.ftz}.{f16x2,bf16x2} p|q, a, b``: (result for the low halves -> p, high halves -> q)."""
    fmt, ftz = _cmp_check(cmp, type, modifiers, ("f16x2", "bf16x2"))
    lo, hi = _split(type, [a, b])
    out = []
    for x, y in (lo, hi):
        if ftz:
            x, y = FF.flush(fmt, x), FF.flush(fmt, y)
        out.append(_compare_values(cmp, FF.decode(fmt, x), FF.decode(fmt, y)))
    return out[0], out[1]


def testp(kind: str, type: str, a) -> np.ndarray:
    """``testp.kind.type`` (9.7.3.1): zeros count as normal; f32 and f64 only."""
    if type not in ("f32", "f64"):
        raise unsupported("testp", {kind}, type, f"type .{type} is not defined for testp")
    fmt = ELEM[type]
    bits = low(a, fmt.dtype)
    v = FF.decode(fmt, bits)
    nan, inf = np.isnan(v), np.isinf(v)
    sub = FF.is_subnormal(fmt, bits)
    table = {"finite": ~nan & ~inf, "infinite": inf, "number": ~nan, "notanumber": nan,
             "normal": ~nan & ~inf & ~sub, "subnormal": sub}
    if kind not in table:
        raise unsupported("testp", {kind}, type, f"property .{kind} is not defined")
    return table[kind]
