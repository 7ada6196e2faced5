"""tcgen05.mma .kind::f8f6f4 (e4m3 / e5m2, A and B may differ) and .kind::tf32 on hand-written PTX: SS and
TS, .cta_group::1 (M = 128 and 64) and ::2 (M = 256 across a CTA pair), K-major and an MN-major fp8 B,
against a float64 NumPy product of the dequantised inputs.

Expected values are computed here independently of the emulator: fp8 bytes decoded by torch's
float8_e4m3fn / float8_e5m2, tf32 by clearing the low 13 bits of each f32 (PTX ISA "Alternate
floating point data formats"), the shared-memory layouts by the ISA's canonical-layout formulas and the
128-byte swizzle's XOR of address bits [4,7) with [7,10) ("Shared Memory Matrix Layout").
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

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
ROW = 128     # bytes of one operand row: 4 K steps of 32 bytes (256 bits of K each)
STAGE = 16384  # bytes of A (and of B) staged per CTA


def decode(bits: np.ndarray, kind: str) -> np.ndarray:
    if kind == "tf32":
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[kind]
    return torch.from_numpy(np.ascontiguousarray(bits, np.uint8)).view(dtype).to(torch.float64).numpy()


def random_bits(rng, rows: int, kind: str) -> np.ndarray:
    """(rows, K) raw elements of 128 bytes a row: finite, mixed signs and magnitudes, subnormals included."""
    if kind == "tf32":
        return rng.standard_normal((rows, ROW // 4)).astype(np.float32).view(np.uint32)
    bits = rng.integers(0, 256, (rows, ROW), dtype=np.uint8)
    nonfinite = ~np.isfinite(decode(bits, kind))
    bits[nonfinite] &= 0xBB  # a finite code (e4m3 0x7F/0xFF, e5m2 exponent 31 -> 27 or below)
    assert np.isfinite(decode(bits, kind)).all()
    return bits


def swizzle128(offset: np.ndarray) -> np.ndarray:
    return offset ^ (((offset >> 7) & 7) << 4)


def stage_k_major(row_bytes: np.ndarray) -> tuple[np.ndarray, list]:
    """Rows of 128 bytes, K-major with the 128-byte swizzle: row m at m*128 (8-row groups 1024 apart, SBO),
    K step s at +32 s bytes; whatever the element type (one K step is always 32 bytes)."""
    rows = row_bytes.shape[0]
    m, byte = np.arange(rows)[:, None], np.arange(ROW)[None, :]
    out = np.zeros(STAGE, np.uint8)
    out[swizzle128(m * ROW + byte).reshape(-1)] = row_bytes.reshape(-1)
    return out, [(32 * s, 16, 1024) for s in range(4)]


def stage_mn_major_fp8(bits: np.ndarray) -> tuple[np.ndarray, list]:
    """An fp8 (N=128, K=128) operand MN-major with the 128-byte swizzle: the canonical layout
    ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)) in 16-byte units, i.e. byte (n % 128) + (n // 128) LBO + (k % 8) 128
    + (k // 8) SBO, SBO = 1024: one K step (32 k) is 4 groups of 8 K-rows, 4096 bytes."""
    n, k = np.arange(128)[:, None], np.arange(ROW)[None, :]
    out = np.zeros(STAGE, np.uint8)
    out[swizzle128(n + (k % 8) * 128 + (k // 8) * 1024).reshape(-1)] = bits.reshape(-1)
    return out, [(4096 * s, 8192, 1024) for s in range(4)]


def regs(first: int, count: int) -> str:
    return "{" + ", ".join(f"%r{first + i}" for i in range(count)) + "}"


def mma_program(kind: str, n: int, ts: bool, pair: bool) -> emu.Program:
    """128 threads a CTA (a cluster of two with ``pair``): copy this CTA's staged A and B (STAGE bytes each
    at ``a``/``b`` + rank * STAGE) to smem and smem+STAGE, allocate, [TS: store A to TMEM columns n + 8s],
    CTA 0's thread 0 issues four K steps (enable-input-d false on the first) and commits (multicast to
    both CTAs of a pair), every CTA waits on its ``bar`` and writes its 128 lanes x n columns of D to
    ``out`` + rank * 128 * n * 4."""
    group = 2 if pair else 1
    cols = max(32, 1 << (n + (32 if ts else 0) - 1).bit_length())
    a_tmem = "".join(f"""
    ld.global.v4.u32 {{%r120, %r121, %r122, %r123}}, [%rd6+{32 * s}];
    ld.global.v4.u32 {{%r124, %r125, %r126, %r127}}, [%rd6+{32 * s + 16}];
    tcgen05.st.sync.aligned.32x32b.x8.b32 [%r4+{n + 8 * s}], {regs(120, 8)};
""" for s in range(4)) if ts else ""
    mmas = "".join(f"""
    ld.param.u64 %rd10, [b{s}];
    add.s64 %rd10, %rd10, %rd13;
    {'add.u32 %r7, %r2, ' + str(n + 8 * s) + ';' if ts else f'ld.param.u64 %rd12, [a{s}]; add.s64 %rd12, %rd12, %rd13;'}
    tcgen05.mma.cta_group::{group}.kind::{kind} [%r2], {'[%r7]' if ts else '%rd12'}, %rd10, %r6, {'%p3' if s else '%p4'};
""" for s in range(4))
    commit = ("mov.b16 %rs1, 3;\n    tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster"
              ".b64 [bar], %rs1;" if pair else
              "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];")
    sync = "barrier.cluster.arrive.aligned;\n    barrier.cluster.wait.aligned;" if pair else "bar.sync 0;"
    loads = "".join(f"""
    tcgen05.ld.sync.aligned.32x32b.x16.b32 {regs(50, 16)}, [%r5+{16 * c}];
    tcgen05.wait::ld.sync.aligned;
""" + "".join(f"    st.global.v4.u32 [%rd8+{64 * c + 16 * q}], {{%r{50 + 4 * q}, %r{51 + 4 * q}, %r{52 + 4 * q}, "
              f"%r{53 + 4 * q}}};\n" for q in range(4)) for c in range(n // 16))
    params = ", ".join([".param .u64 a", ".param .u64 b", ".param .u64 out", ".param .u64 a_tmem", ".param .u32 idesc"]
                       + [f".param .u64 a{s}" for s in range(4)] + [f".param .u64 b{s}" for s in range(4)])
    return emu.load_ptx(HEADER + f"""
.visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b16 %rs<2>;
    .reg .b32 %r<160>;
    .reg .b64 %rd<16>;
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    mov.u32 %r8, %cluster_ctarank;
    mul.wide.u32 %rd14, %r8, {STAGE};
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    add.s64 %rd1, %rd1, %rd14;
    add.s64 %rd2, %rd2, %rd14;
    mov.u32 %r30, smem;
    mov.u32 %r31, 0;
COPY:
    shl.b32 %r32, %r31, 7;
    add.u32 %r32, %r32, %r0;
    shl.b32 %r33, %r32, 4;
    cvt.u64.u32 %rd3, %r33;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    add.u32 %r34, %r30, %r33;
    ld.global.v4.u32 {{%r40, %r41, %r42, %r43}}, [%rd4];
    st.shared.v4.u32 [%r34], {{%r40, %r41, %r42, %r43}};
    ld.global.v4.u32 {{%r40, %r41, %r42, %r43}}, [%rd5];
    st.shared.v4.u32 [%r34+{STAGE}], {{%r40, %r41, %r42, %r43}};
    add.u32 %r31, %r31, 1;
    setp.lt.u32 %p6, %r31, {STAGE // 2048};
    @%p6 bra COPY;
    setp.ne.u32 %p1, %r1, 0;
    setp.ne.u32 %p2, %r0, 0;
    @%p2 bra INIT_DONE;
    mbarrier.init.shared.b64 [bar], 1;
INIT_DONE:
    fence.proxy.async.shared::cta;
    @%p1 bra ALLOCATED;
    tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32 [slot], {cols};
ALLOCATED:
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.u32 %r2, [slot];
    shl.b32 %r3, %r1, 21;
    add.u32 %r4, %r2, %r3;
    ld.param.u64 %rd6, [a_tmem];
    mul.wide.u32 %rd7, %r0, {ROW};
    add.s64 %rd6, %rd6, %rd7;
{a_tmem}
    tcgen05.wait::st.sync.aligned;
    tcgen05.fence::before_thread_sync;
    {sync}
    tcgen05.fence::after_thread_sync;
    ld.param.u32 %r6, [idesc];
    shr.u32 %r35, %r30, 4;
    cvt.u64.u32 %rd13, %r35;
    setp.eq.u32 %p3, %r0, 0;
    setp.ne.u32 %p4, %r0, 0;
    or.b32 %r36, %r0, %r8;
    setp.ne.u32 %p5, %r36, 0;
    @%p5 bra ISSUED;
{mmas}
    {commit}
ISSUED:
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p7, [bar], 0;
    @!%p7 bra WAIT;
    tcgen05.fence::after_thread_sync;
    add.u32 %r5, %r2, %r3;
    ld.param.u64 %rd8, [out];
    mul.wide.u32 %rd9, %r8, {128 * n * 4};
    add.s64 %rd8, %rd8, %rd9;
    mul.wide.u32 %rd9, %r0, {4 * n};
    add.s64 %rd8, %rd8, %rd9;
{loads}
    tcgen05.fence::before_thread_sync;
    {sync}
    tcgen05.fence::after_thread_sync;
    @%p1 bra FREED;
    tcgen05.dealloc.cta_group::{group}.sync.aligned.b32 %r2, {cols};
FREED:
    ret;
}}
""")


def run_mma(a_kind, b_kind, m, n, ts=False, pair=False, b_mn_major=False, seed=0, kind=None):
    """Launch one case; returns (D as the emulator left it per CTA, the float64 reference per CTA)."""
    kind = kind or ("tf32" if a_kind == "tf32" else "f8f6f4")
    rng = np.random.default_rng(seed)
    ctas = 2 if pair else 1
    rows_a, rows_b = (128 if m != 64 else 64), n // ctas   # per CTA
    a = [random_bits(rng, rows_a, a_kind) for _ in range(ctas)]
    b = [random_bits(rng, rows_b, b_kind) for _ in range(ctas)]
    a_stage, b_stage, b_steps = [], [], None
    for v in range(ctas):
        staged, a_steps = stage_k_major(a[v].view(np.uint8).reshape(rows_a, ROW))
        a_stage.append(staged)
        if b_mn_major:
            staged, b_steps = stage_mn_major_fp8(b[v])
        else:
            staged, b_steps = stage_k_major(b[v].view(np.uint8).reshape(rows_b, ROW))
        b_stage.append(staged)
    a_tmem = np.zeros((128, ROW), np.uint8)
    a_tmem[:rows_a] = a[0].view(np.uint8).reshape(rows_a, ROW)
    idesc = (1 << 4 | {"e4m3": 0, "e5m2": 1, "tf32": 2}[a_kind] << 7 | {"e4m3": 0, "e5m2": 1, "tf32": 2}[b_kind] << 10
             | int(b_mn_major) << 16 | (n >> 3) << 17 | (m >> 4) << 24)
    out = np.zeros((ctas, 128, n), np.float32)
    args = [np.concatenate(a_stage), np.concatenate(b_stage), out, a_tmem, idesc,
            *[D.encode_smem_descriptor(s, lbo, sbo) for s, lbo, sbo in a_steps],
            *[D.encode_smem_descriptor(STAGE + s, lbo, sbo) for s, lbo, sbo in b_steps]]
    mma_program(kind, n, ts, pair).launch("k", grid=(ctas, 1, 1), block=(128, 1, 1), cluster=(ctas, 1, 1),
                                          smem_bytes=2 * STAGE, args=args, seed=seed)
    b_all = np.concatenate([decode(x, b_kind) for x in b])    # the pair's B: CTA v holds rows v*N/2..
    want = [decode(x, a_kind) @ b_all.T for x in a]
    return out, want, [np.abs(decode(x, a_kind)) @ np.abs(b_all).T for x in a]


def check(got, want, mag):
    # one f32 rounding per K step (4 steps) after an exact sum: a few f32 ulps of the magnitude
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= 4 * 2.0 ** -24 * mag + 1e-30).all(), float((err / (mag + 1e-30)).max())


@pytest.mark.parametrize("a_kind, b_kind", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")])
def test_f8f6f4_ss_cta_group_1(a_kind, b_kind):
    out, want, mag = run_mma(a_kind, b_kind, 128, 64)
    check(out[0], want[0], mag[0])


@pytest.mark.parametrize("a_kind, b_kind", [("e4m3", "e5m2"), ("e5m2", "e5m2")])
def test_f8f6f4_ts_reads_four_fp8_per_tmem_column(a_kind, b_kind):
    # A in tensor memory: row i in lane i, 4 elements per 32-bit column in increasing byte order.
    out, want, mag = run_mma(a_kind, b_kind, 128, 32, ts=True, seed=1)
    check(out[0], want[0], mag[0])


def test_f8f6f4_m64_uses_layout_f():
    out, want, mag = run_mma("e5m2", "e4m3", 64, 32, seed=2)
    lanes = (np.arange(64) % 16) + 32 * (np.arange(64) // 16)
    check(out[0][lanes], want[0], mag[0])


def test_f8f6f4_with_an_mn_major_b():
    out, want, mag = run_mma("e4m3", "e4m3", 128, 128, b_mn_major=True, seed=3)
    check(out[0], want[0], mag[0])


@pytest.mark.parametrize("a_kind, b_kind", [("e4m3", "e5m2"), ("e5m2", "e5m2")])
def test_f8f6f4_cta_pair_m256(a_kind, b_kind):
    out, want, mag = run_mma(a_kind, b_kind, 256, 64, pair=True, seed=4)
    for v in range(2):
        check(out[v], want[v], mag[v])


@pytest.mark.parametrize("ts", [False, True])
def test_tf32_ignores_the_low_13_bits(ts):
    out, want, mag = run_mma("tf32", "tf32", 128, 32, ts=ts, seed=5)
    check(out[0], want[0], mag[0])


def test_fp4_operands_are_unsupported_by_name():
    program = mma_program("f8f6f4", 32, False, False)
    idesc = 1 << 4 | 5 << 7 | 0 << 10 | 4 << 17 | 8 << 24  # A E2M1
    desc = D.encode_smem_descriptor(0, 16, 1024)
    args = [np.zeros(STAGE, np.uint8), np.zeros(STAGE, np.uint8), np.zeros((1, 128, 32), np.float32),
            np.zeros((128, ROW), np.uint8), idesc, *[desc] * 8]
    with pytest.raises(emu.Unsupported, match=r"\(warp 0 of CTA \(0, 0, 0\)\): tcgen05\.mma \.kind::f8f6f4 with e2m1 "
                                              r"operands \(A format 5"):
        program.launch("k", block=(128, 1, 1), smem_bytes=2 * STAGE, args=args)


def test_other_kinds_are_unsupported_at_load():
    with pytest.raises(emu.Unsupported, match=r"only \.cta_group::1/::2 with \.kind::f16, \.kind::tf32 or "
                                              r"\.kind::f8f6f4 is modelled"):
        mma_program("i8", 32, False, False).launch("k", block=(128, 1, 1), smem_bytes=2 * STAGE,
                                                   args=[None] * 4 + [0] + [0] * 8)
