"""Clusters in the emulator on hand-written PTX: multicast TMA (``cp.async.bulk.tensor ... .multicast::cluster``
with a ctaMask, with and without .cta_group::2), ld/st.shared::cluster and generic accesses to a peer CTA's
shared memory (distributed shared memory), and barrier.cluster's variants. Each result is checked against
NumPy; every new error message has a negative test.

ISA facts used (PTX ISA "cp.async.bulk.tensor", "mapa", "barrier.cluster", "State Spaces"): a multicast
load writes the box at dstMem's CTA-relative offset in every CTA whose %cluster_ctarank bit is set in the
16-bit ctaMask and performs complete-tx on the mbarrier at mbar's CTA-relative offset there; CTA r's
shared::cta window is its slot of the shared::cluster window (the emulator's slot: r << 24).
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
.shared .align 16 .b8 data[512];
"""
BOX = 8 * 64 * 2  # an 8 x 64 bf16 box: 1024 bytes


def kernel(body: str, params: str = ".param .u64 out, .param .align 64 .b8 tmap[128]") -> emu.Program:
    return emu.load_ptx(HEADER + f"""
.visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b16 %rs<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %cluster_ctarank;
    setp.ne.u32 %p1, %r0, 0;
{body}
}}
""")


def tile(rows: int = 20, cols: int = 200) -> np.ndarray:
    return np.arange(rows * cols, dtype=np.uint16).reshape(rows, cols)


def multicast_body(issuer: int, mask: int, mods: str = "", bar_rank: str = "", receivers: int | None = None,
                   waiters: int | None = None) -> str:
    """Every CTA inits ``bar``; the CTAs in ``waiters`` (a rank mask; default: the receivers) expect BOX bytes
    on their barrier; after a cluster barrier, thread 0 of CTA ``issuer`` issues one multicast load of the box
    at (c0 = 64, c1 = 8) to ``smem`` with ``mask``; each waiter waits, then every CTA in ``receivers`` copies
    its smem box to out[rank] (1024 bytes, 32 lanes x 32 bytes). ``bar_rank`` maps the mbarrier operand to
    a rank first (mapa), for .cta_group::2."""
    receivers = mask if receivers is None else receivers
    waiters = receivers if waiters is None else waiters
    bar_addr = f"""
    mov.u32 %r8, bar;
    mapa.shared::cluster.u32 %r8, %r8, {bar_rank};""" if bar_rank else "\n    mov.u32 %r8, bar;"
    return f"""
    @%p1 bra INITED;
    mbarrier.init.shared.b64 [bar], 1;
    shr.u32 %r2, {waiters}, %r1;
    and.b32 %r2, %r2, 1;
    setp.eq.u32 %p2, %r2, 0;
    @%p2 bra INITED;
    mbarrier.arrive.expect_tx.shared.b64 %rd4, [bar], {BOX};
INITED:
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    setp.ne.u32 %p3, %r1, {issuer};
    or.pred %p3, %p3, %p1;
    @%p3 bra ISSUED;
    mov.b64 %rd1, tmap;
    cvta.param.u64 %rd2, %rd1;
    mov.u32 %r3, smem;{bar_addr}
    mov.u32 %r4, 64;
    mov.u32 %r5, 8;
    mov.b16 %rs1, {mask};
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster{mods} [%r3], [%rd2, {{%r4, %r5}}], [%r8], %rs1;
ISSUED:
    shr.u32 %r2, {waiters}, %r1;
    and.b32 %r2, %r2, 1;
    setp.eq.u32 %p4, %r2, 0;
    @%p4 bra WAITED;
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p5, [bar], 0;
    @!%p5 bra WAIT;
WAITED:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    shr.u32 %r2, {receivers}, %r1;
    and.b32 %r2, %r2, 1;
    setp.eq.u32 %p6, %r2, 0;
    @%p6 bra DONE;
    ld.param.u64 %rd5, [out];
    mul.wide.u32 %rd6, %r1, {BOX};
    add.s64 %rd5, %rd5, %rd6;
    mul.wide.u32 %rd6, %r0, 32;
    add.s64 %rd5, %rd5, %rd6;
    mov.u32 %r6, smem;
    shl.b32 %r7, %r0, 5;
    add.u32 %r6, %r6, %r7;
    ld.shared.v4.b32 {{%r10, %r11, %r12, %r13}}, [%r6];
    st.global.v4.b32 [%rd5], {{%r10, %r11, %r12, %r13}};
    ld.shared.v4.b32 {{%r10, %r11, %r12, %r13}}, [%r6+16];
    st.global.v4.b32 [%rd5+16], {{%r10, %r11, %r12, %r13}};
DONE:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
"""


def launch(program, ctas: int, src: np.ndarray, seed: int = 0) -> np.ndarray:
    out = np.zeros((ctas, 8, 64), np.uint16)
    program.launch("k", grid=(ctas, 1, 1), cluster=(ctas, 1, 1), block=(32, 1, 1), smem_bytes=2048,
                   args=[out, emu.TensorMap(src, box=(8, 64), swizzle="none", dtype="bf16")], seed=seed)
    return out


# -- multicast TMA --------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_a_multicast_load_lands_in_every_masked_cta_and_signals_each(seed):
    # CTA 1 of four issues with ctaMask 0b1011: CTAs 0, 1 and 3 get the box and the complete-tx on their own
    # barrier (each expects BOX bytes: a missing or extra signal deadlocks or breaks the phase); CTA 2 none.
    src = tile()
    out = launch(kernel(multicast_body(issuer=1, mask=0b1011)), 4, src, seed)
    for rank in (0, 1, 3):
        np.testing.assert_array_equal(out[rank], src[8:16, 64:128])
    assert not out[2].any()


@pytest.mark.parametrize("seed", range(3))
def test_a_cta_group_2_multicast_signals_the_even_cta_of_each_destination_pair(seed):
    # CTA 0 multicasts to the odd CTAs 1 and 3 with .cta_group::2 and mbar in CTA 0 (peer bit clear, as
    # CUTLASS's 2-SM loads do): the box lands in CTAs 1 and 3, the complete-tx goes to CTAs 0 and 2 (the even
    # CTA of each destination's pair), whose waits then order the odd CTAs' reads.
    src = tile()
    body = multicast_body(issuer=0, mask=0b1010, mods=".cta_group::2", bar_rank="0", receivers=0b1010,
                          waiters=0b0101)
    out = launch(kernel(body), 4, src, seed)
    for rank in (1, 3):
        np.testing.assert_array_equal(out[rank], src[8:16, 64:128])
    assert not out[0].any() and not out[2].any()


def test_a_multicast_mask_naming_a_rank_beyond_the_cluster_is_an_error():
    with pytest.raises(emu.ProtocolError, match=r"the multicast ctaMask must name only ranks of the cluster's 2 "
                                                r"CTA\(s\) \(bits 0\.\.1\), got 0x0005"):
        launch(kernel(multicast_body(issuer=0, mask=0b101, receivers=0b01)), 2, tile())


def test_a_cta_group_2_multicast_to_a_cta_without_a_pair_is_an_error():
    # mbar in CTA 1 (odd): destination 2's signal would go to CTA 3, which a cluster of 3 lacks
    body = multicast_body(issuer=0, mask=0b100, mods=".cta_group::2", bar_rank="1", receivers=0b100, waiters=0b010)
    with pytest.raises(emu.ProtocolError, match=r"a \.cta_group::2 multicast destination must have its CTA pair in "
                                                r"the cluster, got rank 2 \(pair 2, 3\) in a cluster of 3"):
        launch(kernel(body), 3, tile())


@pytest.mark.parametrize("instruction, text", [
    ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
     "[%r3], [%rd2, {%r4, %r5}], [%r8];",
     r"a multicast tensor load takes \[dstMem\], \[tensorMap, tensorCoords\], \[mbar\], ctaMask, got 3 operands"),
    ("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group.multicast::cluster [%rd2, {%r4, %r5}], [%r3];",
     r"\.multicast::cluster is a form of the \.shared::cluster\.global load only"),
])
def test_malformed_multicast_loads_are_syntax_errors(instruction, text):
    body = f"    mov.b64 %rd2, tmap;\n    mov.u32 %r3, smem;\n    mov.u32 %r8, bar;\n    {instruction}\n    ret;"
    with pytest.raises(emu.PtxSyntaxError, match=text):
        kernel(body).launch("k", block=(32, 1, 1), smem_bytes=2048,
                            args=[np.zeros(1, np.uint16), emu.TensorMap(tile(), box=(8, 64), swizzle="none",
                                                                        dtype="bf16")])


# -- distributed shared memory ------------------------------------------------------------------------------
DSMEM = """
    shl.b32 %r2, %r0, 2;
    mov.u32 %r3, data;
    add.u32 %r3, %r3, %r2;              // this thread's word of data[]
    mad.lo.u32 %r4, %r1, 1000, %r0;
    st.shared.u32 [%r3], %r4;            // data[t] = 1000 * rank + t in every CTA
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    xor.b32 %r5, %r1, 1;                 // the peer
    mapa.shared::cluster.u32 %r6, %r3, %r5;
    {READ}
    add.u32 %r8, %r7, 1;
    st.shared::cluster.u32 [%r6+128], %r8;  // the peer's data[32 + t] = (what we read) + 1
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ld.shared.u32 %r9, [%r3+128];
    ld.param.u64 %rd1, [out];
    mad.lo.u32 %r10, %r1, 32, %r0;
    mul.wide.u32 %rd2, %r10, 8;
    add.s64 %rd1, %rd1, %rd2;
    st.global.v2.u32 [%rd1], {%r7, %r9};
    {EXIT}
    ret;
"""


@pytest.mark.parametrize("read", [
    "ld.shared::cluster.u32 %r7, [%r6];",
    # a generic address of the peer's window (cvta of the shared::cluster address), as CUDA's map_shared_rank
    "cvt.u64.u32 %rd3, %r6;\n    cvta.shared::cluster.u64 %rd3, %rd3;\n    ld.u32 %r7, [%rd3];",
])
def test_ld_and_st_shared_cluster_reach_the_peers_shared_memory(read):
    out = np.zeros((2, 32, 2), np.uint32)
    program = kernel(DSMEM.replace("{READ}", read).replace("{EXIT}", "barrier.cluster.arrive.aligned;\n"
                                                                     "    barrier.cluster.wait.aligned;"),
                     ".param .u64 out")
    for seed in range(3):
        program.launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[out], seed=seed)
        t = np.arange(32)
        for rank in (0, 1):
            np.testing.assert_array_equal(out[rank, :, 0], 1000 * (1 - rank) + t)      # read from the peer
            np.testing.assert_array_equal(out[rank, :, 1], 1000 * rank + t + 1)        # what the peer stored here


def test_a_shared_cluster_address_beyond_the_cluster_is_a_fault():
    body = "    mov.u32 %r2, data;\n    or.b32 %r2, %r2, 0x2000000;\n    ld.shared::cluster.u32 %r3, [%r2];\n    ret;"
    with pytest.raises(emu.MemoryFault, match=r"shared::cluster address 0x2[0-9a-f]+ must name a CTA of the cluster "
                                              r"\(rank below 2\), got rank 2"):
        kernel(body, ".param .u64 out").launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[None])


def test_reading_an_exited_peers_shared_memory_is_an_error():
    # CTA 1 exits right away; CTA 0 reads its shared memory without a cluster barrier keeping it alive.
    body = """
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra DONE;
    mov.u32 %r2, %nctaid.x;
WAITLOOP:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p3, %r2, 2000;          // long enough for CTA 1 to be gone under every tempo
    @%p3 bra WAITLOOP;
    mov.u32 %r3, data;
    mapa.shared::cluster.u32 %r4, %r3, 1;
    ld.shared::cluster.u32 %r5, [%r4];
DONE:
    ret;
"""
    with pytest.raises(emu.ProtocolError, match=r"accesses the shared memory of CTA rank 1, which has exited; a CTA "
                                                r"must stay alive while others access its shared memory"):
        kernel(body, ".param .u64 out").launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[None])


def test_a_shared_cta_access_still_cannot_reach_a_peer():
    body = "    mov.u32 %r2, data;\n    mapa.shared::cluster.u32 %r3, %r2, 1;\n    ld.shared.u32 %r4, [%r3];\n    ret;"
    with pytest.raises(emu.MemoryFault, match=r"is not in this CTA's window \(rank 0\)"):
        kernel(body, ".param .u64 out").launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[None])


# -- barrier.cluster ------------------------------------------------------------------------------------------
def test_barrier_cluster_counts_threads_of_partial_warps():
    # 48 threads a CTA: warp 1 has 16 live lanes. Each thread stores 1 + rank to data[t], then after the
    # cluster barrier reads the peer's data[t]; a barrier that counted 32 for warp 1 would let CTA 0 through
    # before CTA 1's warp 1 arrived, and some seed would read the peer's unwritten 0xA5A5A5A5.
    body = """
    shl.b32 %r2, %r0, 2;
    mov.u32 %r3, data;
    add.u32 %r3, %r3, %r2;
    add.u32 %r4, %r1, 1;
    st.shared.u32 [%r3], %r4;
    barrier.cluster.arrive.relaxed.aligned;
    barrier.cluster.wait.aligned;
    xor.b32 %r5, %r1, 1;
    mapa.shared::cluster.u32 %r6, %r3, %r5;
    ld.shared::cluster.u32 %r7, [%r6];
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ld.param.u64 %rd1, [out];
    mad.lo.u32 %r10, %r1, 48, %r0;
    mul.wide.u32 %rd2, %r10, 4;
    add.s64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r7;
    ret;
"""
    program = kernel(body, ".param .u64 out")
    for seed in range(8):
        out = np.zeros((2, 48), np.uint32)
        program.launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(48, 1, 1), args=[out], seed=seed)
        np.testing.assert_array_equal(out, [[2] * 48, [1] * 48])


def test_barrier_cluster_arrive_from_diverged_threads_counts_each():
    # Non-.aligned arrive: the lanes of a warp arrive in two groups (odd, then even lanes), then all wait.
    body = """
    and.b32 %r2, %r0, 1;
    setp.eq.u32 %p2, %r2, 0;
    @%p2 bra EVEN;
    barrier.cluster.arrive.release;
    bra.uni JOINED;
EVEN:
    barrier.cluster.arrive.relaxed;
JOINED:
    barrier.cluster.wait.acquire;
    ret;
"""
    kernel(body, ".param .u64 out").launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[None])
    with pytest.raises(emu.ProtocolError, match="barrier.cluster.wait without a preceding barrier.cluster.arrive"):
        kernel("    barrier.cluster.wait;\n    ret;", ".param .u64 out").launch(
            "k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[None])


def test_atom_shared_cluster_adds_in_the_peers_shared_memory():
    # Every thread of both CTAs adds 1 + rank to CTA 0's counter (data[0]) and gets the old value back.
    body = """
    mov.u32 %r2, data;
    @%p1 bra ZEROED;
    st.shared.u32 [%r2], 0;
ZEROED:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    mapa.shared::cluster.u32 %r3, %r2, 0;
    add.u32 %r4, %r1, 1;
    atom.shared::cluster.add.u32 %r5, [%r3], %r4;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ld.shared::cluster.u32 %r6, [%r3];
    ld.param.u64 %rd1, [out];
    mad.lo.u32 %r10, %r1, 32, %r0;
    mul.wide.u32 %rd2, %r10, 8;
    add.s64 %rd1, %rd1, %rd2;
    st.global.v2.u32 [%rd1], {%r5, %r6};
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
"""
    out = np.zeros((2, 32, 2), np.uint32)
    kernel(body, ".param .u64 out").launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[out])
    assert (out[:, :, 1] == 32 * 1 + 32 * 2).all()
    olds = np.sort(out[:, :, 0].reshape(-1))
    increments = np.sort(np.diff(np.concatenate([olds, [96]])))
    assert olds[0] == 0 and set(increments.tolist()) <= {1, 2}  # each old value is the sum of the adds before it
