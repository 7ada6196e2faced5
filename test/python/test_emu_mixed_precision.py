"""The mixed-precision floating-point forms (PTX ISA "Mixed precision floating point instructions",
sm_100+: add/sub{.rnd}{.sat}.f32.{f16,bf16} and fma.rnd{.sat}.f32.{f16,bf16}), which LLVM emits for
sm_100a when an f32 sum takes widened bf16 values (the dsl tutorial kernel): the narrow operands
widen exactly, then the f32 operation rounds with the given mode. Checked against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir import emu

FORMS = ["add.rn.f32.bf16 %f3, %h1, %f1", "add.rz.f32.bf16 %f3, %h1, %f1", "sub.rm.f32.f16 %f3, %h1, %f1",
         "add.rp.sat.f32.f16 %f3, %h1, %f1", "fma.rn.f32.bf16 %f3, %h1, %h2, %f1", "add.f32.bf16 %f3, %h1, %f1"]


def _kernel(form: str) -> emu.Program:
    return emu.load_ptx(f"""
.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pout)
{{
    .reg .b16 %h<4>;
    .reg .f32 %f<4>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<12>;
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pc];
    ld.param.u64 %rd4, [pout];
    mul.wide.u32 %rd5, %r1, 2;
    mul.wide.u32 %rd6, %r1, 4;
    add.u64 %rd7, %rd1, %rd5;
    add.u64 %rd8, %rd2, %rd5;
    add.u64 %rd9, %rd3, %rd6;
    add.u64 %rd10, %rd4, %rd6;
    ld.global.b16 %h1, [%rd7];
    ld.global.b16 %h2, [%rd8];
    ld.global.f32 %f1, [%rd9];
    {form};
    st.global.f32 [%rd10], %f3;
    ret;
}}
""")


def _round_f32(exact: np.ndarray, mode: str) -> np.ndarray:
    """float64 values (exact here: the operands have few bits) rounded to f32 with ``mode``."""
    near = exact.astype(np.float32)
    below = np.where(near.astype(np.float64) > exact, np.nextafter(near, np.float32(-np.inf)), near)
    above = np.where(near.astype(np.float64) < exact, np.nextafter(near, np.float32(np.inf)), near)
    return {"rn": near, "rm": below, "rp": above, "rz": np.where(exact >= 0, below, above)}[mode]


@pytest.mark.parametrize("form", FORMS)
def test_mixed_precision_forms_widen_then_round_in_f32(form):
    rng = np.random.default_rng(7)
    narrow = "bf16" if form.split()[0].endswith("bf16") else "f16"
    a32 = rng.standard_normal(32).astype(np.float32) * 4
    b32 = rng.standard_normal(32).astype(np.float32)
    if narrow == "bf16":  # bf16 bits: the upper half of an f32 (truncated: exact)
        a_bits, b_bits = (a32.view(np.uint32) >> 16).astype(np.uint16), (b32.view(np.uint32) >> 16).astype(np.uint16)
        a = (a_bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        b = (b_bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    else:
        a_bits, b_bits = a32.astype(np.float16).view(np.uint16), b32.astype(np.float16).view(np.uint16)
        a, b = a_bits.view(np.float16).astype(np.float64), b_bits.view(np.float16).astype(np.float64)
    # c with bits below a's last place, so the rounding mode matters in most lanes
    c = (rng.standard_normal(32) * 2.0 ** -20).astype(np.float32)
    out = np.zeros(32, np.float32)
    _kernel(form).launch("k", block=(32, 1, 1), args=[a_bits, b_bits, c, out])
    opcode = form.split()[0].split(".")
    mode = next((m for m in opcode if m in ("rn", "rz", "rm", "rp")), "rn")
    exact = {"add": a + c, "sub": a - c, "fma": a * b + c}[opcode[0]]
    want = _round_f32(exact, mode)
    if "sat" in opcode:
        want = np.clip(want, 0, 1).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    assert (want != _round_f32(exact, "rz" if mode != "rz" else "rp")).any()  # the mode was exercised


def test_a_bad_mixed_precision_form_is_unsupported():
    with pytest.raises(emu.Unsupported, match=r"modifiers \['ftz'\] \(mixed precision: one of .rn/.rz/.rm/.rp, "
                                              r"required for fma, and .sat\)"):
        _kernel("add.ftz.f32.bf16 %f3, %h1, %f1").kernel("k")
    with pytest.raises(emu.Unsupported, match=r"required for fma"):
        _kernel("fma.f32.bf16 %f3, %h1, %h2, %f1").kernel("k")
