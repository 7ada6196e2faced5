"""Exact floating-point arithmetic kernels behind ``floats`` (NumPy, vectorised over lanes).

* ``f32_rn``: round-to-nearest f32 add/sub/mul/fma with NumPy's IEEE float32, and for fma the exact
  float64 product, TwoSum and round-to-odd before the one rounding to f32.
* ``div_exact`` / ``sqrt_exact``: f32/f16/bf16 quotients and square roots in any rounding mode from
  integer quotients / integer square roots with a sticky bit (``fpformats.round_parts``).
* ``f64_op``: f64 add/sub/mul/fma/div/sqrt in any rounding mode: NumPy's IEEE float64 for
  round-to-nearest (except fma) and for special operands, exact Python-integer arithmetic per lane for
  everything else; ``f64_nan`` applies the hardware's NaN payload propagation.
"""

from __future__ import annotations

import math

import numpy as np

from fa4_mlir.emu.isa import fpformats as FF
from fa4_mlir.emu.isa.fpformats import F64, low

U64 = np.uint64
F64_QUIET = U64(1 << 51)
F64_DEFAULT_NAN = U64(0xFFF8000000000000)


def f64_nan(result, operands, order):
    """f64 NaN results: the first NaN operand in ``order`` (quieted), else the default NaN."""
    res = result.view(U64).copy() if result.dtype == np.float64 else result.astype(U64)
    isnan = (res & U64(0x7FFFFFFFFFFFFFFF)) > U64(0x7FF0000000000000)
    if not isnan.any():
        return res
    pick = np.full(res.shape, F64_DEFAULT_NAN)
    for i in reversed(order):
        op = low(operands[i], U64)
        opnan = (op & U64(0x7FFFFFFFFFFFFFFF)) > U64(0x7FF0000000000000)
        pick = np.where(opnan, op | F64_QUIET, pick)
    return np.where(isnan, pick, res)


# -- exact f64 arithmetic, per lane (directed rounding and fma) ------------------------------------
def _int_parts(x: float):
    m, e = math.frexp(x)
    return int(m * (1 << 53)), e - 53          # x = M * 2^E exactly


def _reduce(n: int, e: int):
    """An integer magnitude n*2^e reduced to at most 62 bits plus a sticky flag."""
    extra = n.bit_length() - 62
    if extra <= 0:
        return n, e, False
    sticky = (n & ((1 << extra) - 1)) != 0
    return n >> extra, e + extra, sticky


def _exact_f64(op: str, vals, mode: str, mask):
    """Round the exact result of ``op`` on float64 lanes ``mask`` (all finite, nonzero where it matters)."""
    idx = np.nonzero(mask)[0]
    n = len(idx)
    neg = np.zeros(n, bool)
    sig = np.zeros(n, U64)
    ee = np.zeros(n, np.int64)
    sticky = np.zeros(n, bool)
    exact_zero = np.zeros(n, bool)
    for j, i in enumerate(idx):
        xs = [float(v[i]) for v in vals]
        ps = [_int_parts(x) for x in xs]
        if op in ("add", "sub", "fma"):
            if op == "fma":
                (ma, ea), (mb, eb), (mc, ec) = ps
                t1, e1 = ma * mb, ea + eb
                t2, e2 = mc, ec
            else:
                (t1, e1), (t2, e2) = ps
                if op == "sub":
                    t2 = -t2
            emin = min(e1, e2)
            total = (t1 << (e1 - emin)) + (t2 << (e2 - emin))
            if total == 0:
                exact_zero[j] = True
                continue
            m, e, s = _reduce(abs(total), emin)
            neg[j] = total < 0
        elif op == "mul":
            (ma, ea), (mb, eb) = ps
            t = ma * mb
            m, e, s = _reduce(abs(t), ea + eb)
            neg[j] = t < 0
        elif op == "div":
            (ma, ea), (mb, eb) = ps
            na, nb = abs(ma), abs(mb)
            k = max(0, 64 - na.bit_length() + nb.bit_length())
            q, r = divmod(na << k, nb)
            m, e, s = _reduce(q, ea - eb - k)
            s = s or r != 0
            neg[j] = (ma < 0) != (mb < 0)
        elif op == "sqrt":
            (ma, ea), = ps
            if ea % 2:
                ma, ea = ma * 2, ea - 1
            k = max(0, (124 - ma.bit_length()) // 2 + 1)
            nn = ma << (2 * k)
            r = math.isqrt(nn)
            m, e, s = _reduce(r, ea // 2 - k)
            s = s or r * r != nn
        else:  # pragma: no cover
            raise AssertionError(op)
        sig[j], ee[j], sticky[j] = m, e, s
    bits = FF.round_parts(neg, sig, ee, sticky, F64, mode)
    if exact_zero.any():
        # an exact zero sum is +0, or -0 when rounding toward -inf (IEEE 754 6.3)
        bits = np.where(exact_zero, U64(1 << 63) if mode == "rm" else U64(0), bits)
    return idx, bits


def f64_op(op, mode, ins):
    """f64 add/sub/mul/fma/div/sqrt with rounding ``mode``; ``ins`` are uint64 bits."""
    vals = [low(v, U64).view(np.float64) for v in ins]
    with np.errstate(all="ignore"):
        if op == "add":
            res = vals[0] + vals[1]
        elif op == "sub":
            res = vals[0] - vals[1]
        elif op == "mul":
            res = vals[0] * vals[1]
        elif op == "div":
            res = vals[0] / vals[1]
        elif op == "sqrt":
            res = np.sqrt(vals[0])
        else:  # fma: special lanes only (finite lanes are computed exactly below)
            res = vals[0] * vals[1] + vals[2]
            # a*b may overflow float64 although it is finite: then the result is c
            res = np.where(np.isfinite(vals[0]) & np.isfinite(vals[1]) & np.isinf(vals[2]), vals[2], res)
    finite = np.ones(res.shape, bool)
    for v in vals:
        finite &= np.isfinite(v)
    if op == "fma":
        exact = finite & (vals[0] != 0) & (vals[1] != 0)
    elif op in ("add", "sub"):
        exact = finite & (vals[0] != 0) & (vals[1] != 0) & (mode != "rn")
    elif op in ("mul", "div"):
        exact = finite & (vals[0] != 0) & (vals[1] != 0) & (mode != "rn")
    else:
        exact = finite & (vals[0] > 0) & (mode != "rn")
    bits = res.view(U64).copy()
    if op in ("add", "sub", "fma") and mode == "rm":
        # exact zero results of sums of zeros keep IEEE's rm sign rule: -0 unless both terms are +0
        with np.errstate(all="ignore"):
            t1 = vals[0] * vals[1] if op == "fma" else vals[0]
        t2 = -vals[1] if op == "sub" else (vals[2] if op == "fma" else vals[1])
        both_pos = (t1 == 0) & (t2 == 0) & ~np.signbit(t1) & ~np.signbit(t2)
        bits = np.where((res == 0) & ~exact & ~both_pos, U64(1 << 63), bits)
    if exact.any():
        idx, rb = _exact_f64(op, vals, mode, exact)
        bits[idx] = rb
    order = {"add": (1, 0), "sub": (1, 0), "mul": (1, 0), "div": (0, 1), "sqrt": (0,), "fma": (1, 2, 0)}[op]
    return f64_nan(bits, ins, order)


# -- exact f32/f16/bf16 arithmetic ---------------------------------------------------------------
def _sig24(x):
    """float64 values of f32/f16/bf16 numbers (finite, nonzero) -> (neg, 24-bit integer, exponent)."""
    neg, sig, e, _ = FF.parts_f64(x)
    return neg, sig >> U64(29), e + 29


def div_exact(fmt, a, b, mode, ftz):
    """a / b (float64 arrays holding values of ``fmt``) correctly rounded to ``fmt``."""
    with np.errstate(all="ignore"):
        q = a / b
    special = ~np.isfinite(a) | ~np.isfinite(b) | (a == 0) | (b == 0)
    one = np.ones_like(a)
    na, ma, ea = _sig24(np.where(special, one, a))
    nb, mb, eb = _sig24(np.where(special, one, b))
    num = ma << U64(39)
    quo = num // mb
    rem = num - quo * mb
    bits = FF.round_parts(na ^ nb, quo, ea - eb - 39, rem != 0, fmt, mode, ftz=ftz)
    sp = FF.encode(q, fmt, mode, ftz=ftz)
    return np.where(special, sp, bits)


def _isqrt(n):
    s = np.floor(np.sqrt(n.astype(np.float64))).astype(U64)
    for _ in range(2):
        s = np.where(s * s > n, s - U64(1), s)
    for _ in range(2):
        s = np.where((s + U64(1)) * (s + U64(1)) <= n, s + U64(1), s)
    return s


def sqrt_exact(fmt, a, mode, ftz):
    with np.errstate(all="ignore"):
        r = np.sqrt(a)
    special = ~np.isfinite(a) | (a <= 0)
    _, ma, ea = _sig24(np.where(special, 1.0, a))
    k = np.where((ea - 38) % 2 == 0, 38, 39)
    n = ma << k.astype(U64)
    s = _isqrt(n)
    bits = FF.round_parts(np.zeros(a.shape, bool), s, (ea - k) // 2, s * s != n, fmt, mode, ftz=ftz)
    return np.where(special, FF.encode(r, fmt, mode, ftz=ftz), bits)


def f32_rn(op, ins, ftz):
    """Round-to-nearest f32 add/sub/mul/fma with NumPy's IEEE float32 (fma: exact float64 product, TwoSum
    and round-to-odd, then one rounding); None when .ftz meets a result at the smallest normal."""
    x = [low(v, np.uint32) for v in ins]
    if ftz:
        x = [np.where((v & np.uint32(0x7F800000)) == 0, v & np.uint32(0x80000000), v) for v in x]
    f = [v.view(np.float32) for v in x]
    with np.errstate(all="ignore"):
        if op == "add":
            r = f[0] + f[1]
        elif op == "sub":
            r = f[0] - f[1]
        elif op == "mul":
            r = f[0] * f[1]
        else:
            p = f[0].astype(np.float64) * f[1].astype(np.float64)
            c = f[2].astype(np.float64)
            s = p + c
            bb = s - p
            err = (p - (s - bb)) + (c - bb)
            r = FF.round_to_odd(s, err).astype(np.float32)
    rb = r.view(np.uint32)
    mag = rb & np.uint32(0x7FFFFFFF)
    if ftz:
        if (mag == np.uint32(0x00800000)).any():
            return None
        rb = np.where(mag < np.uint32(0x00800000), rb & np.uint32(0x80000000), rb)
    return np.where(mag > np.uint32(0x7F800000), np.uint32(0x7FFFFFFF), rb)
