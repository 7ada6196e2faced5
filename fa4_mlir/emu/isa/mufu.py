"""``ex2.approx.f32`` and ``lg2.approx.f32`` as the H100 computes them, bit for bit: measured table
models of MUFU.EX2 and MUFU.LG2.

ex2
---

The ISA bounds ``ex2.approx.f32`` only (2 ulp); ptxas turns ``ex2.approx.ftz.f32`` into one
``MUFU.EX2``, and ``ex2.approx.f32`` into ``FSETP.GEU p, x, -126; @!p x *= 0.5; MUFU.EX2 r, x;
@!p r = r * r`` (squaring keeps results below 2^-126 as subnormals). Measured on an H100 80GB HBM3
(sm_90a, driver 580) on all 2^32 inputs (``bench/emu_mufu_probe.py``), MUFU.EX2 is:

1. ``x`` NaN -> 0x7FFFFFFF; +inf -> +inf; -inf -> +0; a subnormal ``x`` counts as 0.
2. ``|x|`` truncated toward zero to a multiple of 2^-23 (sign and magnitude: the same grid for both
   signs), ``|x| = n + j * 2^-23`` with ``0 <= j < 2^23``;
3. ``x >= 0``: ``P[j] * 2^n`` (+inf from 2^128 up); ``x < 0``: ``N[j] * 2^-n``, where ``P[j]`` in
   [1, 2] is the hardware's 2^(j/2^23) and ``N[j]`` in [0.5, 1] its 2^(-j/2^23) (two tables, not one:
   N is not P scaled); a result below 2^-126 is +0.

``P`` and ``N`` differ from the correctly rounded 2^(+-j/2^23) by -1..1 and -2..1 ulp; they are stored
as those differences (``data/ex2_h100.npz``, 440 KB) and rebuilt at first use. The model reproduces
all 4,278,190,080 finite inputs of ``ex2.approx.ftz.f32`` and of ``ex2.approx.f32`` (with the
sequence above) bit for bit. Against the correctly rounded result (inputs with a normal result,
2,231,107,585): 91.5% identical, 4.8% one ulp below, 3.7% one ulp above, 0.04% two ulps below.

lg2
---
``lg2.approx.ftz.f32`` is one ``MUFU.LG2``; ``lg2.approx.f32`` is ``FSETP.GEU p, |x|, 2^-126;
@!p x *= 2^24; MUFU.LG2 r, x; @!p r += -24`` (FADD, to nearest). MUFU.LG2, measured on all inputs:

1. NaN, -inf and negative normals -> 0x7FFFFFFF; +-0 and subnormals -> -inf; +inf -> +inf.
2. ``x = m * 2^e``, m in [1, 2): for ``e >= 0`` the result is ``e + A[m]`` rounded toward zero to f32,
   for ``e <= -1`` it is ``(e + 1) + B[m]`` rounded toward zero, where ``A[m]`` is the hardware's
   log2 of m (its result on [1, 2)) and ``B[m]`` its log2 of m/2 (its result on [0.5, 1)); 0 misses
   over the 2,122,317,824 positive normal inputs. ``B`` is not ``A - 1``: lg2(0.5) is -1 + 2^-23.

Near x = 1 the tables hold a fixed-point-like result (lg2(1 + 2^-23) is 2.79e-7, log2 is 1.72e-7: the
ISA's absolute bound 2^-22 there); elsewhere they are within 3 ulp of the correctly rounded log2.
The tables (``data/lg2_h100.npz``, 650 KB) are stored as differences of consecutive entries.
"""

from __future__ import annotations

import os
import threading

import numpy as np

_F = 23
_DATA = os.path.join(os.path.dirname(__file__), "data", "ex2_h100.npz")
_LG2_DATA = os.path.join(os.path.dirname(__file__), "data", "lg2_h100.npz")
_tables: list[np.ndarray] = []
_lg2_tables: list[np.ndarray] = []
_lock = threading.Lock()


def _load() -> tuple[np.ndarray, np.ndarray]:
    if not _tables:
        with _lock:
            if not _tables:
                d = np.load(_DATA)
                j = np.arange(1 << _F, dtype=np.float64) / 2.0 ** _F
                built = []
                for name, sign in (("pos", 1.0), ("neg", -1.0)):
                    rn = np.exp2(sign * j).astype(np.float32).view(np.uint32).astype(np.int64)
                    bits = rn + d[f"{name}_delta"].astype(np.int64)
                    # entries so near a midpoint that another libm's exp2 may round them the other way
                    bits[d[f"{name}_fragile"]] = d[f"{name}_fragile_bits"]
                    built.append(bits)
                _tables.extend(built)
    return _tables[0], _tables[1]


def _load_lg2() -> tuple[np.ndarray, np.ndarray]:
    if not _lg2_tables:
        with _lock:
            if not _lg2_tables:
                d = np.load(_LG2_DATA)
                built = []
                for name in ("one", "half"):
                    diff = d[f"{name}_diff"].astype(np.int64)
                    diff[d[f"{name}_big"]] = d[f"{name}_big_diff"]
                    bits = np.empty(diff.size + 1, np.int64)
                    bits[0] = int(d[f"{name}_first"])
                    np.cumsum(diff, out=bits[1:])
                    bits[1:] += bits[0]
                    built.append(bits.astype(np.uint32).view(np.float32).astype(np.float64))
                _lg2_tables.extend(built)
    return _lg2_tables[0], _lg2_tables[1]


def _rz_f32(v: np.ndarray) -> np.ndarray:
    """float64 -> f32 bits (uint32) rounded toward zero (finite values)."""
    mag = np.abs(v)
    r = mag.astype(np.float32)
    bits = r.view(np.uint32) - (r.astype(np.float64) > mag).astype(np.uint32)
    return np.where(v < 0, bits | np.uint32(0x80000000), bits).astype(np.uint32)


def mufu_lg2(x: np.ndarray) -> np.ndarray:
    """MUFU.LG2 (``lg2.approx.ftz.f32``) of f32 values ``x``: f32 bits (uint32), same shape."""
    one, half = _load_lg2()
    x = np.ascontiguousarray(x, np.float32)
    b = x.view(np.uint32)
    e = (b >> 23).astype(np.int64) - 127  # the sign bit makes negative values' e large: masked below
    m = (b & 0x7FFFFF).astype(np.int64)
    normal = (x >= 2.0 ** -126) & (x < np.inf)
    v = np.where(e >= 0, e + one[m], (e + 1) + half[m])
    out = np.where(normal, _rz_f32(np.where(normal, v, 0.0)), np.uint32(0))
    out[(x < 2.0 ** -126) & (x > -2.0 ** -126)] = 0xFF800000  # +-0 and subnormals: -inf
    out[x == np.inf] = 0x7F800000
    out[(x <= -2.0 ** -126) | np.isnan(x)] = 0x7FFFFFFF
    return out.astype(np.uint32)


def lg2_approx_f32(bits: np.ndarray, ftz: bool) -> np.ndarray:
    """``lg2.approx[.ftz].f32`` of f32 bit patterns: result bits (uint32) as the H100 gives them."""
    x = np.ascontiguousarray(bits, np.uint32).view(np.float32)
    if ftz:
        return mufu_lg2(x)
    # FSETP.GEU |x|, 2^-126 is "greater, equal or unordered": zeros and subnormals are scaled, NaN is not
    tiny = np.abs(x) < np.float32(2.0 ** -126)
    r = mufu_lg2(np.where(tiny, x * np.float32(2.0 ** 24), x)).view(np.float32)
    r = np.where(tiny, r + np.float32(-24.0), r)
    return r.astype(np.float32).view(np.uint32)


def mufu_ex2(x: np.ndarray) -> np.ndarray:
    """MUFU.EX2 (``ex2.approx.ftz.f32``) of f32 values ``x``: f32 bits (uint32), same shape."""
    pos, neg = _load()
    x = np.asarray(x, np.float32)
    with np.errstate(invalid="ignore"):
        y = np.abs(x).astype(np.float64)
        y[~((y >= 2.0 ** -126) & (y < np.inf))] = 0.0  # subnormals count as zero (NaN/inf are set below)
        n = np.floor(y)
        j = np.floor((y - n) * 2.0 ** _F).astype(np.int64)
        n = np.minimum(n, 255.0).astype(np.int64) << 23
    up = pos[j] + n
    np.minimum(up, 0x7F800000, out=up)
    down = neg[j] - n
    down[down < 0x00800000] = 0  # below 2^-126: +0
    out = np.where(x >= 0, up, down)
    out[np.isnan(x)] = 0x7FFFFFFF
    out[x == np.inf] = 0x7F800000
    out[x == -np.inf] = 0
    return out.astype(np.uint32)


def ex2_approx_f32(bits: np.ndarray, ftz: bool) -> np.ndarray:
    """``ex2.approx[.ftz].f32`` of f32 bit patterns: result bits (uint32) as the H100 gives them."""
    x = np.ascontiguousarray(bits, np.uint32).view(np.float32)
    if ftz:
        return mufu_ex2(x)
    low = x < -126  # ptxas halves the argument and squares the result so it can be subnormal
    r = mufu_ex2(np.where(low, x * np.float32(0.5), x)).view(np.float32)
    with np.errstate(under="ignore", over="ignore"):
        r = np.where(low, r * r, r)
    return r.astype(np.float32).view(np.uint32)
