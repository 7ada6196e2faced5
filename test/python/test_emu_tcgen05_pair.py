"""tcgen05.mma.cta_group::2 with M = 128 on hand-written PTX: a CTA pair computes a 128 x N product, each
CTA supplying its 64 rows of A and its N/2 rows of B (the N x K operand) from its own shared memory at the
descriptors' offsets, and each CTA's 64 rows of D land in its tensor memory in the ISA's data-path
layout B, which tcgen05.ld then reads lane by lane.

Expected values are computed here, independently of the emulator: the shapes from PTX ISA "Matrix Shape"
(Table 39: .cta_group::2 takes M = 128 or 256 and N = 16..256 in steps of 16), the shared-memory bytes from
the canonical K-major layout without swizzling ("Shared Memory Matrix Layout": 8-row x 16-byte core
matrices, LBO between K-adjacent ones, SBO between 8-row groups), the descriptors bit by bit from the ISA
tables, and the tensor-memory placement from "Data Path Layout Organization" (M = 128, .cta_group::2,
dense A: layout B, "2x2" organization, lane alignment 0): row r of a CTA's 64 rows and column j of D in
lane r + 64 * (j >= N/2), column d_col + j % (N/2). The layout itself is a figure in the ISA; the mapping is
CUTLASS's "2x2" atom, and NVIDIA's CuTe DSL GEMM with a 128-row pair tile (test_emu_cute_sm100a.py,
cute_dense_gemm_2cta_m128) reads D back the same way (docs/emulator-tcgen05-isa.md section 13).
"""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir import emu

HEADER = """
.version 8.7
.target sm_100a
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.shared .align 8 .b8 bar[8];
.shared .align 4 .b8 slot[4];
"""
K = 32          # two K = 16 steps of kind::f16
ROW_CHUNKS = 4  # 16-byte K chunks of a row (32 bf16)
LBO, SBO = 128, 512  # K-adjacent core matrices 128 bytes apart; 8-row groups 4 x 128 bytes apart
STAGE = 8192    # bytes staged per operand per CTA (up to 128 rows)


def bf16(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def stage(tile: np.ndarray) -> np.ndarray:
    """(rows, 32) bf16 bits as shared-memory bytes, K-major, no swizzle: element (m, k) at
    (m % 8) * 16 + (m // 8) * SBO + (k // 8) * LBO + (k % 8) * 2."""
    m, k = np.arange(tile.shape[0])[:, None], np.arange(K)[None, :]
    out = np.zeros(STAGE, np.uint8)
    out.view(np.uint16)[(((m % 8) * 16 + (m // 8) * SBO + (k // 8) * LBO + (k % 8) * 2) // 2).reshape(-1)] = \
        tile.reshape(-1)
    return out


def smem_desc(start: int) -> int:
    # PTX ISA "Shared memory descriptor": start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45,
    # the fixed 0b001 in 46-48, base offset 0, swizzle mode 0 (none) in bits 61-63.
    return (start >> 4) | (LBO >> 4) << 16 | (SBO >> 4) << 32 | 1 << 46


def idesc(m: int, n: int) -> int:
    # PTX ISA "Instruction descriptor" (kind::f16): D f32 (bits 4-5 = 1), A and B bf16 (bits 7-9, 10-12 = 1),
    # both K-major, N >> 3 in bits 17-22, M >> 4 in bits 24-28 (the pair's whole M).
    return 1 << 4 | 1 << 7 | 1 << 10 | (n >> 3) << 17 | (m >> 4) << 24


def regs(first: int, count: int) -> str:
    return "{" + ", ".join(f"%r{first + i}" for i in range(count)) + "}"


def pair_program(cols: int, d_col: int, d_lane: int = 0, ts: bool = False) -> emu.Program:
    """Two CTAs of 128 threads in a cluster: each copies its A (at ``a`` + rank * STAGE) to smem and its B to
    smem + STAGE, warp 0 of each allocates ``cols`` columns (.cta_group::2), CTA 0's thread 0 issues the two
    K steps at D = the allocation + (d_lane << 16) + d_col (enable-input-d false, then true) and commits to
    ``bar`` in both CTAs; every warp then reads its 32 lanes x ``cols`` columns with tcgen05.ld.32x32b and
    writes them to ``out`` + (rank * 128 + lane) * cols * 4."""
    a_op = "[%r2]" if ts else "%rd12"
    mmas = "".join(f"""
    ld.param.u64 %rd12, [a{s}];
    add.s64 %rd12, %rd12, %rd13;        // descriptors hold offsets from smem: add its address >> 4
    ld.param.u64 %rd10, [b{s}];
    add.s64 %rd10, %rd10, %rd13;
    tcgen05.mma.cta_group::2.kind::f16 [%r9], {a_op}, %rd10, %r6, {'%p3' if s else '%p4'};
""" for s in range(2))
    loads = "".join(f"""
    tcgen05.ld.sync.aligned.32x32b.x16.b32 {regs(50, 16)}, [%r5+{16 * c}];
    tcgen05.wait::ld.sync.aligned;
""" + "".join(f"    st.global.v4.u32 [%rd8+{64 * c + 16 * q}], {{%r{50 + 4 * q}, %r{51 + 4 * q}, %r{52 + 4 * q}, "
              f"%r{53 + 4 * q}}};\n" for q in range(4)) for c in range(cols // 16))
    params = ", ".join([".param .u64 a", ".param .u64 b", ".param .u64 out", ".param .u32 idesc"]
                       + [f".param .u64 a{s}" for s in range(2)] + [f".param .u64 b{s}" for s in range(2)])
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
    add.u32 %r32, %r32, %r0;            // 16-byte chunk index
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
    tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [slot], {cols};
ALLOCATED:
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.u32 %r2, [slot];
    shl.b32 %r3, %r1, 21;               // this warp's 32 lanes: lane field 32 * warp
    tcgen05.fence::before_thread_sync;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    tcgen05.fence::after_thread_sync;
    ld.param.u32 %r6, [idesc];
    add.u32 %r9, %r2, {(d_lane << 16) + d_col};
    shr.u32 %r35, %r30, 4;
    cvt.u64.u32 %rd13, %r35;
    setp.eq.u32 %p3, %r0, 0;
    setp.ne.u32 %p4, %r0, 0;            // false for the issuing thread: the first step overwrites D
    or.b32 %r36, %r0, %r8;
    setp.ne.u32 %p5, %r36, 0;
    @%p5 bra ISSUED;
{mmas}
    mov.b16 %rs1, 3;
    tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [bar], %rs1;
ISSUED:
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p7, [bar], 0;
    @!%p7 bra WAIT;
    tcgen05.fence::after_thread_sync;
    add.u32 %r5, %r2, %r3;
    ld.param.u64 %rd8, [out];
    mul.wide.u32 %rd9, %r8, {128 * cols * 4};
    add.s64 %rd8, %rd8, %rd9;
    mul.wide.u32 %rd9, %r0, {4 * cols};
    add.s64 %rd8, %rd8, %rd9;
{loads}
    tcgen05.fence::before_thread_sync;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    tcgen05.fence::after_thread_sync;
    @%p1 bra FREED;
    tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r2, {cols};
FREED:
    ret;
}}
""")


def launch(program: emu.Program, m: int, n: int, cols: int, seed: int = 0, a=None, b=None):
    """Run the pair on A (128 x K) and B (n x K): CTA v stages rows 64v.. of A and rows v*n/2.. of B."""
    rng = np.random.default_rng(seed)
    a = bf16(rng.standard_normal((128, K))) if a is None else a
    b = bf16(rng.standard_normal((n, K))) if b is None else b
    half = n // 2
    a_stage = np.concatenate([stage(a[64 * v:64 * v + 64]) for v in range(2)])
    b_stage = np.concatenate([stage(b[half * v:half * v + half]) for v in range(2)])
    out = np.zeros((2, 128, cols), np.uint32)
    # K step s: the two 16-byte chunks 2s, 2s + 1 of every row (start + s * 2 * LBO).
    args = [a_stage, b_stage, out, idesc(m, n), *[smem_desc(2 * LBO * s) for s in range(2)],
            *[smem_desc(STAGE + 2 * LBO * s) for s in range(2)]]
    program.launch("k", grid=(2, 1, 1), block=(128, 1, 1), cluster=(2, 1, 1), smem_bytes=2 * STAGE, args=args,
                   seed=seed, race_checks=True)
    return out, a, b


@pytest.mark.parametrize("n, cols, d_col", [(32, 32, 0), (64, 32, 0), (128, 128, 64), (256, 128, 0)],
                         ids=["n32", "n64-in-32-columns", "n128-at-column-64", "n256"])
def test_m128_pair_writes_layout_b(n, cols, d_col):
    out, a, b = launch(pair_program(cols, d_col), 128, n, cols, seed=n + d_col)
    # The numerics assumed throughout (docs/emulator-tcgen05-isa.md): each MMA's exact products summed with
    # the f32 accumulator, rounded once to f32.
    first = (f64(a[:, :16]) @ f64(b[:, :16]).T).astype(np.float32).astype(np.float64)
    d = (first + f64(a[:, 16:]) @ f64(b[:, 16:]).T).astype(np.float32)       # D: 128 x n, rows of the pair
    half = n // 2
    got = out.view(np.float32)
    for v in range(2):
        for lane in range(128):
            r, h = lane % 64, lane // 64
            for j in range(half):
                want = d[64 * v + r, h * half + j]
                assert got[v, lane, d_col + j] == want, (v, lane, d_col + j, got[v, lane, d_col + j], want)
        # Columns outside [d_col, d_col + N/2) are never written (the allocation's fill pattern stays).
        outside = np.r_[0:d_col, d_col + half:cols]
        assert (out[v][:, outside] == 0xA5A5A5A5).all(), v


def test_the_peer_supplies_half_of_b():
    # B's rows N/2.. only in the odd CTA: zero them there and D's columns N/2.. vanish in both CTAs' lanes 64..
    n = 64
    program = pair_program(32, 0)
    rng = np.random.default_rng(7)
    a, b = bf16(rng.standard_normal((128, K))), bf16(rng.standard_normal((n, K)))
    b_zero = b.copy()
    b_zero[n // 2:] = 0
    out, _, _ = launch(program, 128, n, 32, a=a, b=b_zero)
    got = out.view(np.float32)
    assert (got[:, 64:, :] == 0).all() and (got[:, :64, :] != 0).any()


PAIR_ERRORS = [
    # PTX ISA Table 39: .cta_group::2 has no M = 64.
    (dict(m=64, n=64), emu.ProtocolError, r"tcgen05\.mma \.cta_group::2 M must be 128 or 256, got M = 64 "
                                          r"\(instruction descriptor 0x04100490\)"),
    # N steps of 16 with .cta_group::2.
    (dict(m=128, n=24), emu.ProtocolError, r"tcgen05\.mma \.cta_group::2 N must be a multiple of 16 in \[16, 256\] "
                                           r"for M = 128, got 24"),
    # Layout B's lane alignment is 0.
    (dict(m=128, n=64, d_lane=32), emu.ProtocolError, r"with \.cta_group::2 and M = 128 \(data-path layout B\) the D "
                                                      r"address must be at lane 0, got lane 32"),
    # D spans N/2 columns: N = 128 needs 64 of them.
    (dict(m=128, n=128, cols=32), emu.ProtocolError,
     r"tensor-memory columns 0\.\.63 are not inside one allocation \(allocated: "),
    # The TS form (A in tensor memory) across a pair is not modelled.
    (dict(m=128, n=64, ts=True), emu.Unsupported, r"\.cta_group::2 is modelled with A in shared memory only, got A "
                                                  r"in tensor memory \(M = 128\)"),
]


@pytest.mark.parametrize("case, error, text", PAIR_ERRORS, ids=["m64", "n24", "lane32", "columns", "ts"])
def test_invalid_pair_shapes_are_clear_errors(case, error, text):
    cols = case.get("cols", 64)
    program = pair_program(cols, 0, d_lane=case.get("d_lane", 0), ts=case.get("ts", False))
    with pytest.raises(error, match=text):
        launch(program, case["m"], case["n"], cols)
