"""The emulator's race checks (fa4_mlir.emu.races, docs/emulator.md "Race detection") on hand-written
PTX: a generic-proxy write read by an async-proxy operation needs fence.proxy.async on the path that
orders them; tcgen05 operations of different warps ordered by a thread sync need
tcgen05.fence::before_thread_sync on the releasing side and after_thread_sync on the acquiring side
(PTX ISA "Memory Consistency Model for 5th generation of TensorCore operations"). Each race is shown
with the fence deleted and the fenced kernel passing; the switch turns the checks off."""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir import emu
from fa4_mlir.emu.isa import tcgen05_desc as D


def program(target: str, body: str, params: str, shared: str = "") -> emu.Program:
    return emu.load_ptx(f"""
.version 8.7
.target {target}
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.shared .align 8 .b8 bar[8];
.shared .align 4 .b8 slot[4];
{shared}
.visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b32 %r<64>;
    .reg .b64 %rd<16>;
{body}
}}
""")


# -- generic writes, async-proxy reads: a TMA store of a tile four warps wrote ------------------------------
def tma_store(writer_fence: bool, issuer_fence: bool, barrier: bool = True) -> emu.Program:
    """128 threads write the 32 x 64 bf16 tile (4 KiB) with st.shared, pass bar.sync 0, and thread 0
    TMA-stores it; fence.proxy.async in every writer before the barrier and/or in the issuer after it."""
    fence = "    fence.proxy.async.shared::cta;\n"
    return program("sm_90a", f"""
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, smem;
    shl.b32 %r2, %r0, 5;              // 32 bytes per thread
    add.u32 %r3, %r1, %r2;
    mov.u32 %r4, %r0;
    st.shared.v4.u32 [%r3], {{%r4, %r4, %r4, %r4}};
    st.shared.v4.u32 [%r3+16], {{%r4, %r4, %r4, %r4}};
{fence if writer_fence else ""}{"    bar.sync 0;" if barrier else ""}
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra DONE;
{fence if issuer_fence else ""}    mov.b64 %rd1, tmap;
    cvta.param.u64 %rd2, %rd1;
    mov.u32 %r5, 0;
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd2, {{%r5, %r5}}], [%r1];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
DONE:
    ret;
""", ".param .align 64 .b8 tmap[128]")


def _store(prog, seed=0, **kwargs):
    out = np.zeros((32, 64), np.uint16)
    prog.launch("k", block=(128, 1, 1), smem_bytes=4096, seed=seed,
                args=[emu.TensorMap(out, box=(32, 64), swizzle="none", dtype="bf16")], **kwargs)
    return out.view(np.uint32).reshape(128, 8)  # thread t wrote eight words t


@pytest.mark.parametrize("writer_fence, issuer_fence", [(True, False), (False, True), (True, True)])
def test_a_proxy_fence_anywhere_between_the_writes_and_the_tma_store_orders_them(writer_fence, issuer_fence):
    # The fence may sit in each writing thread before the barrier (CUTLASS's tma_store_fence) or in the
    # issuing thread after it: either is on the base-causality path from the writes to the async read.
    for seed in range(3):
        out = _store(tma_store(writer_fence, issuer_fence), seed)
        assert (out == np.arange(128)[:, None]).all()


def test_a_tma_store_of_generic_writes_without_fence_proxy_async_is_a_race():
    with pytest.raises(emu.ProtocolError, match=(
            r"line \d+: cp\.async\.bulk\.tensor\.2d\.global\.shared::cta.* \(warp 0 of CTA \(0, 0, 0\)\) reads "
            r"shared bytes 0x[0-9a-f]+\.\.0x[0-9a-f]+ \(smem\+\d+\) through the async proxy \(the TMA store at "
            r"line \d+ .*\) that line \d+: st\.shared\.v4\.u32 .* \(warp \d of CTA \(0, 0, 0\)\) wrote through the "
            r"generic proxy, and no fence\.proxy\.async orders it for the async proxy: a cross-proxy data race; "
            r"execute fence\.proxy\.async\.shared::cta in the writing thread")):
        _store(tma_store(False, False))


def test_a_tma_store_of_other_warps_writes_without_a_barrier_is_a_race():
    # No barrier: whichever comes first, the store of another warp's bytes is reported (here, or as a
    # write into bytes the store still reads: the in-flight check).
    for seed in range(4):
        with pytest.raises(emu.ProtocolError, match="no barrier or mbarrier orders that write|may still read"):
            _store(tma_store(True, True, barrier=False), seed)


def test_the_switch_turns_the_race_checks_off(monkeypatch):
    # race_checks=False (or FA4_EMU_RACE_CHECKS=0) runs the unfenced kernel; the emulator's shared memory is
    # one sequentially consistent store, so the output is right here (it need not be on a GPU).
    want = np.arange(128)[:, None]
    assert (_store(tma_store(False, False), race_checks=False) == want).all()
    monkeypatch.setenv("FA4_EMU_RACE_CHECKS", "0")
    assert (_store(tma_store(False, False)) == want).all()
    monkeypatch.setenv("FA4_EMU_RACE_CHECKS", "1")
    with pytest.raises(emu.ProtocolError, match="cross-proxy data race"):
        _store(tma_store(False, False))


# -- tcgen05: a store in warp 0, a load of the same cells in warp 4 (the same lane quarter) -------------------
def st_then_ld(before: bool, after: bool, wait_st: bool = True) -> emu.Program:
    """Warp 0 writes lanes 0..31, columns 0..3 of tensor memory and arrives on ``bar``; warp 4 waits on it
    and reads the cells back. The ISA's pattern: st; wait::st; fence::before_thread_sync; arrive |
    wait; fence::after_thread_sync; ld."""
    return program("sm_100a", f"""
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra ALLOCATED;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
    setp.ne.u32 %p2, %r0, 0;
    @%p2 bra ALLOCATED;
    mbarrier.init.shared.b64 [bar], 32;     // warp 0's 32 threads arrive
ALLOCATED:
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.u32 %r2, [slot];
    setp.eq.u32 %p3, %r1, 4;
    @%p3 bra CONSUMER;
    @%p1 bra DONE;
    add.u32 %r4, %r0, 7;
    tcgen05.st.sync.aligned.32x32b.x4.b32 [%r2], {{%r4, %r4, %r4, %r4}};
    {"tcgen05.wait::st.sync.aligned;" if wait_st else ""}
    {"tcgen05.fence::before_thread_sync;" if before else ""}
    mbarrier.arrive.shared.b64 %rd1, [bar];
    bra DONE;
CONSUMER:
    mbarrier.try_wait.parity.shared.b64 %p4, [bar], 0;
    @!%p4 bra CONSUMER;
    {"tcgen05.fence::after_thread_sync;" if after else ""}
    tcgen05.ld.sync.aligned.32x32b.x4.b32 {{%r10, %r11, %r12, %r13}}, [%r2];
    tcgen05.wait::ld.sync.aligned;
    and.b32 %r14, %r0, 31;
    ld.param.u64 %rd2, [out];
    mul.wide.u32 %rd3, %r14, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r13;
DONE:
    bar.sync 0;
    @%p1 bra FREED;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;
FREED:
    ret;
""", ".param .u64 out")


def _tmem(prog, seed=0, **kwargs):
    out = np.zeros(32, np.uint32)
    prog.launch("k", block=(160, 1, 1), smem_bytes=1024, args=[out], seed=seed, **kwargs)
    return out


def test_a_store_and_a_load_in_two_warps_ordered_by_fences_and_an_mbarrier():
    for seed in range(4):
        np.testing.assert_array_equal(_tmem(st_then_ld(True, True), seed), np.arange(32) + 7)


def test_a_missing_after_thread_sync_is_a_race():
    with pytest.raises(emu.ProtocolError, match=(
            r"line \d+: tcgen05\.ld\.sync\.aligned\.32x32b\.x4\.b32 .* \(warp 4 of CTA \(0, 0, 0\)\) reads tensor "
            r"memory lanes 0\.\.31, columns 0\.\.3 that line \d+: tcgen05\.st\.sync\.aligned\.32x32b\.x4\.b32 .* "
            r"\(warp 0 of CTA \(0, 0, 0\)\) wrote, and warp 4 of CTA \(0, 0, 0\) executed no "
            r"tcgen05\.fence::after_thread_sync between the wait that ordered it and this access: a data race")):
        _tmem(st_then_ld(True, False))


def test_a_missing_before_thread_sync_is_a_race():
    with pytest.raises(emu.ProtocolError, match=(
            r"tcgen05\.ld.* \(warp 4 of CTA \(0, 0, 0\)\) reads tensor memory lanes 0\.\.31, columns 0\.\.3 that "
            r"line \d+: tcgen05\.st.* \(warp 0 of CTA \(0, 0, 0\)\) wrote, and warp 0 of CTA \(0, 0, 0\) executed "
            r"no tcgen05\.fence::before_thread_sync between it and the barrier or arrive that orders it")):
        _tmem(st_then_ld(False, True))


def test_a_missing_wait_st_before_the_release_is_a_race():
    # The fence publishes only the stores a tcgen05.wait::st completed (the canonical pattern waits first);
    # here the store is also still in flight when warp 4 loads, which the in-flight check reports first.
    with pytest.raises(emu.ProtocolError, match=r"that the tcgen05\.st at line \d+ \(warp 0 of CTA \(0, 0, 0\)\) still "
                                                r"writes: a data race; wait with tcgen05\.wait::st first"):
        _tmem(st_then_ld(True, True, wait_st=False))


# -- tcgen05.mma: shared-memory operands written by other warps, tensor memory after the commit ----------------
def mma(proxy_fence: bool, after: bool) -> emu.Program:
    """128 threads write A (128 x 16 bf16) and B (16 x 16) to shared memory with st.shared, pass bar.sync 0,
    and thread 0 issues one M = 128, N = 16, K = 16 tcgen05.mma (no-swizzle K-major operands), commits it
    to ``bar``; every warp waits, fences and reads its 32 rows of D back."""
    return program("sm_100a", f"""
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    mov.u32 %r20, smem;
    shl.b32 %r21, %r0, 4;
    add.u32 %r22, %r20, %r21;
    mov.u32 %r23, 0x3f803f80;           // bf16 pairs of 1.0
    st.shared.v4.u32 [%r22], {{%r23, %r23, %r23, %r23}};
    st.shared.v4.u32 [%r22+2048], {{%r23, %r23, %r23, %r23}};
    st.shared.v4.u32 [%r22+4096], {{%r23, %r23, %r23, %r23}};
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra ALLOCATED;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
    setp.ne.u32 %p2, %r0, 0;
    @%p2 bra ALLOCATED;
    mbarrier.init.shared.b64 [bar], 1;
ALLOCATED:
    {"fence.proxy.async.shared::cta;" if proxy_fence else ""}
    bar.sync 0;
    {"tcgen05.fence::after_thread_sync;" if after else ""}
    ld.shared.u32 %r2, [slot];
    setp.ne.u32 %p2, %r0, 0;
    @%p2 bra ISSUED;
    shr.u32 %r24, %r20, 4;
    cvt.u64.u32 %rd5, %r24;
    ld.param.u64 %rd6, [adesc];
    add.s64 %rd6, %rd6, %rd5;
    ld.param.u64 %rd7, [bdesc];
    add.s64 %rd7, %rd7, %rd5;
    ld.param.u32 %r25, [idesc];
    setp.ne.u32 %p5, %r0, 0;            // false: D = A B'
    tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd6, %rd7, %r25, %p5;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
ISSUED:
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p4, [bar], 0;
    @!%p4 bra WAIT;
    tcgen05.fence::after_thread_sync;
    shl.b32 %r26, %r1, 21;
    add.u32 %r27, %r2, %r26;
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {{%r30}}, [%r27];
    tcgen05.wait::ld.sync.aligned;
    ld.param.u64 %rd8, [out];
    mul.wide.u32 %rd9, %r0, 4;
    add.s64 %rd10, %rd8, %rd9;
    st.global.u32 [%rd10], %r30;
    bar.sync 0;
    @%p1 bra FREED;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;
FREED:
    ret;
""", ".param .u64 out, .param .u64 adesc, .param .u64 bdesc, .param .u32 idesc")


def _mma(prog, seed=0, **kwargs):
    # No-swizzle K-major: 8-row x 16-byte core matrices, the two along K 128 bytes apart (LBO), 8-row groups
    # 256 bytes apart (SBO); A at smem+0 (4 KiB), B at smem+4096.
    out = np.zeros(128, np.float32)
    idesc = 1 << 4 | 1 << 7 | 1 << 10 | (16 >> 3) << 17 | (128 >> 4) << 24  # f32 += bf16 x bf16, M 128, N 16
    prog.launch("k", block=(128, 1, 1), smem_bytes=8192, seed=seed, **kwargs, args=[
        out, D.encode_smem_descriptor(0, 128, 256, "none"), D.encode_smem_descriptor(4096, 128, 256, "none"), idesc])
    return out


def test_an_mma_of_generic_writes_fenced_for_the_async_proxy_and_after_the_barrier():
    for seed in range(3):
        np.testing.assert_array_equal(_mma(mma(True, True), seed), np.full(128, 16.0, np.float32))


def test_an_mma_of_generic_writes_without_fence_proxy_async_is_a_race():
    with pytest.raises(emu.ProtocolError, match=r"tcgen05\.mma.* reads shared bytes .* through the async proxy .* "
                                                r"wrote through the generic proxy, and no fence\.proxy\.async"):
        _mma(mma(False, True))


def test_an_mma_after_a_barrier_without_after_thread_sync_is_a_race():
    # An asynchronous tcgen05 operation is ordered after the thread's earlier waits and barriers only
    # through tcgen05.fence::after_thread_sync; without it the MMA may read the operands too early.
    with pytest.raises(emu.ProtocolError, match=r"tcgen05\.mma.* reads shared bytes .* and warp 0 of CTA \(0, 0, 0\) "
                                                r"executed no tcgen05\.fence::after_thread_sync after the barrier"):
        _mma(mma(True, False))


# -- generic accesses of two warps: a race only where their bytes overlap ----------------------------------------
def two_warps(read_other: bool, barrier: bool) -> emu.Program:
    """Warp 0 writes the even words of smem[0..255], warp 1 the odd ones (disjoint words of the same 16-byte
    granules); then warp 1 reads its own word, or (``read_other``) the even word warp 0 wrote, with or
    without a bar.sync between; every thread stores what it read."""
    return program("sm_90a", f"""
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    and.b32 %r3, %r1, 31;
    shl.b32 %r4, %r3, 3;
    shl.b32 %r5, %r2, 2;
    add.u32 %r6, %r4, %r5;
    mov.u32 %r7, smem;
    add.u32 %r8, %r7, %r6;
    st.shared.u32 [%r8], %r1;
    {"bar.sync 0;" if barrier else ""}
    {"sub.u32 %r8, %r8, %r5;" if read_other else ""}
    ld.shared.u32 %r9, [%r8];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r9;
    ret;
""", ".param .u64 out")


def _two(prog, seed=0):
    out = np.zeros(64, np.uint32)
    prog.launch("k", block=(64, 1, 1), smem_bytes=1024, args=[out], seed=seed)
    return out


def test_warps_writing_disjoint_words_of_a_granule_do_not_race():
    for seed in range(4):
        np.testing.assert_array_equal(_two(two_warps(False, False), seed), np.arange(64))
        np.testing.assert_array_equal(_two(two_warps(True, True), seed), np.arange(64) % 32)


def test_a_read_of_another_warps_word_without_a_barrier_is_a_race():
    # Whichever warp runs first: the read after the write is unordered, or the write after the read is.
    for seed in range(4):
        with pytest.raises(emu.ProtocolError, match=r"(reads|writes) shared bytes 0x800\.\.0x80f \(smem\+0\) that line \d+: "
                                                    r"(st|ld)\.shared\.u32 .* \(warp [01] of CTA \(0, 0, 0\)\) "
                                                    r"(wrote|read), and no barrier or mbarrier orders that access "
                                                    r"before this one: a data race; synchronise the two warps"):
            _two(two_warps(True, False), seed)

def test_two_warps_storing_one_value_to_a_word_is_not_reported():
    # Both warps store 7 to word 0 with no barrier: whatever the order, memory holds 7 (Triton's broadcast
    # layouts store a reduced value from every warp); storing their own thread index instead is a race.
    def kernel(value: str) -> emu.Program:
        return program("sm_90a", f"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r7, smem;
    st.shared.u32 [%r7], {value};
    bar.sync 0;
    ld.shared.u32 %r9, [%r7];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r9;
    ret;
""", ".param .u64 out")
    for seed in range(4):
        np.testing.assert_array_equal(_two(kernel("7"), seed), np.full(64, 7))
    with pytest.raises(emu.ProtocolError, match=r"st\.shared\.u32 .* writes shared bytes .* that line \d+: "
                                                r"st\.shared\.u32 .* wrote, and no barrier"):
        _two(kernel("%r1"))

# -- the implicit-tcgen05-fences mode: third-party code that relies on thread syncs alone ------------------------
IMPLICIT = "implicit-tcgen05-fences"


def test_the_implicit_fences_mode_lets_each_thread_sync_perform_the_tcgen05_fences():
    # CUTLASS/CuTe DSL and Triton emit no tcgen05.fence (test_emu_cute_sm100a, test_emu_sm100_kernels):
    # in this mode a release fences before and an acquire after the sync, so the unfenced kernels pass ...
    for seed in range(3):
        np.testing.assert_array_equal(_tmem(st_then_ld(False, False), seed, race_checks=IMPLICIT), np.arange(32) + 7)
        np.testing.assert_array_equal(_mma(mma(True, False), seed, race_checks=IMPLICIT), np.full(128, 16.0, np.float32))


def test_the_implicit_fences_mode_keeps_the_other_checks():
    # ... while a missing fence.proxy.async, wait::st or barrier is still reported.
    with pytest.raises(emu.ProtocolError, match=r"no fence\.proxy\.async"):
        _mma(mma(False, False), race_checks=IMPLICIT)
    with pytest.raises(emu.ProtocolError, match=r"wait with tcgen05\.wait::st first"):
        _tmem(st_then_ld(False, False, wait_st=False), race_checks=IMPLICIT)
    with pytest.raises(emu.ProtocolError, match="cross-proxy data race"):
        _store(tma_store(True, True, barrier=False), race_checks=IMPLICIT)


def test_the_race_check_modes_are_named_in_the_errors(monkeypatch):
    monkeypatch.setenv("FA4_EMU_RACE_CHECKS", IMPLICIT)
    np.testing.assert_array_equal(_tmem(st_then_ld(False, False)), np.arange(32) + 7)
    monkeypatch.setenv("FA4_EMU_RACE_CHECKS", "strict")
    from fa4_mlir.errors import ConfigError
    with pytest.raises(ConfigError, match="FA4_EMU_RACE_CHECKS must be 0, 1 or implicit-tcgen05-fences, got 'strict'"):
        _tmem(st_then_ld(True, True))
    monkeypatch.delenv("FA4_EMU_RACE_CHECKS")
    with pytest.raises(emu.LaunchArgumentError, match="race_checks must be True, False, None or "
                                                      "'implicit-tcgen05-fences', got 'implicit'"):
        _tmem(st_then_ld(True, True), race_checks="implicit")


@pytest.mark.parametrize("seed, shown", [(-1, "-1"), (False, "False"), ("3", "'3'")])
def test_the_seed_must_be_a_non_negative_int(seed, shown):
    with pytest.raises(emu.LaunchArgumentError, match=f"seed must be an int >= 0, got {shown}"):
        _tmem(st_then_ld(True, True), seed=seed)
