"""What one ``wgmma.mma_async`` K-step computes on an H100, bit for bit (NumPy, vectorised).

``dot_accumulate(a, b, c_bits, kind, acc="f32") -> bits`` gives, for every (row, col), the accumulator
``D = a[row] . b[col] + C`` of one instruction (16 products for f16/bf16, 32 for e4m3/e5m2, 8 for tf32)
as the tensor core rounds it: raw f32 bits (uint32) for ``acc="f32"``, raw f16 bits (uint16) for
``acc="f16"``.

The model (measured on an H100 80GB HBM3, sm_90a; every one of 7.3 million outputs reproduced)
---------------------------------------------------------------------------------------------

The sum is a fused multi-term addition with truncated alignment, the scheme of Fasi, Higham, Mikaitis
and Pranesh, "Numerical behavior of NVIDIA tensor cores" (PeerJ CS 2021) and Khattak and Mikaitis,
"Accurate models of NVIDIA tensor cores" (arXiv 2512.07004, 2025), with these parameters:

1. Products ``a_k * b_k`` are exact. Each carries the exponent tag ``e(a_k) + e(b_k)``, where ``e`` is
   the input's exponent field unbiased, subnormals counting as the format's minimum normal exponent
   (bf16/tf32 -126, f16 -14, e4m3 -6, e5m2 -14). The tag is not the product's own exponent: a product
   of two significands in [1, 2) lies in [1, 4) times 2^tag. Zero products take no part.
2. ``C`` (an f32, or an f16 widened to f32) carries its own exponent, at least -126 (an f32 subnormal
   counts as -126). A zero ``C``, or ``scale-d = 0``, takes no part: ``scale-d = 0`` is ``C = +0``.
3. ``E`` = the largest tag. Every term (the products and ``C``) is truncated toward zero to a multiple
   of ``2^g``, ``g = max(E - F, -158)``, with ``F = 25`` for f16, bf16 and tf32 inputs and ``F = 13``
   for e4m3/e5m2; the truncated terms are added exactly (no intermediate rounding, no blocks: one
   instruction is one fused sum of all its K products and C).
4. The exact sum ``V`` is rounded:
   * f32 accumulator: toward zero to 24 significant bits (f32 subnormals toward zero on their 2^-149
     grid); e4m3/e5m2 first toward zero to 14 significant bits (e8m13: the fp8 path keeps 13
     fraction bits). ``|V| >= 2^128`` gives +-inf (not the largest finite value IEEE RZ would give).
   * f16 accumulator: round to nearest, ties to even, straight from ``V`` to f16 (subnormals and
     overflow to inf as IEEE), with no 24- or 14-bit truncation before it (measured for f16 and e4m3
     inputs).
5. A zero result is +0, whatever the signs (also when every product and C are -0: measured).
6. Specials as IEEE on the exact products: a NaN input, ``inf * 0``, or +inf and -inf among the
   products and C give NaN (the canonical 0x7FFFFFFF / 0x7FFF); otherwise an infinite product or C gives
   that infinity. Finite products that overflow f32 do not overflow inside the sum (2^130 - 2^130 + x
   is x, for x within the window 2^(130 - F)).
7. tf32 operands: the low 13 bits of each 32-bit element are ignored (not rounded), as
   ``wgmma.to_float64`` already does. ``imm-scale-a/b = -1`` negate the products exactly (same as
   negating A or B; measured); the register-A (RS) form computes the same as the shared-memory form.

Evidence: probe kernels, each one ``wgmma.mma_async.sync.aligned.m64n64k{16,32,8}`` (cuobjdump: one
HGMMA/QGMMA per kernel), every output one K-step of a row of A, a column of B and an element of C
loaded from memory, run on an H100 80GB HBM3 (driver 580) over random inputs in eight regimes: wide
exponent spreads (products over 2^-60..2^60), halves that cancel (exactly and to the last bit),
C = -(sum) +- a few ulps, sparse rows with C far above or below the products and power-of-two
significands (ties, sticky bits), tiny inputs (bf16/f16 subnormals, products in and below the f32
subnormal range, subnormal C), huge products that overflow f32, and inf/NaN/signed-zero operands.
7,340,032 outputs, every one reproduced bit for bit: f32.bf16 1,048,576; f32.f16 1,048,576; f16.f16
524,288; f32.e4m3 524,288; f32.e5m2 393,216; f16.e4m3 262,144; f32.tf32 524,288 (half with random
low 13 bits); f32.bf16 with imm-scale-a = -1 131,072; f32.bf16 with A from registers 262,144; and
with scale-d = 0: f32.bf16 1,048,576, f16.f16 524,288, f32.e4m3 524,288, f32.tf32 524,288.

How sharply the data pins each parameter (f32.bf16, the 904,361 outputs with finite inputs and
result): F = 24 or 26 miss 20.1% / 15.3% of them; rounding to nearest instead of toward zero 18.7%;
truncating the terms toward -inf (two's complement) 50.7%; the product's own exponent as its tag 6.5%;
blocks of 8 products each rounded to f32 about 27%; C's own exponent below -126 5,960 outputs; -0 for
sums that truncate to zero 211; without the 2^-158 clamp 10 of the 9,588 outputs with C = 0 and all
products below 2^-126 (a clamp at 2^-157: 16, at 2^-159: 8). True exponents for subnormal inputs
miss 1,783 f32.f16 and 858 f32.e4m3 outputs. For e4m3 (503,909): F = 13 without the 14-bit step
misses 15.7%, F = 12 or 14 with it 49.6% / 32.9%. For f16
accumulators a 24-bit truncation before the rounding to f16 misses 25 of 506,073 f16.f16 outputs, a
14-bit one 1,424 of 253,853 f16.e4m3. The emulator's former model (float64 ``A @ B.T + C`` rounded to
nearest) gave identical bits for 67.2% of these adversarial f32.bf16 outputs, 17.2% of f32.e4m3 (and
for > 99.9% of real GEMM and attention outputs: docs/emulator-calibration.md). A sample of 2,710
vectors with the H100's outputs, chosen so that each rival model above fails on some, is
``test/python/data/mma_numerics_h100.npz``; ``test/python/test_emu_mma_numerics.py`` describes the
probe kernel.

Not measured (assumptions): e5m2 with an f16 accumulator (taken as e4m3 with f16: F = 13, rounded to
nearest f16), mixed e4m3 x e5m2 operands (F = 13, each operand with its own subnormal exponent),
N other than 64 (the model is per element; N only changes how many columns an instruction covers).

Speed: 0.12 ms for a 16 x 256 bf16 k16 block (one warp's share of an m64n256k16), 0.22 ms for e4m3 k32,
0.08 ms for tf32 k8 (one core of an AMD EPYC, NumPy 2); inf/NaN operands add about 0.1 ms.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KINDS", "dot_accumulate", "dot_accumulate_value"]

# kind: (F: bits kept below the largest tag, significant bits of an f32 result, minimum normal exponent)
_PARAMS = {
    "bf16": (25, 24, -126),
    "f16": (25, 24, -14),
    "tf32": (25, 24, -126),
    "e4m3": (13, 14, -6),
    "e5m2": (13, 14, -14),
}
KINDS = tuple(_PARAMS)
_GRID_MIN = -158  # the truncation grid never goes below 2^-158
_NONE = -(1 << 20)  # tag of a zero term (takes no part in the maximum)
_F32_NAN = np.uint32(0x7FFFFFFF)
_F16_NAN = np.uint16(0x7FFF)
_TWO128 = 2.0 ** 128


def _tags(x: np.ndarray, emin: int) -> np.ndarray:
    e = np.frexp(x)[1]  # x = m * 2^e, m in [0.5, 1)
    np.subtract(e, 1, out=e)
    np.maximum(e, emin, out=e)
    e[x == 0] = _NONE
    return e


def _kinds(kind):
    akind, bkind = (kind, kind) if isinstance(kind, str) else tuple(kind)
    if akind not in _PARAMS or bkind not in _PARAMS:
        raise ValueError(f"kind must be one of {KINDS} (or a pair of them), got {kind!r}")
    fp8 = ("e4m3", "e5m2")
    if (akind in fp8) != (bkind in fp8) or (akind not in fp8 and akind != bkind):
        raise ValueError(f"wgmma has no {akind} x {bkind} form")
    return akind, bkind


def _c_values(c_bits, acc, shape) -> np.ndarray:
    if c_bits is None:
        return np.zeros(shape, np.float64)
    c_bits = np.asarray(c_bits)
    if c_bits.shape != shape:
        raise ValueError(f"c_bits must have shape {shape}, got {c_bits.shape}")
    if acc == "f32":
        return c_bits.astype(np.uint32).view(np.float32).astype(np.float64)
    return c_bits.astype(np.uint16).view(np.float16).astype(np.float64)


def dot_accumulate_value(a, b, c, kind) -> np.ndarray:
    """The exact sum V of step 3 (float64, exact) for finite float64 ``a`` (rows, k), ``b`` (n, k) and
    ``c`` (rows, n); before the final rounding of step 4. A zero sum is +0."""
    akind, bkind = _kinds(kind)
    F, _, emin_a = _PARAMS[akind]
    emin_b = _PARAMS[bkind][2]
    at = np.ascontiguousarray(a.T)  # (k, rows): K first, so the reductions run over contiguous slabs
    bt = np.ascontiguousarray(b.T)  # (k, n)
    ta = _tags(at, emin_a)
    tb = _tags(bt, emin_b)
    tags = ta[:, :, None] + tb[:, None, :]  # (k, rows, n)
    g = np.maximum.reduce(tags, axis=0)
    tc = np.frexp(c)[1]
    np.subtract(tc, 1, out=tc)
    np.maximum(tc, -126, out=tc)
    tc[c == 0] = _NONE
    np.maximum(g, tc, out=g)
    np.subtract(g, F, out=g)
    np.maximum(g, _GRID_MIN, out=g)  # the grid exponent
    scale = np.ldexp(1.0, -g)
    p = at[:, :, None] * bt[:, None, :]  # exact products, (k, rows, n)
    p *= scale
    np.trunc(p, out=p)
    q = np.add.reduce(p, axis=0)
    cs = c * scale
    np.trunc(cs, out=cs)
    q += cs  # integers below 2^33: exact
    q += 0.0  # -0 -> +0
    q *= np.ldexp(1.0, g)  # exact: a power of two, no underflow (g >= -158)
    return q


def _round_f32(v: np.ndarray, prec: int) -> np.ndarray:
    """RZ to ``prec`` significant bits and to f32; |v| >= 2^128 -> inf; a zero result is +0."""
    if prec < 24:
        m, e = np.frexp(v)
        m *= float(1 << prec)
        np.trunc(m, out=m)
        v = np.ldexp(m, e - prec)
    with np.errstate(over="ignore"):
        y = v.astype(np.float32)  # round to nearest (inf past the largest finite value)
    bits = y.view(np.uint32)
    # where rounding went away from zero step back one ulp (inf -> the largest finite value)
    bits -= (np.abs(y) > np.abs(v)).view(np.uint8).astype(np.uint32)
    big = np.abs(v) >= _TWO128
    if big.any():
        bits[big] = np.where(v[big] < 0, np.uint32(0xFF800000), np.uint32(0x7F800000))
    bits[bits == np.uint32(0x80000000)] = 0  # a sum truncated to zero is +0
    return bits


def dot_accumulate(a, b, c_bits, kind, acc: str = "f32") -> np.ndarray:
    """One wgmma K-step for every (row, col): ``D[row, col] = sum_k a[row, k] * b[col, k] + C[row, col]``
    as the H100 tensor core computes it (the model in the module docstring).

    ``a``: float64 (rows, k), the exact A values of the rows (imm-scale-a already applied: pass -a for
    -1); ``b``: float64 (n, k), row ``col`` holding column ``col`` of B (imm-scale-b applied);
    ``c_bits``: the accumulator's raw bits, (rows, n): f32 bits (uint32) for ``acc="f32"``, f16 bits
    (uint16, or the low half of wider integers) for ``acc="f16"``; ``None`` when scale-d is false.
    ``kind``: the input type, "bf16", "f16", "tf32", "e4m3", "e5m2" (or an (a, b) pair for mixed fp8).
    Returns uint32 f32 bits (``acc="f32"``) or uint16 f16 bits (``acc="f16"``), shape (rows, n).
    """
    if acc not in ("f32", "f16"):
        raise ValueError(f"acc must be 'f32' or 'f16', got {acc!r}")
    akind, _ = _kinds(kind)
    if acc == "f16" and akind not in ("f16", "e4m3", "e5m2"):
        raise ValueError(f"wgmma has no .f16 accumulator form for .{akind} inputs")
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"a must be (rows, k) and b (n, k), got {a.shape} and {b.shape}")
    c = _c_values(c_bits, acc, (a.shape[0], b.shape[0]))
    fa, fb, fc = np.isfinite(a), np.isfinite(b), np.isfinite(c)
    special = None
    if not (fa.all() and fb.all() and fc.all()):
        with np.errstate(invalid="ignore", over="ignore"):
            special = (a[:, None, :] * b[None, :, :]).sum(axis=2) + c  # inf / NaN exactly where special
        a, b, c = np.where(fa, a, 0.0), np.where(fb, b, 0.0), np.where(fc, c, 0.0)
    v = dot_accumulate_value(a, b, c, kind)
    if acc == "f32":
        out = _round_f32(v, _PARAMS[akind][1])
        if special is not None:
            sp = ~np.isfinite(special)
            out[sp] = special[sp].astype(np.float32).view(np.uint32)
            out[np.isnan(special)] = _F32_NAN
        return out
    with np.errstate(over="ignore"):
        h = v.astype(np.float16)  # IEEE round to nearest even from float64
    h += np.float16(0.0)  # a sum rounded to zero is +0
    out = h.view(np.uint16)
    if special is not None:
        sp = ~np.isfinite(special)
        out[sp] = special[sp].astype(np.float16).view(np.uint16)
        out[np.isnan(special)] = _F16_NAN
    return out
