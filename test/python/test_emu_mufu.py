"""ex2.approx.f32 and lg2.approx.f32 in the emulator (fa4_mlir.emu.isa.mufu) against values measured
on an H100.

The expected bits below were read back from an H100 80GB HBM3 (sm_90a, driver 580) by
``bench/emu_mufu_probe.py`` (2026-11-25); they are the hardware's, not the model's. The ISA's bound
(2 ulp from the correctly rounded result) is checked on random inputs of every binade too.
"""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir.emu.isa.mufu import ex2_approx_f32, lg2_approx_f32, mufu_ex2


def bits(x) -> np.ndarray:
    return np.array(x, np.float32).view(np.uint32)


# (x, ex2.approx.ftz.f32, ex2.approx.f32) as the H100 returned them
MEASURED = [
    (0.0, 0x3F800000, 0x3F800000),
    (-0.0, 0x3F800000, 0x3F800000),
    (1e-45, 0x3F800000, 0x3F800000),
    (-1e-45, 0x3F800000, 0x3F800000),
    (np.inf, 0x7F800000, 0x7F800000),
    (-np.inf, 0x00000000, 0x00000000),
    (np.nan, 0x7FFFFFFF, 0x7FFFFFFF),
    (1.0, 0x40000000, 0x40000000),
    (-1.0, 0x3F000000, 0x3F000000),
    (0.5, 0x3FB504F3, 0x3FB504F3),
    (128.0, 0x7F800000, 0x7F800000),
    (127.99999, 0x7F7FFFA8, 0x7F7FFFA8),
    (-126.0, 0x00800000, 0x00800000),
    (-126.5, 0x00000000, 0x005A8279),  # ftz flushes; without it the squared half-argument is subnormal
    (-127.0, 0x00000000, 0x003FFFFF),  # one below the exact 2^-127 (0x00400000): N[0.5]^2 rounded
    (-149.0, 0x00000000, 0x00000001),
    (-150.0, 0x00000000, 0x00000000),
]
# negative arguments: the hardware's table for 2^-f is not its 2^f table scaled (the model's two tables)
MEASURED_NEG = [
    (-1.1920928955078125e-07, 1065353214),   # -2^-23: 0x3F7FFFFE, while RN(2^-2^-23) is 0x3F7FFFFF
    (-3.0517578125e-05, 1065352860),
    (-0.0078125, 1065262608),
    (-2.000000238418579, 1048575996),
    (-2.000000476837158, 1048575994),
    (-2.0000007152557373, 1048575991),
    (-2.0000009536743164, 1048575988),
    (-2.0000011920928955, 1048575985),
]


@pytest.mark.parametrize("x, ftz, plain", MEASURED)
def test_special_and_edge_values_match_the_h100(x, ftz, plain):
    assert int(ex2_approx_f32(bits([x]), ftz=True)[0]) == ftz
    assert int(ex2_approx_f32(bits([x]), ftz=False)[0]) == plain


def test_negative_arguments_use_their_own_table():
    xs = np.array([x for x, _ in MEASURED_NEG], np.float32)
    assert mufu_ex2(xs).tolist() == [b for _, b in MEASURED_NEG]


def test_the_worst_case_is_two_ulps_below_round_to_nearest():
    # the probe's largest error over all 2^32 inputs: 2 ulp, at x = -0.0048980712890625
    x = np.float32(-0.0048980712890625)
    rn = int(np.float32(2.0 ** float(x)).view(np.uint32))
    assert int(mufu_ex2(np.array([x]))[0]) == rn - 2


def test_arguments_are_truncated_to_a_2_pow_minus_23_grid_toward_zero():
    # |x| = n + j 2^-23 + r with 0 <= r < 2^-23 gives the result of n + j 2^-23, for both signs
    rng = np.random.default_rng(7)
    grid = (rng.integers(0, 1 << 23, 2000) / 2.0 ** 23).astype(np.float64)
    fine = grid + rng.uniform(0, 2.0 ** -23, grid.size) * 0.999
    fine32 = fine.astype(np.float32)
    keep = (fine32 >= grid) & (fine32 < grid + 2.0 ** -23)  # still inside the same grid step in f32
    for sign in (1.0, -1.0):
        a = mufu_ex2((sign * grid[keep]).astype(np.float32))
        b = mufu_ex2(sign * fine32[keep])
        assert (a == b).all()


def test_within_the_isa_bound_on_every_binade():
    # "maximum ulp error is 2 ulp from correctly rounded result" (PTX ISA, ex2)
    rng = np.random.default_rng(3)
    e = rng.integers(-40, 7, 20000)
    x = (rng.uniform(1, 2, e.size) * 2.0 ** e * rng.choice([-1, 1], e.size)).astype(np.float32)
    x = x[(x > -126) & (x < 128)]
    got = mufu_ex2(x).astype(np.int64)
    ref = np.exp2(x.astype(np.float64)).astype(np.float32).view(np.uint32).astype(np.int64)
    assert np.abs(got - ref).max() <= 2
    assert 0.5 < (got == ref).mean() < 1.0  # mostly correctly rounded, but not a correctly rounded model


# lg2.approx.ftz.f32 as the H100 returned it: (x bits, result bits)
MEASURED_LG2 = [
    (0x00000000, 0xFF800000), (0x80000000, 0xFF800000), (0x00000001, 0xFF800000), (0x80000001, 0xFF800000),
    (0x7F800000, 0x7F800000), (0xFF800000, 0x7FFFFFFF), (0x7FC00000, 0x7FFFFFFF), (0xBF800000, 0x7FFFFFFF),
    (0x3F800000, 0x00000000), (0x43000000, 0x40E00000), (0x42FFFFFF, 0x40DFFFFF), (0x3F000000, 0xBF7FFFFE),
    (0x40000000, 0x3F800000), (0x40400000, 0x3FCAE00D), (0xC0000000, 0x7FFFFFFF),
    # binades below 1: (e + 1) + the hardware's own log2 on [0.5, 1), rounded toward zero
    (0x00800000, 0xC2FBFFFF), (0x0080AC01, 0xC2FBFC21), (0x0081006C, 0xC2FBFA3D), (0x04000000, 0xC2EDFFFF),
    (0x0400AC01, 0xC2EDFC21), (0x3F000003, 0xBF7FFFF5), (0x3F000004, 0xBF7FFFF2), (0x3F000673, 0xBF7FED62),
    # just above 1: the absolute error bound, not a relative one (log2(1 + 2^-23) is 1.72e-7)
    (0x3F800001, 0x3495F600), (0x3F800002, 0x34F24A00),
    # binades above 2: e + the hardware's log2 on [1, 2), rounded toward zero
    (0x40000002, 0x3F800003), (0x44000003, 0x41100000), (0x44000008, 0x41100001), (0x4400001B, 0x41100004),
]


@pytest.mark.parametrize("x, want", MEASURED_LG2, ids=[f"{x:08x}" for x, _ in MEASURED_LG2])
def test_lg2_matches_the_h100(x, want):
    assert int(lg2_approx_f32(np.array([x], np.uint32), ftz=True)[0]) == want


def test_lg2_without_ftz_scales_subnormals():
    # ptxas: |x| < 2^-126 -> lg2(x * 2^24) - 24 (relative error 2^-22 still); zero stays -inf, a
    # negative subnormal is NaN; normal inputs are MUFU.LG2's
    sub = np.array([0x00000001, 0x00400000, 0x00012345], np.uint32)
    got = lg2_approx_f32(sub, ftz=False).view(np.float32).astype(np.float64)
    ref = np.log2(sub.view(np.float32).astype(np.float64))
    assert (np.abs(got - ref) / np.abs(ref)).max() <= 2.0 ** -22
    assert (lg2_approx_f32(sub, ftz=True) == 0xFF800000).all()
    special = lg2_approx_f32(np.array([0x00000000, 0x80000001, 0x40400000], np.uint32), ftz=False)
    assert special.tolist() == [0xFF800000, 0x7FFFFFFF, 0x3FCAE00D]


def test_lg2_within_the_isa_bound():
    # "maximum absolute error 2^-22 ... for x in [0.5, 2]", "relative error 2^-22 elsewhere" (PTX ISA, lg2)
    rng = np.random.default_rng(11)
    e = rng.integers(-125, 127, 20000)
    x = (rng.uniform(1, 2, e.size) * 2.0 ** e).astype(np.float32)
    got = lg2_approx_f32(x.view(np.uint32), ftz=True).view(np.float32).astype(np.float64)
    ref = np.log2(x.astype(np.float64))
    inside = (x >= 0.5) & (x <= 2)
    assert np.abs(got - ref)[inside].max() <= 2.0 ** -22
    assert (np.abs(got - ref) / np.abs(ref))[~inside].max() <= 2.0 ** -22
