"""The emulator's execution model on small hand-written PTX: SIMT divergence and reconvergence,
named barriers, mbarrier phases, shuffles, elect, memory faults, deadlock reports and launch checks.
Each expectation comes from the PTX ISA text, not from the emulator."""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir import emu

HEADER = """
.version 8.6
.target sm_90a
.address_size 64
"""


def kernel(body: str, params: str = ".param .u64 out", regs: str = "", shared: str = "") -> emu.Program:
    text = HEADER + shared + f"""
.visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<8>;
    {regs}
{body}
}}
"""
    return emu.load_ptx(text)


STORE_R1 = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
"""


def test_divergent_branches_reconverge_at_the_post_dominator():
    # Odd lanes take one path, even lanes the other; both continue after the join with their own value.
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    and.b32 %r2, %r0, 1;
    setp.eq.u32 %p1, %r2, 1;
    @%p1 bra ODD;
    mov.u32 %r1, 100;
    bra.uni JOIN;
ODD:
    mov.u32 %r1, 200;
JOIN:
    add.u32 %r1, %r1, %r0;
""" + STORE_R1)
    out = np.zeros(64, np.uint32)
    prog.launch("k", block=(64, 1, 1), args=[out])
    lanes = np.arange(64)
    np.testing.assert_array_equal(out, np.where(lanes % 2 == 1, 200, 100) + lanes)


def test_loop_with_lane_dependent_trip_count():
    # Lane i iterates i times: the warp keeps running until the last lane leaves the loop.
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, 0;
    mov.u32 %r3, 0;
LOOP:
    setp.ge.u32 %p1, %r3, %r0;
    @%p1 bra DONE;
    add.u32 %r1, %r1, %r3;
    add.u32 %r3, %r3, 1;
    bra.uni LOOP;
DONE:
""" + STORE_R1)
    out = np.zeros(32, np.uint32)
    prog.launch("k", block=(32, 1, 1), args=[out])
    i = np.arange(32)
    np.testing.assert_array_equal(out, i * (i - 1) // 2)


def test_shfl_bfly_sum_and_out_of_range_lanes():
    # A butterfly reduction gives every lane the warp sum; shfl.up by 1 with clamp 0 keeps lane 0's own
    # value and reports p = false there (PTX ISA shfl.sync: j = lane - b, valid when j >= maxLane).
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %r0;
    shfl.sync.bfly.b32 %r2, %r1, 16, 31, -1;
    add.u32 %r1, %r1, %r2;
    shfl.sync.bfly.b32 %r2, %r1, 8, 31, -1;
    add.u32 %r1, %r1, %r2;
    shfl.sync.bfly.b32 %r2, %r1, 4, 31, -1;
    add.u32 %r1, %r1, %r2;
    shfl.sync.bfly.b32 %r2, %r1, 2, 31, -1;
    add.u32 %r1, %r1, %r2;
    shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
    add.u32 %r1, %r1, %r2;
    shfl.sync.up.b32 %r4|%p2, %r0, 1, 0, -1;
    selp.u32 %r5, 1000, 0, %p2;
    mul.lo.u32 %r1, %r1, 100000;
    add.u32 %r1, %r1, %r4;
    add.u32 %r1, %r1, %r5;
""" + STORE_R1)
    out = np.zeros(32, np.uint32)
    prog.launch("k", block=(32, 1, 1), args=[out])
    lane = np.arange(32)
    expected = 496 * 100000 + np.where(lane == 0, 0, lane - 1) + np.where(lane == 0, 0, 1000)
    np.testing.assert_array_equal(out, expected)


def test_elect_picks_the_lowest_active_lane():
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p3, %r0, 5;
    mov.u32 %r1, 7;
    @%p3 bra SKIP;
    elect.sync %r6|%p1, -1;
    selp.u32 %r1, 1, 0, %p1;
    add.u32 %r1, %r1, %r6;
SKIP:
""" + STORE_R1)
    out = np.zeros(32, np.uint32)
    prog.launch("k", block=(32, 1, 1), args=[out])
    lane = np.arange(32)
    np.testing.assert_array_equal(out, np.where(lane < 5, 7, 5 + (lane == 5)))


MBAR = """
.shared .align 8 .b8 bar[8];
.shared .align 4 .b8 data[4];
"""


def test_mbarrier_phase_parity():
    # On a fresh barrier (phase 0 under way), test_wait.parity 1 is true (the phase "before" it counts
    # as completed) and parity 0 is false. Warp 1 then waits on parity 0 until warp 0 has written the
    # data and arrived (count 1): it must see the data.
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    shr.u32 %r7, %r0, 5;
    mov.u32 %r8, %laneid;
    setp.ne.u32 %p4, %r0, 0;
    @%p4 bra INIT_DONE;
    mbarrier.init.shared.b64 [bar], 1;
INIT_DONE:
    bar.sync 0;
    mbarrier.test_wait.parity.shared.b64 %p5, [bar], 1;
    mbarrier.test_wait.parity.shared.b64 %p6, [bar], 0;
    selp.u32 %r9, 1, 0, %p5;
    selp.u32 %r10, 1, 0, %p6;
    mad.lo.u32 %r9, %r10, 10, %r9;
    bar.sync 0;
    setp.ne.u32 %p1, %r7, 0;
    @%p1 bra CONSUMER;
    setp.ne.u32 %p2, %r8, 0;
    @%p2 bra END;
    mov.u32 %r2, 1234;
    st.shared.u32 [data], %r2;
    mbarrier.arrive.shared.b64 %rd5, [bar];
    bra.uni END;
CONSUMER:
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p3, [bar], 0;
    @!%p3 bra WAIT;
    ld.shared.u32 %r1, [data];
    mad.lo.u32 %r1, %r9, 10000, %r1;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r8, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
END:
    ret;
""", shared=MBAR)
    for seed in range(5):
        out = np.zeros(32, np.uint32)
        prog.launch("k", block=(64, 1, 1), args=[out], seed=seed)
        np.testing.assert_array_equal(out, np.full(32, 11234))


def test_deadlock_names_the_blocked_warp_the_barrier_and_the_line():
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p4, %r0, 0;
    @%p4 bra INIT_DONE;
    mbarrier.init.shared.b64 [bar], 2;
INIT_DONE:
    bar.sync 0;
    mbarrier.arrive.shared.b64 %rd5, [bar];
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p3, [bar], 0;
    @!%p3 bra WAIT;
    ret;
""", shared=MBAR)
    # 32 lanes arrive on a barrier expecting 2: that is an over-arrival, reported as such.
    with pytest.raises(emu.ProtocolError, match="exceed the pending count"):
        prog.launch("k", block=(32, 1, 1), args=[np.zeros(1, np.uint32)])
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p4, %r0, 0;
    @%p4 bra INIT_DONE;
    mbarrier.init.shared.b64 [bar], 2;
INIT_DONE:
    bar.sync 0;
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p3, [bar], 0;
    @!%p3 bra WAIT;
    ret;
""", shared=MBAR)
    with pytest.raises(emu.Deadlock) as info:
        prog.launch("k", block=(64, 1, 1), args=[np.zeros(1, np.uint32)])
    message = str(info.value)
    assert "warp 0 of CTA (0, 0, 0)" in message and "warp 1 of CTA (0, 0, 0)" in message
    assert "phase parity 0" in message and "bar+0" in message and "2 of 2 arrivals pending" in message
    assert "line " in message and "mbarrier.try_wait.parity.shared.b64" in message
    assert len(info.value.blocked) == 2


def test_named_barrier_thread_count_mismatch_is_reported():
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    shr.u32 %r7, %r0, 5;
    setp.eq.u32 %p1, %r7, 0;
    @%p1 bra A;
    bar.sync 1, 64;
    ret;
A:
    bar.sync 1, 96;
    ret;
""")
    with pytest.raises(emu.ProtocolError, match="every arrival at one barrier must give the same count"):
        prog.launch("k", block=(64, 1, 1), args=[np.zeros(1, np.uint32)])


def test_named_barrier_ids_from_registers():
    """``bar.sync`` takes the id in a register (a warpgroup's turn barrier: 1 + tid / 128): the 128 threads of
    warpgroup 0 meet at barrier 1 and the 64 of the second at barrier 2; each warp at a barrier of its own
    waits forever; an id that differs within a warp is an error."""
    body = """
    mov.u32 %r0, %tid.x;
    shr.u32 %r7, %r0, 7;
    add.u32 %r8, %r7, 1;
    mul.lo.u32 %r9, %r7, 64;
    mov.u32 %r10, 128;
    sub.u32 %r9, %r10, %r9;
    bar.sync %r8, %r9;
    ret;
"""
    kernel(body).launch("k", block=(192, 1, 1), args=[np.zeros(1, np.uint32)])
    # warp w at barrier 1 + w, 64 threads each: every barrier sees one warp's 32 and none completes
    with pytest.raises(emu.Deadlock, match=r"named barrier 1 \(32 of 64 threads arrived\)"):
        kernel(body.replace("shr.u32 %r7, %r0, 7;", "shr.u32 %r7, %r0, 5;").replace("mov.u32 %r10, 128;",
                                                                                     "mov.u32 %r10, 64;")
               .replace("mul.lo.u32 %r9, %r7, 64;", "mov.u32 %r9, 0;")).launch(
            "k", block=(64, 1, 1), args=[np.zeros(1, np.uint32)])
    split = kernel("""
    mov.u32 %r0, %tid.x;
    and.b32 %r7, %r0, 1;
    add.u32 %r8, %r7, 1;
    bar.sync %r8, 32;
    ret;
""")
    with pytest.raises(emu.ProtocolError, match="barrier id must be the same in every active thread of a warp, "
                                                "got 1, 2"):
        split.launch("k", block=(32, 1, 1), args=[np.zeros(1, np.uint32)])


def test_out_of_bounds_store_names_address_allocation_line_warp_and_lane():
    prog = kernel(STORE_R1.replace("mov.u32 %r0, %tid.x;", "mov.u32 %r0, %tid.x;\n    add.u32 %r0, %r0, 30;"))
    out = np.zeros(32, np.uint32)
    with pytest.raises(emu.MemoryFault) as info:
        prog.launch("k", block=(32, 1, 1), args=[out])
    message = str(info.value)
    assert "lane 2" in message and "warp 0" in message and "'out'" in message
    assert "past the end of" in message and "st.global.u32" in message and "line " in message


def test_shared_access_past_the_dynamic_window():
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    mov.u64 %rd4, dyn;
    ld.shared.u32 %r1, [%rd4+4096];
    ret;
""", shared=".extern .shared .align 16 .b8 dyn[];\n")
    with pytest.raises(emu.MemoryFault, match="past the end of the dynamic window of 4096 bytes"):
        prog.launch("k", block=(32, 1, 1), smem_bytes=4096, args=[np.zeros(1, np.uint32)])


def test_unsupported_opcode_names_opcode_and_line():
    with pytest.raises(emu.Unsupported, match=r"line \d+: opcode 'tex' is not supported"):
        kernel("    tex.1d.v4.s32.s32 {%r1, %r2, %r3, %r4}, [%rd1, {%r5}];\n    ret;").launch(
            "k", args=[np.zeros(1, np.uint32)])


@pytest.mark.parametrize("args, message", [
    ([], r"takes 1 arguments \(out \(.u64\)\), got 0"),
    ([1.5], "must be an int"),
    ([-1], r"must be in \[0, "),
    ([b"1234"], "must be a 64-bit parameter|must be an int"),
])
def test_wrong_argument_count_or_type(args, message):
    prog = kernel("    ret;")
    with pytest.raises(emu.LaunchArgumentError, match=message):
        prog.launch("k", args=args)


def test_launch_shape_errors():
    prog = kernel("    ret;")
    with pytest.raises(emu.LaunchArgumentError, match="at most 1024 threads"):
        prog.launch("k", block=(1024, 2, 1), args=[None])
    with pytest.raises(emu.LaunchArgumentError, match="kernel name must be one of k"):
        prog.launch("nope", args=[None])
    with pytest.raises(emu.LaunchArgumentError, match="multiple of the cluster"):
        prog.launch("k", grid=(3, 1, 1), cluster=(2, 1, 1), args=[None])


def test_vprintf_formats_arguments_from_local_memory():
    # The CUDA printf ABI: a global format string and a local buffer of arguments, each aligned to its
    # size; %f takes a double. This is the call sequence LLVM writes for printf.
    text = HEADER + """
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.global .align 1 .b8 fmt[22] = {116, 105, 100, 32, 37, 100, 32, 37, 117, 32, 37, 46, 50, 102, 32, 37, 120, 32, 37, 37, 10, 0};
.visible .entry k()
{
    .local .align 8 .b8 __local_depot0[32];
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .f64 %fd<2>;
    mov.b64 %rd1, __local_depot0;
    cvta.local.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    sub.s32 %r2, 0, %r1;
    st.local.b32 [%rd1], %r2;
    mov.u32 %r3, 4000000000;
    st.local.b32 [%rd1+4], %r3;
    mov.f64 %fd1, 0d3FF8000000000000;
    st.local.f64 [%rd1+8], %fd1;
    st.local.b32 [%rd1+16], %r3;
    mov.u64 %rd3, fmt;
    cvta.global.u64 %rd4, %rd3;
    {
    .param .b64 param0;
    .param .b64 param1;
    .param .b32 retval0;
    st.param.b64 [param0], %rd4;
    st.param.b64 [param1], %rd2;
    call.uni (retval0), vprintf, (param0, param1);
    }
    ret;
}
"""
    stats = emu.load_ptx(text).launch("k", block=(2, 1, 1), args=[])
    assert stats.output == ["tid 0 4000000000 1.50 ee6b2800 %\n", "tid -1 4000000000 1.50 ee6b2800 %\n"]


def test_calls_other_than_vprintf_are_unsupported():
    text = HEADER + """
.func (.param .b32 r) f(.param .b32 a) { ret; }
.visible .entry k() {
    .reg .b32 %r<2>;
    { .param .b32 p0; .param .b32 r0; st.param.b32 [p0], 1; call.uni (r0), f, (p0); }
    ret;
}
"""
    with pytest.raises(emu.Unsupported, match="function calls are not modelled"):
        emu.load_ptx(text).launch("k", args=[])


def test_shfl_idx_and_down_clamp_to_the_segment():
    # shfl.sync.idx with c = 0x1f0f... : width-16 segments (mask 0x10 in c[12:8]), clamp 15: lane l reads
    # lane (l & 16) | (b & 15). shfl.down by 3 with clamp 31: lanes 29..31 keep their own value, p false.
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    shfl.sync.idx.b32 %r2, %r0, 5, 0x100f, -1;
    shfl.sync.down.b32 %r3|%p1, %r0, 3, 31, -1;
    selp.u32 %r4, 1000, 0, %p1;
    mad.lo.u32 %r1, %r2, 100000, %r3;
    add.u32 %r1, %r1, %r4;
""" + STORE_R1)
    out = np.zeros(32, np.uint32)
    prog.launch("k", block=(32, 1, 1), args=[out])
    lane = np.arange(32)
    src_idx = (lane & 16) | 5
    down = np.where(lane + 3 <= 31, lane + 3, lane)
    np.testing.assert_array_equal(out, src_idx * 100000 + down + np.where(lane + 3 <= 31, 1000, 0))


def test_mbarrier_tx_count_may_go_negative_and_phase_needs_both_zero():
    # complete_tx before expect_tx (a copy landing before its producer announced it) is legal: the
    # tx-count goes negative and the phase completes only when arrivals AND tx-count reach zero.
    prog = kernel("""
    mbarrier.init.shared.b64 [bar], 1;
    mbarrier.complete_tx.shared.b64 [bar], 64;
    mbarrier.test_wait.parity.shared.b64 %p1, [bar], 0;
    mbarrier.arrive.expect_tx.shared.b64 %rd5, [bar], 32;
    mbarrier.test_wait.parity.shared.b64 %p2, [bar], 0;
    mbarrier.expect_tx.shared.b64 [bar], 32;
    mbarrier.test_wait.parity.shared.b64 %p3, [bar], 0;
    mbarrier.test_wait.shared.b64 %p4, [bar], %rd5;
    selp.u32 %r1, 1, 0, %p1;
    selp.u32 %r2, 10, 0, %p2;
    selp.u32 %r3, 100, 0, %p3;
    selp.u32 %r4, 1000, 0, %p4;
    add.u32 %r1, %r1, %r2;
    add.u32 %r1, %r1, %r3;
    add.u32 %r1, %r1, %r4;
    cvt.u32.u64 %r5, %rd5;
    mad.lo.u32 %r1, %r5, 10000, %r1;
""" + STORE_R1, shared=MBAR)
    out = np.zeros(1, np.uint32)
    prog.launch("k", block=(1, 1, 1), args=[out])
    # p1, p2 false (tx -64 then -32), p3 true (tx 0, arrivals 0); the token of the arrive is phase 0,
    # which has completed by the last test_wait.
    assert out[0] == 100 + 1000


def test_mbarrier_init_count_out_of_range_and_uninitialised_wait():
    with pytest.raises(emu.ProtocolError, match=r"init count must be in \[1, 2\^20 - 1\], got 0"):
        kernel("    mbarrier.init.shared.b64 [bar], 0;\n    ret;", shared=MBAR).launch(
            "k", block=(1, 1, 1), args=[None])
    with pytest.raises(emu.ProtocolError, match="no mbarrier was initialised at shared address 0x400"):
        kernel("    mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;\n    ret;", shared=MBAR).launch(
            "k", block=(1, 1, 1), args=[None])


def test_setmaxnreg_rules():
    with pytest.raises(emu.ProtocolError, match="multiple of 8 in \\[24, 256\\], got 20"):
        kernel("    setmaxnreg.dec.sync.aligned.u32 20;\n    ret;").launch("k", block=(128, 1, 1), args=[None])
    with pytest.raises(emu.ProtocolError, match="goes the wrong way"):
        # 128 threads start with min(248, 65536 / 128) = 248 registers: .inc to 232 is a decrease.
        kernel("    setmaxnreg.inc.sync.aligned.u32 232;\n    ret;").launch("k", block=(128, 1, 1), args=[None])



def _register_split(load_budget: int) -> emu.Program:
    """384 threads: warpgroups 0 and 1 raise their budget to 240, warpgroup 2 lowers its to
    ``load_budget`` (the attention kernel's split), then every thread exits."""
    return kernel(f"""
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p1, %r0, 256;
    @%p1 bra CONSUMER;
    setmaxnreg.dec.sync.aligned.u32 {load_budget};
    ret;
CONSUMER:
    setmaxnreg.inc.sync.aligned.u32 240;
    ret;""")


def test_setmaxnreg_inc_cannot_pass_the_ctas_launch_pool():
    # 384 threads start with 168 registers each (64512): 2 x 128 x 240 + 128 x 24 = 64512 fits ...
    _register_split(24).launch("k", block=(384, 1, 1), args=[None])
    # ... and 2 x 128 x 240 + 128 x 32 = 65536 does not: an .inc waits forever for registers no warp
    # releases (a GPU hang on the H100; the register file's 65536 is not the pool)
    with pytest.raises(emu.Deadlock, match="setmaxnreg.inc to 240 registers waits for registers to be released"):
        _register_split(32).launch("k", block=(384, 1, 1), args=[None])


TMA = """
.extern .shared .align 1024 .b8 smem[];
.shared .align 8 .b8 bar[8];
"""


def tma_kernel(wait: bool) -> emu.Program:
    # One thread loads a 8 x 64 bf16 box (128-byte rows, 128B swizzle) at coordinates (c0 = 64, c1 = 8)
    # and, after the mbarrier wait (or without it), all 32 lanes copy the 1024 bytes of smem out.
    return kernel(f"""
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra SKIP;
    mbarrier.init.shared.b64 [bar], 1;
    mov.b64 %rd1, tmap;
    cvta.param.u64 %rd2, %rd1;
    mov.u64 %rd3, smem;
    mov.u32 %r2, 64;
    mov.u32 %r3, 8;
    mbarrier.arrive.expect_tx.shared.b64 %rd4, [bar], 1024;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd3], [%rd2, {{%r2, %r3}}], [bar];
SKIP:
    bar.sync 0;
WAIT:
    {"mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;" if wait else "mov.pred %p2, 1;"}
    @!%p2 bra WAIT;
    ld.param.u64 %rd5, [out];
    mov.u64 %rd3, smem;
    mul.wide.u32 %rd6, %r0, 32;
    add.s64 %rd7, %rd3, %rd6;
    add.s64 %rd8, %rd5, %rd6;
    ld.shared.v4.b32 {{%r4, %r5, %r6, %r7}}, [%rd7];
    st.global.v4.b32 [%rd8], {{%r4, %r5, %r6, %r7}};
    ld.shared.v4.b32 {{%r4, %r5, %r6, %r7}}, [%rd7+16];
    st.global.v4.b32 [%rd8+16], {{%r4, %r5, %r6, %r7}};
    ret;
""", params=".param .u64 out, .param .align 64 .b8 tmap[128]", shared=TMA)


def test_tma_load_lands_swizzled_and_signals_the_mbarrier():
    src = np.arange(20 * 200, dtype=np.uint16).reshape(20, 200)
    out = np.zeros(512, np.uint16)
    tma_kernel(wait=True).launch("k", block=(32, 1, 1), smem_bytes=2048, args=[
        out, emu.TensorMap(src, box=(8, 64), swizzle="128B", dtype="bf16")])
    # PTX ISA swizzle 128B: 16-byte chunk j of row r (128-byte rows, 1024-aligned) lands at chunk j ^ (r % 8).
    rows = out.reshape(8, 8, 8)  # row, chunk, element
    for r in range(8):
        for j in range(8):
            np.testing.assert_array_equal(rows[r, j ^ r], src[8 + r, 64 + 8 * j: 64 + 8 * j + 8])


def test_reading_a_tma_destination_before_it_lands_is_reported_as_a_data_race():
    # PTX memory model: a TMA load's writes are ordered before a read only by the mbarrier wait that
    # observes its complete-tx. A read of a destination still in flight is a data race whatever bytes
    # it happens to see, so the emulator reports it; where the copy lands first the read sees the data.
    src = np.arange(20 * 200, dtype=np.uint16).reshape(20, 200)
    tmap = emu.TensorMap(src, box=(8, 64), swizzle="128B", dtype="bf16")
    want = np.zeros(512, np.uint16)
    tma_kernel(wait=True).launch("k", block=(32, 1, 1), smem_bytes=2048, args=[want, tmap])
    races = []
    for seed in range(20):
        out = np.zeros(512, np.uint16)
        try:
            tma_kernel(wait=False).launch("k", block=(32, 1, 1), smem_bytes=2048, seed=seed, args=[out, tmap])
        except emu.ProtocolError as exc:
            races.append(str(exc))
            continue
        np.testing.assert_array_equal(out, want, err_msg=f"seed {seed}")
    assert races, "no seed read the destination while the copy was in flight: async timing is not modelled"
    assert "ld.shared.v4.b32" in races[0] and "reads shared bytes" in races[0], races[0]
    assert "that the TMA load at line" in races[0] and "wait on the load's mbarrier first" in races[0], races[0]


def parity_kernel(acknowledge: bool) -> emu.Program:
    # Thread 0 produces two phases of ``full``; warp 1 consumes phase 0 then phase 1 by parity. Between
    # its two arrives the producer waits for a bulk copy. Without the consumer's acknowledgement on
    # ``ack`` nothing stops the producer from completing phase 1 before the consumer has re-read the
    # barrier after phase 0: the phase is then 2, parity 0 again, and the consumer waits forever.
    return kernel(f"""
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra INIT_DONE;
    mbarrier.init.shared.b64 [full], 1;
    mbarrier.init.shared.b64 [ack], 1;
    mbarrier.init.shared.b64 [dma], 1;
INIT_DONE:
    bar.sync 0;
    setp.ge.u32 %p2, %r0, 32;
    @%p2 bra CONSUMER;
    @%p1 bra DONE;
    mbarrier.arrive.shared.b64 %rd5, [full];
    mbarrier.arrive.expect_tx.shared.b64 %rd5, [dma], 16;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [buf], [%rd1], 16, [dma];
DMA:
    mbarrier.try_wait.parity.shared.b64 %p3, [dma], 0;
    @!%p3 bra DMA;
{"ACK:" if acknowledge else ""}
    {"mbarrier.try_wait.parity.shared.b64 %p3, [ack], 0;" if acknowledge else ""}
    {"@!%p3 bra ACK;" if acknowledge else ""}
    mbarrier.arrive.shared.b64 %rd5, [full];
    bra DONE;
CONSUMER:
    mbarrier.try_wait.parity.shared.b64 %p3, [full], 0;
    @!%p3 bra CONSUMER;
    setp.eq.u32 %p4, %r0, 32;
    {"@%p4 mbarrier.arrive.shared.b64 %rd5, [ack];" if acknowledge else ""}
SECOND:
    mbarrier.try_wait.parity.shared.b64 %p3, [full], 1;
    @!%p3 bra SECOND;
DONE:
    ret;
""", shared=".shared .align 8 .b8 full[8];\n.shared .align 8 .b8 ack[8];\n.shared .align 8 .b8 dma[8];\n"
            ".shared .align 16 .b8 buf[16];\n")


def test_the_scheduler_holds_a_released_warp_back_so_a_producer_can_run_a_phase_ahead():
    # machine.Launch: a seed's tempo may hold a warp its wait released off the schedule. That opens the
    # window of a missing acknowledgement: the producer completes the next phase first, and the consumer
    # deadlocks on a parity that came round again. With the acknowledgement every seed passes.
    data = np.arange(4, dtype=np.uint32)
    found = []
    for seed in range(20):
        parity_kernel(acknowledge=True).launch("k", block=(64, 1, 1), args=[data], seed=seed)
        try:
            parity_kernel(acknowledge=False).launch("k", block=(64, 1, 1), args=[data], seed=seed)
        except emu.Deadlock as exc:
            found.append((seed, str(exc)))
    assert found, "no seed let the producer run a phase ahead of its consumer"
    assert "waits for phase parity 0" in found[0][1], found[0][1]


def test_bulk_wait_group_read_waits_for_every_older_group():
    # PTX ISA cp.async.bulk.wait_group.read N: wait until all but the N most recent bulk groups have
    # finished reading their source. A newer group finishing first must not release an older one.
    # (The calibration run found this: the GEMM's beta-0 epilogue stored a stale D tile.)
    prog = kernel("""
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    mov.u32 %r2, smem;
    st.shared.v4.u32 [%r2], {1, 1, 1, 1};
    st.shared.v4.u32 [%r2+16], {2, 2, 2, 2};
    fence.proxy.async.shared::cta;
    cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r2], 16;
    cp.async.bulk.commit_group;
    add.u64 %rd2, %rd1, 16;
    add.u32 %r3, %r2, 16;
    cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r3], 16;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 1;
    st.shared.v4.u32 [%r2], {3, 3, 3, 3};
    cp.async.bulk.wait_group 0;
DONE:
    ret;
""", shared=".extern .shared .align 1024 .b8 smem[];\n")
    for seed in range(40):
        out = np.zeros(8, np.uint32)
        prog.launch("k", block=(32, 1, 1), smem_bytes=1024, args=[out], seed=seed)
        np.testing.assert_array_equal(out, [1, 1, 1, 1, 2, 2, 2, 2], err_msg=f"seed {seed}")


def test_setp_f16x2_writes_low_and_high_comparisons():
    # setp.lt.f16x2 p|q, a, b: p compares the low halves, q the high halves (PTX ISA "setp").
    prog = kernel("""
    mov.b32 %r2, 0x3C00C000;
    mov.b32 %r3, 0x40000000;
    setp.lt.f16x2 %p1|%p2, %r2, %r3;
    selp.u32 %r1, 1, 0, %p1;
    selp.u32 %r4, 10, 0, %p2;
    add.u32 %r1, %r1, %r4;
""" + STORE_R1)
    out = np.zeros(1, np.uint32)
    prog.launch("k", block=(1, 1, 1), args=[out])
    # low: 0xC000 = -2.0 < 0x0000 = 0.0 (true); high: 0x3C00 = 1.0 < 0x4000 = 2.0 (true) -> 11
    assert out[0] == 11


@pytest.mark.parametrize("body, message", [
    ("    mbarrier.init.shared.b64 [bar], 2;\n    @%p1 mbarrier.arrive.shared.b64 %rd5, [bar];\n    ret;",
     r"half arrived: 1 of 2 arrivals in phase 0"),
    ("    mbarrier.init.shared.b64 [bar], 1;\n    @%p1 mbarrier.expect_tx.shared.b64 [bar], 128;\n    ret;",
     "still expecting 128 transaction bytes"),
    ("    @%p1 bar.arrive 3, 64;\n    ret;", "named barrier 3 half arrived"),
    ("    mov.u32 %r2, smem;\n    @%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r2], 16;\n"
     "    cp.async.bulk.commit_group;\n    ret;", "bulk copies .* still reading shared memory"),
])
def test_exit_with_unfinished_synchronisation_is_reported(body, message):
    prog = kernel("""
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p1, %r0, 0;
""" + body, shared=MBAR + ".extern .shared .align 1024 .b8 smem[];\n")
    with pytest.raises(emu.ProtocolError, match=message):
        prog.launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(4, np.uint32)])


def test_wgmma_issued_by_part_of_a_warpgroup_is_reported():
    # wgmma.mma_async is .sync.aligned over the warpgroup's 128 threads: here only warp 0 issues it.
    prog = kernel("""
    mov.u32 %r0, %tid.x;
    setp.ge.u32 %p1, %r0, 32;
    @%p1 bra DONE;
    mov.u64 %rd2, 0x4000004000010040;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd2, %rd2, 0, 1, 1, 0, 0;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
DONE:
    ret;
""", shared=".extern .shared .align 1024 .b8 smem[];\n")
    with pytest.raises(emu.ProtocolError, match=r"executed \[1, 0, 0, 0\] wgmma.mma_async"):
        prog.launch("k", block=(128, 1, 1), smem_bytes=16384, args=[None])
    # An operand beyond shared memory is a fault located at the wgmma that read it.
    with pytest.raises(emu.MemoryFault, match=r"line \d+: wgmma.mma_async.* \(warp 0 of CTA .*outside shared memory"):
        prog.launch("k", block=(128, 1, 1), smem_bytes=4096, args=[None])


def test_trap_is_an_emulation_error_naming_the_line():
    ptx = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .pred %p1;
  .reg .b32 %r1;
  mov.u32 %r1, %tid.x;
  setp.eq.u32 %p1, %r1, 5;
  @%p1 trap;
  ret;
}
"""
    with pytest.raises(emu.Trap, match="line 10"):
        emu.load_ptx(ptx).launch("k", grid=(1, 1, 1), block=(32, 1, 1), args=[None])
    assert issubclass(emu.Trap, emu.EmulationError)


BULK = ".extern .shared .align 1024 .b8 smem[];\n.shared .align 8 .b8 bar[8];\n"


def test_writing_a_bulk_store_source_before_its_wait_group_read_is_a_data_race():
    # PTX ISA cp.async.bulk.wait_group.read: the source of a bulk store may be reused only after the wait
    # retires its group. The copy may have read it already (seed-dependent), so the emulator reports the
    # write itself, naming the store and the wait that is missing.
    prog = kernel("""
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    mov.u32 %r2, smem;
    st.shared.v4.u32 [%r2], {1, 1, 1, 1};
    fence.proxy.async.shared::cta;
    cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r2], 16;
    cp.async.bulk.commit_group;
    st.shared.u32 [%r2+12], 7;
    cp.async.bulk.wait_group 0;
DONE:
    ret;
""", shared=BULK)
    for seed in range(5):
        with pytest.raises(emu.ProtocolError) as info:
            prog.launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(4, np.uint32)], seed=seed)
        message = str(info.value)
        assert "line 25: st.shared.u32" in message and "the bulk store at line 23" in message, message
        assert "may still read" in message and "cp.async.bulk.wait_group.read" in message, message


def test_a_load_into_bytes_another_load_still_writes_is_a_data_race():
    # Two bulk copies into the same shared bytes, the second issued before the first landed: the
    # memory model orders neither write, so the destination's final value is undefined.
    prog = kernel("""
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    mbarrier.init.shared.b64 [bar], 1;
    mbarrier.arrive.expect_tx.shared.b64 %rd5, [bar], 32;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [smem], [%rd1], 16, [bar];
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [smem], [%rd1], 16, [bar];
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
    @!%p2 bra WAIT;
DONE:
    ret;
""", shared=BULK)
    with pytest.raises(emu.ProtocolError) as info:
        prog.launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(4, np.uint32)])
    message = str(info.value)
    assert "line 23: cp.async.bulk" in message and "the bulk copy at line 22" in message, message
    assert "may still write" in message and "wait on the copy's mbarrier first" in message, message


CLUSTER_BODY = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r2, bar;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra INIT;
    mbarrier.init.shared.b64 [bar], 1;
INIT:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    setp.ne.u32 %p2, %r1, 1;
    or.pred %p3, %p1, %p2;
    @%p3 bra WAIT;
    mapa.shared::cluster.u32 %r3, %r2, 0;      // CTA 1 arrives on CTA 0's barrier
    {REMOTE}
WAIT:
    setp.ne.u32 %p4, %r1, 0;
    @%p4 bra DONE;
SPIN:
    mbarrier.try_wait.parity.shared.b64 %p5, [bar], 0;
    @!%p5 bra SPIN;
DONE:
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    @!%p1 st.global.u32 [%rd3], %r2;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
"""


def test_cluster_windows_mapa_and_a_remote_arrive():
    # PTX ISA: a CTA's shared::cta window lies inside the cluster's shared::cluster window (the emulator
    # puts rank r's at r << 24, as sm_90/sm_100 do); mapa maps an address to another rank's window; an
    # mbarrier.arrive.shared::cluster on it arrives on that CTA's barrier.
    prog = kernel(CLUSTER_BODY.replace("{REMOTE}", "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r3];"),
                  shared=MBAR)
    for seed in range(4):
        out = np.zeros(2, np.uint32)
        prog.launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[out], seed=seed)
        assert out[1] == out[0] | (1 << 24), [hex(x) for x in out]  # the same variable in rank 1's window
    with pytest.raises(emu.Deadlock):  # without the remote arrive CTA 0 waits forever
        prog_without = kernel(CLUSTER_BODY.replace("{REMOTE}", ""), shared=MBAR)
        prog_without.launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[np.zeros(2, np.uint32)])


def test_a_shared_cta_access_to_another_ctas_window_is_a_fault():
    prog = kernel(CLUSTER_BODY.replace("{REMOTE}", "ld.shared.u32 %r4, [%r3];"), shared=MBAR)
    with pytest.raises(emu.MemoryFault, match=r"shared address 0x[0-9a-f]+ is not in this CTA's window \(rank 1\); "
                                              r"another CTA's shared memory is reached through shared::cluster"):
        prog.launch("k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[np.zeros(2, np.uint32)])


@pytest.mark.parametrize("remote, error, text", [
    # mapa to a rank the cluster does not have
    ("mapa.shared::cluster.u32 %r5, %r2, 2;", emu.ProtocolError, "mapa rank must be below the cluster's 2 CTA"),
    # a shared::cta mbarrier operation on another CTA's window
    ("mbarrier.arrive.shared.b64 %rd5, [%r3];", emu.ProtocolError, "is not in this CTA's window"),
    # a shared::cluster address naming rank 3 of a 2-CTA cluster
    ("or.b32 %r6, %r2, 0x3000000;\n    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r6];",
     emu.ProtocolError, "names CTA rank 3, but the cluster has 2 CTA"),
    # other mbarrier operations through shared::cluster are not modelled
    ("mbarrier.try_wait.parity.shared::cluster.b64 %p6, [%r3], 0;", emu.Unsupported, "for arrive"),
])
def test_cluster_address_errors(remote, error, text):
    with pytest.raises(error, match=text):
        kernel(CLUSTER_BODY.replace("{REMOTE}", remote), shared=MBAR).launch(
            "k", grid=(2, 1, 1), cluster=(2, 1, 1), block=(32, 1, 1), args=[np.zeros(2, np.uint32)])
