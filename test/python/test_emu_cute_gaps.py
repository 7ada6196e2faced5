"""What the emulator gained to run CuTe DSL's sm_100a GEMM (test_emu_cute_sm100a.py): the
disable-output-lane operand of tcgen05.mma, and ``emu.Aggregate`` (a struct passed by value in a ``.b8``
parameter, with pointers to arrays inside). Expected values are computed here, independently."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from fa4_mlir import emu
from fa4_mlir.emu.isa import tcgen05_desc as D
from fa4_mlir.emu.tmem import FILL

import test_emu_tcgen05 as T


def _with_mask(words, monkeypatch) -> emu.Program:
    """The 128x32x64 SS MMA kernel of test_emu_tcgen05, each tcgen05.mma given a disable-output-lane vector."""
    texts = []
    monkeypatch.setattr(T.emu, "load_ptx", texts.append)  # catch the kernel's text instead of parsing it
    T.mma_kernel(32, False)
    monkeypatch.undo()
    text = texts[0]
    movs = "".join(f"    mov.b32 %r{90 + i}, {w};\n" for i, w in enumerate(words))
    vector = "{" + ", ".join(f"%r{90 + i}" for i in range(len(words))) + "}"
    text, count = re.subn(r"(tcgen05\.mma\.cta_group::1\.kind::f16 [^;]*%r6), (%p\d);", rf"\1, {vector}, \2;", text)
    assert count == 4
    text = text.replace("    ld.param.u32 %r6, [idesc];\n", "    ld.param.u32 %r6, [idesc];\n" + movs, 1)
    return emu.load_ptx(text)


# The MMA harness borrowed from test_emu_tcgen05 executes no tcgen05 fences; the tests below are about which
# lanes an MMA writes, not ordering, so they launch with the happens-before checker (fa4_mlir.emu.races) off;
# the in-flight checks stay on.
def _mma_args(out):
    rng = np.random.default_rng(7)
    a, b = T._bf16(rng.standard_normal((128, 64))), T._bf16(rng.standard_normal((32, 64)))
    a_bytes, steps = T.stage_k_major(a, True)
    b_bytes, _ = T.stage_k_major(b, True)
    b_pad = np.zeros(128 * 128, np.uint8)
    b_pad[:b_bytes.size] = b_bytes
    args = [a_bytes, b_pad, out, np.zeros(1, np.uint16), 1 << 4 | 1 << 7 | 1 << 10 | 4 << 17 | 8 << 24,
            *[D.encode_smem_descriptor(32 * s, 16, 1024) for s in range(4)],
            *[D.encode_smem_descriptor(16384 + 32 * s, 16, 1024) for s in range(4)]]
    return args, T._f64(a) @ T._f64(b).T


def test_disable_output_lane_leaves_those_lanes_of_d_unwritten(monkeypatch):
    # Word i, bit j set: TMEM lane 32 i + j is not written (M = 128: row r of D is lane r).
    words = [0x00000001, 0x80000000, 0, 0x000000F0]
    off = np.zeros(128, bool)
    off[[0, 63, 100, 101, 102, 103]] = True
    out = np.zeros((128, 32), np.float32)
    args, want = _mma_args(out)
    _with_mask(words, monkeypatch).launch("k", block=(128, 1, 1), smem_bytes=40960, args=args, race_checks=False)
    np.testing.assert_allclose(out[~off], want[~off], rtol=1e-6, atol=1e-6)
    assert (out[off].view(np.uint32) == FILL).all()  # never written: the allocation's fill pattern


def test_an_all_zero_disable_output_lane_vector_changes_nothing(monkeypatch):
    out = np.zeros((128, 32), np.float32)
    args, want = _mma_args(out)
    _with_mask([0, 0, 0, 0], monkeypatch).launch("k", block=(128, 1, 1), smem_bytes=40960, args=args, race_checks=False)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_a_disable_output_lane_vector_must_have_4_words_with_cta_group_1(monkeypatch):
    with pytest.raises(emu.Unsupported, match=r"the disable-output-lane vector of \.cta_group::1 must have 4 "
                                              r"elements, got 2"):
        _with_mask([0, 0], monkeypatch).launch("k", block=(128, 1, 1), smem_bytes=40960, args=_mma_args(np.zeros((128, 32),
                                                                                                    np.float32))[0])


def test_a_non_zero_disable_output_lane_vector_with_a_pair_is_unsupported():
    body = T.ALLOC.format(cols=256) + """
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u32 %r6, [idesc];
    mov.b32 %r90, 0;
    mov.b32 %r91, 4;
    setp.eq.u32 %p3, %r0, 0;
    @%p3 tcgen05.mma.cta_group::2.kind::f16 [%r2], %rd1, %rd2, %r6, {%r90, %r90, %r90, %r90, %r91, %r90, %r90, %r90}, %p3;
""" + T.DEALLOC.format(cols=256)
    desc = D.encode_smem_descriptor(1024, 16, 1024)
    with pytest.raises(emu.Unsupported, match=r"non-zero disable-output-lane vector is modelled for \.cta_group::1 "
                                              r"only, got \['0x0', '0x0', '0x0', '0x0', '0x4'"):
        T.kernel(body, T.PAIR_PARAMS).launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1),
                                             smem_bytes=40960, args=[np.zeros(1, np.uint32), desc, desc,
                                                                     D.encode_instr_descriptor(256, 128)])


# -- emu.Aggregate -------------------------------------------------------------------------------------------
AGG = """
.version 8.8
.target sm_100a
.address_size 64
.visible .entry k(.param .align 8 .b8 t[40], .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [t];
    ld.param.v2.u32 {%r1, %r2}, [t+8];
    ld.param.u32 %r3, [t+16];
    ld.param.u64 %rd2, [t+24];
    ld.param.u64 %rd3, [t+32];
    ld.param.u64 %rd4, [out];
    st.global.v2.u32 [%rd4], {%r1, %r2};
    st.global.u32 [%rd4+8], %r3;
    st.global.u64 [%rd4+16], %rd2;
    st.global.u64 [%rd4+24], %rd3;
    ld.global.u32 %r4, [%rd1+4];       // the pointer field reaches the array
    st.global.u32 [%rd4+32], %r4;
    mov.u32 %r5, 77;
    st.global.u32 [%rd1], %r5;          // and the kernel's writes land in it
    ret;
}
"""


def test_an_aggregate_lays_fields_out_at_their_natural_alignment_and_passes_arrays_by_address():
    array = np.array([1, 2, 3], np.uint32)
    out = np.zeros(5, np.uint64)
    fields = [("u64", array), ("s32", -5), ("s32", 7), ("s32", 9), ("s64", -(1 << 40)), ("u64", 1 << 63)]
    emu.load_ptx(AGG).launch("k", block=(1, 1, 1), args=[emu.Aggregate(fields), out])
    raw = out.tobytes()
    assert struct.unpack("<iiI", raw[:12]) == (-5, 7, 9)   # s32 at 8, 12, 16; the s64 skips to 24
    assert struct.unpack("<qQI", raw[16:36]) == (-(1 << 40), 1 << 63, 2)
    assert array[0] == 77


@pytest.mark.parametrize("fields, text", [
    ([("u64", 0)] * 6, r"is 40 bytes: the fields must fit, got field 5 \(\.u64\) at bytes 40\.\.47"),
    ([("s32", np.zeros(2, np.uint32))], r"field 0 \(\.s32\) must be a 64-bit parameter to take an array"),
    ([("s32", 1 << 31)], r"field 0 \(\.s32\) must be in \[-2147483648, 2147483647\], got 2147483648"),
    ([("f16", 1)], r"field 0 type must be a PTX integer or f32/f64 type, got 'f16'"),
])
def test_aggregate_field_errors(fields, text):
    with pytest.raises(emu.LaunchArgumentError, match=text):
        emu.load_ptx(AGG).launch("k", block=(1, 1, 1), args=[emu.Aggregate(fields), np.zeros(5, np.uint64)])


def test_an_aggregate_field_must_be_a_type_value_pair():
    with pytest.raises(emu.LaunchArgumentError, match=r"an Aggregate field must be \(type, value\), got \('u64',\)"):
        emu.Aggregate([("u64",)])


def test_an_aggregate_is_refused_for_a_scalar_parameter():
    with pytest.raises(emu.LaunchArgumentError, match=r"argument 'out' \(\.param \.u64\) must be"):
        emu.load_ptx(AGG).launch("k", block=(1, 1, 1), args=[emu.Aggregate([]), emu.Aggregate([])])
