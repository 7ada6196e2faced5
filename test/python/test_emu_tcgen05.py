"""tcgen05 (sm_100a) in the emulator, on hand-written PTX: the instruction and shared-memory
descriptors bit by bit, tensor-memory allocation rules, tcgen05.ld/st and the lane-access rule,
tcgen05.mma (SS and TS) against NumPy, tcgen05.commit, and the race checks. Expected values come from
the PTX ISA text ("TensorCore 5th Generation Family Instructions"), computed here independently of
the emulator's code (the layouts by their formulas, the swizzle by the ISA's XOR of address bits)."""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir import emu
from fa4_mlir.emu.isa import tcgen05_desc as D

HEADER = """
.version 8.7
.target sm_100a
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.shared .align 8 .b8 bar[8];
.shared .align 4 .b8 slot[4];
"""


# -- descriptors ------------------------------------------------------------------------------------------
def test_instruction_descriptor_fields_from_the_isa_table():
    # M = 128 (bits 24-28 = 8), N = 256 (bits 17-22 = 32), D f32 (bits 4-5 = 1), A and B bf16 (bits 7-9,
    # 10-12 = 1), B MN-major (bit 16).
    idesc = 1 << 4 | 1 << 7 | 1 << 10 | 1 << 16 | 32 << 17 | 8 << 24
    got = D.decode_instr_descriptor(idesc)
    assert (got.m, got.n, got.d_type, got.a_type, got.b_type) == (128, 256, "f32", "bf16", "bf16")
    assert got.a_k_major and not got.b_k_major and not got.negate_a and not got.negate_b
    got = D.decode_instr_descriptor(0 << 7 | 1 << 13 | 1 << 14 | 1 << 15 | 2 << 17 | 4 << 24 | 1 << 4)
    assert (got.m, got.n, got.a_type, got.negate_a, got.negate_b, got.a_k_major) == (64, 16, "f16", True, True, False)
    assert D.decode_instr_descriptor(D.encode_instr_descriptor(128, 64, "f16", "bf16")).n == 64


@pytest.mark.parametrize("bits, error, text", [
    (1 << 6, emu.ProtocolError, r"reserved bits \(6, 23, 29\)"),
    (1 << 23, emu.ProtocolError, "reserved bits"),
    (1 << 2, emu.Unsupported, "sparse"),
    (1 << 3, emu.ProtocolError, "saturate"),
    (1 << 30, emu.Unsupported, "maximum shift"),
    (2 << 4, emu.ProtocolError, "D format"),
    (2 << 7, emu.ProtocolError, "A/B formats"),
])
def test_instruction_descriptor_errors(bits, error, text):
    base = 1 << 4 | 1 << 7 | 1 << 10 | 16 << 17 | 8 << 24
    with pytest.raises(error, match=text):
        D.decode_instr_descriptor(base | bits)


def test_other_kinds_are_unsupported():
    with pytest.raises(emu.Unsupported, match=r"\.kind::i8 is not modelled"):
        D.decode_instr_descriptor(0, kind="i8")


@pytest.mark.parametrize("a_code, b_code, a_type, b_type", [(0, 0, "e4m3", "e4m3"), (1, 1, "e5m2", "e5m2"),
                                                            (0, 1, "e4m3", "e5m2"), (1, 0, "e5m2", "e4m3")])
def test_f8f6f4_descriptor_formats_from_the_isa_table(a_code, b_code, a_type, b_type):
    # Table "Instruction descriptor format for .kind::tf32, .kind::f16, .kind::f8f6f4 and .kind::i8": A format
    # bits 7-9, B format bits 10-12, E4M3 = 0, E5M2 = 1; one instruction's K is 256 bits = 32 fp8 elements.
    got = D.decode_instr_descriptor(1 << 4 | a_code << 7 | b_code << 10 | 1 << 16 | 32 << 17 | 8 << 24, "f8f6f4")
    assert (got.m, got.n, got.a_type, got.b_type, got.k, got.kind) == (128, 256, a_type, b_type, 32, "f8f6f4")
    assert got.a_k_major and not got.b_k_major
    assert D.decode_instr_descriptor(D.encode_instr_descriptor(128, 64, a_type, b_type), "f8f6f4") == \
        D.decode_instr_descriptor(1 << 4 | a_code << 7 | b_code << 10 | 8 << 17 | 8 << 24, "f8f6f4")


def test_tf32_descriptor():
    got = D.decode_instr_descriptor(1 << 4 | 2 << 7 | 2 << 10 | 8 << 17 | 4 << 24, "tf32")
    assert (got.m, got.n, got.a_type, got.b_type, got.k) == (64, 64, "tf32", "tf32", 8)


@pytest.mark.parametrize("kind, bits, error, text", [
    ("f8f6f4", 3 << 7, emu.Unsupported, r"\.kind::f8f6f4 with e2m3 operands \(A format 3, B format 0"),
    ("f8f6f4", 4 << 10, emu.Unsupported, r"with e3m2 operands \(A format 0, B format 4"),
    ("f8f6f4", 5 << 7 | 5 << 10, emu.Unsupported, r"with e2m1/e2m1 operands .* only e4m3 and e5m2 are"),
    ("f8f6f4", 2 << 7, emu.ProtocolError, r"\.kind::f8f6f4 A/B formats \(bits 7-9, 10-12\) must be 0 \(e4m3\), "
                                          r"1 \(e5m2\), 3 \(e2m3\), 4 \(e3m2\), 5 \(e2m1\), got 2/0"),
    ("f8f6f4", 7 << 10, emu.ProtocolError, r"got 0/7"),
    ("f8f6f4", 2 << 4, emu.ProtocolError, r"\.kind::f8f6f4 D format \(bits 4-5\) must be 0 \(f16\) or 1 \(f32\), got 2"),
    ("tf32", 1 << 7 | 1 << 10, emu.ProtocolError, r"\.kind::tf32 A/B formats .* must be 2 \(tf32\), got 1/1"),
    ("tf32", 0 << 4 | 2 << 7 | 2 << 10, emu.ProtocolError, r"\.kind::tf32 D format \(bits 4-5\) must be 1 \(f32\), got 0"),
])
def test_f8f6f4_and_tf32_descriptor_errors(kind, bits, error, text):
    base = (1 << 4 if not (bits >> 4 & 3) and "D format" not in text else 0) | 8 << 17 | 8 << 24
    if kind == "tf32" and "A/B" not in text and not bits >> 7:
        bits |= 2 << 7 | 2 << 10
    with pytest.raises(error, match=text):
        D.decode_instr_descriptor(base | bits, kind)


@pytest.mark.parametrize("code, mode", [(0, "none"), (2, "128B"), (4, "64B"), (6, "32B")])
def test_smem_descriptor_fields(code, mode):
    desc = (0x1230 >> 4) | (256 >> 4) << 16 | (1024 >> 4) << 32 | 1 << 46 | code << 61
    got = D.decode_smem_descriptor(desc)
    assert (got.start_address, got.leading_byte_offset, got.stride_byte_offset, got.swizzle) == (0x1230, 256, 1024, mode)
    assert D.decode_smem_descriptor(D.encode_smem_descriptor(0x1230, 256, 1024, mode)) == got


@pytest.mark.parametrize("desc, error, text", [
    (0, emu.ProtocolError, "fixed constant 0b001"),
    (1 << 46 | 1 << 14, emu.ProtocolError, "reserved bits"),
    (1 << 46 | 1 << 55, emu.ProtocolError, "reserved bits"),
    (1 << 46 | 1 << 61, emu.Unsupported, "32-byte atomicity"),
    (1 << 46 | 3 << 61, emu.ProtocolError, "swizzle mode"),
    (1 << 46 | 1 << 52, emu.Unsupported, "leading-byte-offset mode"),
    (1 << 46 | 2 << 49, emu.Unsupported, "base offset"),
])
def test_smem_descriptor_errors(desc, error, text):
    with pytest.raises(error, match=text):
        D.decode_smem_descriptor(desc)


def test_tmem_address_split():
    assert D.split_tmem_address(0x0060_0040) == (96, 64)
    with pytest.raises(emu.ProtocolError, match="lane < 128"):
        D.split_tmem_address(0x0080_0000)
    with pytest.raises(emu.ProtocolError, match="column < 512"):
        D.split_tmem_address(0x0000_0200)


# -- allocation, ld/st ---------------------------------------------------------------------------------------
def kernel(body: str, params: str = ".param .u64 out") -> emu.Program:
    return emu.load_ptx(HEADER + f"""
.visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b32 %r<160>;
    .reg .b64 %rd<16>;
{body}
}}
""")


def regs(first: int, count: int) -> str:
    return "{" + ", ".join(f"%r{first + i}" for i in range(count)) + "}"


ALLOC = """
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra ALLOCATED;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], {cols};
    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
ALLOCATED:
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.u32 %r2, [slot];
"""
DEALLOC = """
    bar.sync 0;
    @%p1 bra FREED;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, {cols};
FREED:
    ret;
"""


def test_st_then_ld_round_trip_by_lane_and_column():
    # 32x32b.x4: thread t of warp w moves register i to/from lane 32*(w%4) + t, column col + i.
    body = ALLOC.format(cols=64) + f"""
    shl.b32 %r3, %r1, 21;            // lane base 32*w in bits 31-16
    add.u32 %r4, %r2, %r3;
    add.u32 %r4, %r4, 8;             // column 8
    mul.lo.u32 %r10, %r0, 100;
    add.u32 %r11, %r10, 1;
    add.u32 %r12, %r10, 2;
    add.u32 %r13, %r10, 3;
    tcgen05.st.sync.aligned.32x32b.x4.b32 [%r4], {{%r10, %r11, %r12, %r13}};
    tcgen05.wait::st.sync.aligned;
    sub.u32 %r5, %r4, 6;             // read columns 2..9: six unwritten, then two written
    tcgen05.ld.sync.aligned.32x32b.x8.b32 {regs(20, 8)}, [%r5];
    tcgen05.wait::ld.sync.aligned;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r0, 32;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {{%r20, %r21, %r22, %r23}};
    st.global.v4.u32 [%rd3+16], {{%r24, %r25, %r26, %r27}};
""" + DEALLOC.format(cols=64)
    out = np.zeros((128, 8), np.uint32)
    kernel(body).launch("k", block=(128, 1, 1), smem_bytes=1024, args=[out])
    t = np.arange(128, dtype=np.uint32)
    np.testing.assert_array_equal(out[:, 6], t * 100)
    np.testing.assert_array_equal(out[:, 7], t * 100 + 1)
    assert (out[:, :6] == 0xA5A5A5A5).all()  # never written: the fill pattern


def test_a_warp_reaches_only_its_own_32_lanes():
    body = ALLOC.format(cols=32) + """
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r20}, [%r2];   // lane 0: right for warp 0 only
    tcgen05.wait::ld.sync.aligned;
""" + DEALLOC.format(cols=32)
    with pytest.raises(emu.ProtocolError, match=r"warp 1 \(warp 1 of its warpgroup\) reaches tensor-memory lanes "
                                                r"32\.\.63 only; this access needs lanes 0\.\.31"):
        kernel(body).launch("k", block=(64, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])


def test_a_tcgen05_ld_result_is_usable_without_wait_ld_and_dealloc_may_follow():
    # PTX ISA 9.7.16.6.4.5: "an intra-thread ordering through true register dependency will be respected"
    # for tcgen05.ld; CuTe DSL's GEMM epilogues rely on it (no tcgen05.wait::ld before dealloc either).
    body = ALLOC.format(cols=32) + """
    mov.u32 %r22, 0x12345678;
    mov.u32 %r23, 0x9abcdef0;
    tcgen05.st.sync.aligned.32x32b.x2.b32 [%r2], {%r22, %r23};
    tcgen05.wait::st.sync.aligned;
    tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r20, %r21}, [%r2];
    mov.b64 %rd5, {%r20, %r21};
    ld.param.u64 %rd1, [out];
    st.global.u64 [%rd1], %rd5;
""" + DEALLOC.format(cols=32)
    out = np.zeros(1, np.uint64)
    kernel(body).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[out])
    assert out[0] == 0x9ABCDEF0_12345678


def test_writing_cells_a_tcgen05_ld_still_reads_is_a_data_race_until_wait_ld():
    # The same section: a register dependency does not order the load's TMEM read before later writes;
    # "to enforce such memory orderings and avoiding anti-dependency hazards around tcgen05.ld,
    # tcgen05.wait::ld must be used".
    body = ALLOC.format(cols=32) + """
    tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r20, %r21}, [%r2];
    add.u32 %r22, %r20, 1;
    {WAIT}
    tcgen05.st.sync.aligned.32x32b.x1.b32 [%r2+1], {%r22};
    tcgen05.wait::st.sync.aligned;
""" + DEALLOC.format(cols=32)
    out = np.zeros(1, np.uint32)
    kernel(body.replace("{WAIT}", "tcgen05.wait::ld.sync.aligned;")).launch("k", block=(32, 1, 1), smem_bytes=1024,
                                                                             args=[out])
    with pytest.raises(emu.ProtocolError, match=r"tcgen05.st.* writes tensor memory lanes 0\.\.31, columns 1\.\.1 "
                                                r"that the tcgen05.ld at line \d+ \(warp 0 of CTA \(0, 0, 0\)\) still "
                                                r"reads: a data race; the loading warp must execute tcgen05.wait::ld"):
        kernel(body.replace("{WAIT}", "")).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[out])


@pytest.mark.parametrize("cols, text", [(48, r"power of 2 in \[32, 512\], got 48"), (16, "got 16"), (1024, "got 1024")])
def test_alloc_column_count_rule(cols, text):
    with pytest.raises(emu.ProtocolError, match=text):
        kernel(ALLOC.format(cols=cols) + DEALLOC.format(cols=cols)).launch("k", block=(32, 1, 1), smem_bytes=1024,
                                                                         args=[np.zeros(1, np.uint32)])


def test_alloc_writes_the_address_and_allocations_do_not_overlap():
    body = """
    mov.u32 %r0, %tid.x;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;
    ld.shared.u32 %r2, [slot];
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 128;
    ld.shared.u32 %r3, [slot];
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
    ld.shared.u32 %r4, [slot];
    ld.param.u64 %rd1, [out];
    st.global.v4.u32 [%rd1], {%r2, %r3, %r4, %r0};
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 64;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 128;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r4, 32;
    ret;
"""
    out = np.zeros(4, np.uint32)
    kernel(body).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[out])
    spans = sorted([(out[0], 64), (out[1], 128), (out[2], 32)])
    assert all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:])), out  # lane 0, disjoint columns
    assert all(a % n == 0 and a + n <= 512 for a, n in spans), out


@pytest.mark.parametrize("mistake, text", [
    ("double", "frees nothing tcgen05.alloc returned"),
    ("leak", "exits with tensor memory still allocated: 64 columns at column 0"),
    ("size", "column count must equal the allocation's, 64 at column 0, got 32"),
    ("relinquish", "tcgen05.alloc after this CTA relinquished its allocation permit"),
    ("partial", "is .sync.aligned: all 32 lanes of the warp must execute it"),
])
def test_allocation_mistakes(mistake, text):
    body = {
        "double": "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;\n ld.shared.u32 %r2, [slot];\n"
                  "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 64;\n"
                  "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 64;",
        "leak": "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;",
        "size": "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;\n ld.shared.u32 %r2, [slot];\n"
                "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;",
        "relinquish": "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n"
                      "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;",
        "partial": "mov.u32 %r0, %tid.x;\n setp.ne.u32 %p1, %r0, 0;\n @%p1 bra SKIP;\n"
                   "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;\nSKIP:",
    }[mistake]
    with pytest.raises(emu.ProtocolError, match=text):
        kernel(body + "\n    ret;").launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])


def test_an_allocation_waits_for_columns_and_a_never_freed_one_deadlocks():
    # Two warps each take all 512 columns: the second blocks until the first frees them.
    body = """
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 512;
    ld.shared.u32 %r2, [%r9];
    {FREE}
    ret;
"""
    prefix = "mov.u32 %r0, %tid.x;\n shr.u32 %r1, %r0, 5;\n mov.u32 %r9, smem;\n shl.b32 %r8, %r1, 2;\n" \
             "add.u32 %r9, %r9, %r8;\n"
    free = "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 512;"
    for seed in range(3):
        kernel(prefix + body.replace("{FREE}", free)).launch("k", block=(64, 1, 1), smem_bytes=1024,
                                                             args=[np.zeros(1, np.uint32)], seed=seed)
    with pytest.raises(emu.Deadlock, match="free tensor-memory columns"):
        kernel(prefix + body.replace("{FREE}", "")).launch("k", block=(64, 1, 1), smem_bytes=1024,
                                                           args=[np.zeros(1, np.uint32)])


# -- mma -------------------------------------------------------------------------------------------------
def _bf16(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _swizzle128(offset: np.ndarray) -> np.ndarray:
    # PTX ISA "Swizzling Modes", 128B: bits [4,7) of the byte address XOR bits [7,10).
    return offset ^ (((offset >> 7) & 7) << 4)


def stage_k_major(tile: np.ndarray, swizzled: bool) -> tuple[np.ndarray, list]:
    """``tile`` (rows x 64 bf16 bits) as shared-memory bytes in a canonical K-major layout, with the
    (start offset, LBO, SBO) of each of its four K = 16 steps (PTX ISA "Shared Memory Matrix Layout")."""
    rows = tile.shape[0]
    m = np.arange(rows)[:, None]
    k = np.arange(64)[None, :]
    if swizzled:   # rows of 128 bytes, 8-row groups 1024 bytes apart (SBO), K steps of 32 bytes
        offset, steps = _swizzle128(m * 128 + k * 2), [(32 * s, 16, 1024) for s in range(4)]
    else:          # 8 x 16-byte core matrices: K chunks LBO = 128 apart, 8-row groups SBO = 1024 apart
        offset = (m % 8) * 16 + (m // 8) * 1024 + (k % 8) * 2 + (k // 8) * 128
        steps = [(256 * s, 128, 1024) for s in range(4)]
    out = np.zeros(rows * 128, np.uint8)
    view = out.view(np.uint16)
    view[(offset // 2).reshape(-1)] = tile.reshape(-1)
    return out, steps


def mma_kernel(n: int, ts: bool, wait: bool = True) -> emu.Program:
    """128 threads: copy A (32 KiB at smem+0 is more than enough) and B (at smem+16384) from global,
    allocate N columns (+16 for a TS A), four K steps of tcgen05.mma (enable-input-d false on the
    first), commit to ``bar``, wait, tcgen05.ld D row by row (lane = row) and store it."""
    a_from = """
    // TS: A's K step s to tensor memory columns N + 8s (two bf16 per column, lower K in the low half)
    ld.param.u64 %rd6, [a_tmem];
    mul.wide.u32 %rd7, %r0, 128;
    add.s64 %rd6, %rd6, %rd7;
    shl.b32 %r3, %r1, 21;
    add.u32 %r4, %r2, %r3;
    add.u32 %r4, %r4, {n};
""".format(n=n) + "".join(f"""
    ld.global.v4.u32 {{%r120, %r121, %r122, %r123}}, [%rd6+{32 * s}];
    ld.global.v4.u32 {{%r124, %r125, %r126, %r127}}, [%rd6+{32 * s + 16}];
    tcgen05.st.sync.aligned.32x32b.x8.b32 [%r4+{8 * s}], {regs(120, 8)};
""" for s in range(4)) + "    tcgen05.wait::st.sync.aligned;\n    tcgen05.fence::before_thread_sync;\n" if ts else ""
    cols = 32 if n + (32 if ts else 0) <= 32 else 64 if n + (32 if ts else 0) <= 64 else 128
    mmas = "".join(f"""
    ld.param.u64 %rd{10 + s % 2}, [b{s}];
    add.s64 %rd{10 + s % 2}, %rd{10 + s % 2}, %rd13;  // descriptors hold offsets from smem: add its address >> 4
    {'add.u32 %r7, %r2, ' + str(n + 8 * s) + ';' if ts else f'ld.param.u64 %rd12, [a{s}]; add.s64 %rd12, %rd12, %rd13;'}
    tcgen05.mma.cta_group::1.kind::f16 [%r2], {'[%r7]' if ts else '%rd12'}, %rd{10 + s % 2}, %r6, {'%p3' if s else '%p4'};
""" for s in range(4))
    params = ", ".join([".param .u64 a", ".param .u64 b", ".param .u64 out", ".param .u64 a_tmem", ".param .u32 idesc"]
                       + [f".param .u64 a{s}" for s in range(4)] + [f".param .u64 b{s}" for s in range(4)])
    body = f"""
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    mov.u32 %r30, smem;
    mov.u32 %r31, 0;
COPY:
    shl.b32 %r32, %r31, 7;
    add.u32 %r32, %r32, %r0;            // 16-byte chunk index
    shl.b32 %r33, %r32, 4;
    cvt.u64.u32 %rd3, %r33;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.v4.u32 {{%r40, %r41, %r42, %r43}}, [%rd4];
    add.u32 %r34, %r30, %r33;
    st.shared.v4.u32 [%r34], {{%r40, %r41, %r42, %r43}};
    setp.lt.u32 %p5, %r33, {n * 128};
    @!%p5 bra NEXT;
    ld.global.v4.u32 {{%r40, %r41, %r42, %r43}}, [%rd5];
    st.shared.v4.u32 [%r34+16384], {{%r40, %r41, %r42, %r43}};
NEXT:
    add.u32 %r31, %r31, 1;
    setp.lt.u32 %p6, %r31, 8;
    @%p6 bra COPY;
    setp.ne.u32 %p1, %r1, 0;
    setp.ne.u32 %p2, %r0, 0;
    @%p2 bra INIT_DONE;
    mbarrier.init.shared.b64 [bar], 1;
INIT_DONE:
    fence.proxy.async.shared::cta;
""" + ALLOC.format(cols=cols) + a_from + f"""
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.param.u32 %r6, [idesc];
    shr.u32 %r35, %r30, 4;
    cvt.u64.u32 %rd13, %r35;
    setp.eq.u32 %p3, %r0, 0;
    setp.ne.u32 %p4, %r0, 0;            // false for the issuing thread: the first step overwrites D
    @%p2 bra ISSUED;
{mmas}
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
ISSUED:
""" + ("""WAIT:
    mbarrier.try_wait.parity.shared.b64 %p7, [bar], 0;
    @!%p7 bra WAIT;
""" if wait else "") + f"""    tcgen05.fence::after_thread_sync;
    shl.b32 %r3, %r1, 21;
    add.u32 %r5, %r2, %r3;
    ld.param.u64 %rd8, [out];
    mul.wide.u32 %rd9, %r0, {4 * n};
    add.s64 %rd8, %rd8, %rd9;
""" + "".join(f"""
    tcgen05.ld.sync.aligned.32x32b.x16.b32 {regs(50, 16)}, [%r5+{16 * c}];
    tcgen05.wait::ld.sync.aligned;
    st.global.v4.u32 [%rd8+{64 * c}], {{%r50, %r51, %r52, %r53}};
    st.global.v4.u32 [%rd8+{64 * c + 16}], {{%r54, %r55, %r56, %r57}};
    st.global.v4.u32 [%rd8+{64 * c + 32}], {{%r58, %r59, %r60, %r61}};
    st.global.v4.u32 [%rd8+{64 * c + 48}], {{%r62, %r63, %r64, %r65}};
""" for c in range(n // 16)) + DEALLOC.format(cols=cols)
    return kernel(body, params)


@pytest.mark.parametrize("n, swizzled, ts", [(32, True, False), (64, False, False), (16, True, True)])
def test_mma_computes_a_times_b_transposed_over_four_k_steps(n, swizzled, ts):
    rng = np.random.default_rng(n)
    a, b = _bf16(rng.standard_normal((128, 64))), _bf16(rng.standard_normal((n, 64)))
    a_bytes, a_steps = stage_k_major(a, swizzled)
    b_bytes, b_steps = stage_k_major(b, swizzled)
    b_pad = np.zeros(128 * 128, np.uint8)
    b_pad[:b_bytes.size] = b_bytes
    mode = "128B" if swizzled else "none"
    a_desc = [D.encode_smem_descriptor(s, lbo, sbo, mode) for s, lbo, sbo in a_steps]
    b_desc = [D.encode_smem_descriptor(16384 + s, lbo, sbo, mode) for s, lbo, sbo in b_steps]
    idesc = 1 << 4 | 1 << 7 | 1 << 10 | (n >> 3) << 17 | (128 >> 4) << 24  # f32 += bf16 x bf16, K-major
    out = np.zeros((128, n), np.float32)
    mma_kernel(n, ts).launch("k", block=(128, 1, 1), smem_bytes=40960,
                             args=[a_bytes, b_pad, out, np.ascontiguousarray(a), idesc, *a_desc, *b_desc])
    want = _f64(a) @ _f64(b).T
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_reading_d_before_the_commit_wait_is_a_data_race():
    rng = np.random.default_rng(1)
    a, b = _bf16(rng.standard_normal((128, 64))), _bf16(rng.standard_normal((32, 64)))
    a_bytes, steps = stage_k_major(a, True)
    b_bytes, _ = stage_k_major(b, True)
    b_pad = np.zeros(128 * 128, np.uint8)
    b_pad[:b_bytes.size] = b_bytes
    program = mma_kernel(32, False, wait=False)  # the tcgen05.ld may run while the MMAs write D
    args = [a_bytes, b_pad, np.zeros((128, 32), np.float32), np.zeros(1, np.uint16),
            1 << 4 | 1 << 7 | 1 << 10 | 4 << 17 | 8 << 24,
            *[D.encode_smem_descriptor(32 * s, 16, 1024) for s in range(4)],
            *[D.encode_smem_descriptor(16384 + 32 * s, 16, 1024) for s in range(4)]]
    raced = []
    for seed in range(5):
        try:
            program.launch("k", block=(128, 1, 1), smem_bytes=40960, args=args, seed=seed)
        except emu.ProtocolError as exc:
            raced.append(str(exc))
    # Either order is caught: a load while the MMAs still write D (the in-flight check), or, when a warp loads
    # before warp 0 issues, the MMA's write after an unordered load of another warp (the race checks).
    inflight = [r for r in raced if "reads tensor memory lanes" in r and "that the tcgen05.mma at line" in r]
    assert inflight and "wait on the mbarrier its tcgen05.commit arrives on" in inflight[0], raced
    assert all(r in inflight or ("tcgen05.mma" in r and "writes tensor memory" in r and "no barrier or mbarrier "
                                 "orders it before this access" in r) for r in raced), raced


def test_16x32bx2_halves_land_at_the_address_and_at_address_plus_the_split_offset():
    # PTX ISA shape 16x32bx2: threads 0-15 reach lanes L..L+15 at columns C + i, threads 16-31 the same
    # lanes at taddr + immHalfSplitoff (here 16 columns further).
    body = ALLOC.format(cols=32) + f"""
    mul.lo.u32 %r10, %r0, 10;
    add.u32 %r11, %r10, 1;
    tcgen05.st.sync.aligned.16x32bx2.x2.b32 [%r2], 16, {{%r10, %r11}};
    tcgen05.wait::st.sync.aligned;
    tcgen05.ld.sync.aligned.32x32b.x32.b32 {regs(40, 32)}, [%r2];
    tcgen05.wait::ld.sync.aligned;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r0, 128;
    add.s64 %rd3, %rd1, %rd2;
""" + "".join(f"    st.global.v4.u32 [%rd3+{16 * q}], {{%r{40 + 4 * q}, %r{41 + 4 * q}, %r{42 + 4 * q}, %r{43 + 4 * q}}};\n"
              for q in range(8)) + DEALLOC.format(cols=32)
    out = np.zeros((32, 32), np.uint32)
    kernel(body).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[out])
    t = np.arange(16, dtype=np.uint32)
    np.testing.assert_array_equal(out[:16, 0], t * 10)
    np.testing.assert_array_equal(out[:16, 1], t * 10 + 1)
    np.testing.assert_array_equal(out[:16, 16], (t + 16) * 10)
    np.testing.assert_array_equal(out[:16, 17], (t + 16) * 10 + 1)
    assert (out[16:] == 0xA5A5A5A5).all() and (out[:16, 2:16] == 0xA5A5A5A5).all()


def test_m64_mma_uses_layout_f():
    # M = 64: rows 16q..16q+15 of D in lanes 32q..32q+15 (L0 = 0), PTX ISA data-path layout F.
    rng = np.random.default_rng(64)
    a, b = _bf16(rng.standard_normal((64, 64))), _bf16(rng.standard_normal((32, 64)))
    a_bytes, steps = stage_k_major(np.concatenate([a, np.zeros((64, 64), np.uint16)]), True)
    b_bytes, _ = stage_k_major(b, True)
    b_pad = np.zeros(128 * 128, np.uint8)
    b_pad[:b_bytes.size] = b_bytes
    out = np.zeros((128, 32), np.float32)
    idesc = 1 << 4 | 1 << 7 | 1 << 10 | (32 >> 3) << 17 | (64 >> 4) << 24
    mma_kernel(32, False).launch("k", block=(128, 1, 1), smem_bytes=40960, args=[
        a_bytes, b_pad, out, np.zeros(1, np.uint16), idesc,
        *[D.encode_smem_descriptor(32 * s, 16, 1024) for s in range(4)],
        *[D.encode_smem_descriptor(16384 + 32 * s, 16, 1024) for s in range(4)]])
    want = _f64(a) @ _f64(b).T
    lanes = (np.arange(64) % 16) + 32 * (np.arange(64) // 16)
    np.testing.assert_allclose(out[lanes], want, rtol=1e-6, atol=1e-6)
    others = np.setdiff1d(np.arange(128), lanes)
    assert (out[others].view(np.uint32) == 0xA5A5A5A5).all()


PAIR_PARAMS = ".param .u64 out, .param .u64 a, .param .u64 b, .param .u32 idesc"


@pytest.mark.parametrize("m, text, error", [
    (256, r"\.cta_group::2 needs a cluster with the CTA pair 0, 1; the cluster has 1 CTA", emu.ProtocolError),
    (64, r"tcgen05\.mma \.cta_group::2 M must be 128 or 256, got M = 64", emu.ProtocolError),  # Table 39
])
def test_pair_mma_errors(m, text, error):
    body = ALLOC.format(cols=256) + """
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u32 %r6, [idesc];
    setp.eq.u32 %p3, %r0, 0;
    @%p3 tcgen05.mma.cta_group::2.kind::f16 [%r2], %rd1, %rd2, %r6, %p3;
""" + DEALLOC.format(cols=256)
    idesc = D.encode_instr_descriptor(m, 128)
    desc = D.encode_smem_descriptor(1024, 16, 1024)
    program = kernel(body, PAIR_PARAMS)
    launch = dict(block=(32, 1, 1), smem_bytes=40960, args=[np.zeros(1, np.uint32), desc, desc, idesc])
    if m == 64:  # the pair exists, the shape is what is invalid (M = 128 is test_emu_tcgen05_pair.py's)
        launch.update(grid=(2, 1, 1), cluster=(2, 1, 1))
    with pytest.raises(error, match=text):
        program.launch("k", **launch)


def test_a_multicast_commit_mask_beyond_the_cluster_is_an_error():
    body = """
    .reg .b16 %rs<2>;
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra DONE;
    mbarrier.init.shared.b64 [bar], 1;
    mov.b16 %rs1, 4;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [bar], %rs1;
DONE:
    ret;
"""
    with pytest.raises(emu.ProtocolError, match=r"CTA mask 0x4 names ranks beyond the cluster's 1 CTA"):
        kernel(body).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])


@pytest.mark.parametrize("m, n, ok", [(64, 24, True), (128, 24, False), (128, 48, True)])
def test_single_cta_mma_n_step_follows_m(m, n, ok):
    """.cta_group::1: N steps by 8 at M = 64 but by 16 at M = 128 (CUTLASS's SM100_MMA_F16BF16_SS asserts
    the same; docs/emulator-tcgen05-isa.md, the cta_group::2 shapes row)."""
    body = ALLOC.format(cols=256) + """
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u32 %r6, [idesc];
    setp.eq.u32 %p3, %r0, 0;
    @%p3 tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, %rd2, %r6, %p3;
""" + DEALLOC.format(cols=256)
    desc = D.encode_smem_descriptor(1024, 16, 1024)
    program = kernel(body.replace("cta_group::2", "cta_group::1"), PAIR_PARAMS)
    launch = dict(block=(32, 1, 1), smem_bytes=40960,
                  args=[np.zeros(1, np.uint32), desc, desc, D.encode_instr_descriptor(m, n)])
    if ok:  # the shape is accepted: the MMA is issued (and, never waited for, still holds D at the dealloc)
        with pytest.raises(emu.ProtocolError, match=r"tcgen05.dealloc.* frees .*columns 0..255 that .*tcgen05.mma"):
            program.launch("k", **launch)
    else:
        with pytest.raises(emu.ProtocolError, match=rf"N must be a multiple of 16 in \[16, 256\] for M = 128, got {n}"):
            program.launch("k", **launch)
