"""fa4.debug_check from the DSL (``Kernel.debug_check``): a debug build prints the message with its values
and traps (shown in the PTX emulator), a release build has no trace of it (its PTX is the kernel's without
the check), both assemble with ptxas for sm_90a and sm_100a, and bad checks fail at the author's line."""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir import dsl, emu
from fa4_mlir._mlir import ir
from fa4_mlir.core.compiler import compile_kernel

DEBUG_MS = 100  # a debug build: barrier waits trap after 100 ms, and debug checks are compiled in
LANES = 32


def _kernel(target: str, checks: bool = True):
    """out[t] = t + base for the 32 threads of a one-warp role, checked in debug builds: the entry must be
    < limit (i32 values), its 64-bit key (entry << 32 | t) must not be the poisoned one (i64 values),
    and, in the lower half of the warp only (a per-thread branch), the entry must not be 1000. The named
    barrier makes the protocol verifier check the kernel (it skips the checks: no barrier effect)."""
    k = dsl.Kernel("checked", target, num_warps=1)
    k.ptr("out", doc="out[32] i32")
    k.i32("base", doc="added to the thread index")
    k.i32("limit", doc="bound of the entries")
    k.i32("poison", doc="the entry whose key traps")
    with k.body() as arg:
        with k.role("main", warps=[0]):
            t = dsl.tid_x()
            entry = t + arg.base
            if checks:
                k.debug_check(entry < arg.limit, "fa4 debug: entry out of range: thread %u, entry %d "
                              "(limit %d)", t, entry, arg.limit)
                i64 = ir.IntegerType.get_signless(64)
                high = dsl.arith.shli(dsl.arith.extui(i64, entry.value), dsl.arith.constant(i64, 32))
                key = dsl.arith.ori(high, dsl.arith.extui(i64, t.value))
                poisoned = dsl.arith.cmpi(dsl.arith.CmpIPredicate.ne, entry.value, arg.poison.value)
                k.debug_check(poisoned, "fa4 debug: poisoned key 0x%lx (%lu)", key, key)
                with k.if_(t < LANES // 2):
                    k.debug_check(entry != 1000, "fa4 debug: entry 1000 in thread %u", t)
            dsl.fa4.named_barrier(sym_name="warp", threads=LANES)  # a protocol op: fa4-verify-protocol runs
            dsl.llvm.store(entry.value, dsl.element_ptr(arg.out, t, dsl.i32()))
    return k.source(grid="(1, 1, 1)")


def _run(ptx: str, base: int, limit: int = 1 << 30, poison: int = 1 << 31) -> np.ndarray:
    out = np.full(LANES, -1, np.int32)
    emu.load_ptx(ptx).launch("checked", block=(LANES, 1, 1), args=[out, base, limit, poison])
    return out


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_debug_builds_print_and_trap_release_builds_have_no_trace(target):
    debug = compile_kernel(_kernel(target), debug_timeout_ms=DEBUG_MS)  # through ptxas (stage cubin)
    release = compile_kernel(_kernel(target))
    unchecked = compile_kernel(_kernel(target, checks=False))
    assert debug.cubin and release.cubin and unchecked.cubin
    assert release.ptx == unchecked.ptx
    assert "vprintf" not in release.ptx and "trap;" not in release.ptx
    assert debug.ptx.count("call.uni (retval0), vprintf") == 3 and debug.ptx.count("trap;") == 3

    # The checks hold: every build runs through.
    for build in (debug, release):
        assert list(_run(build.ptx, base=0)) == list(range(LANES))

    # Base 10: the entries of threads 22..31 (32..41) reach the limit 32; they print, then the warp traps.
    first = r"fa4 debug: entry out of range: thread 22, entry 32 \(limit 32\)\n"
    with pytest.raises(emu.Trap, match=r"executed trap; the kernel printed before it:\n" + first) as trap:
        _run(debug.ptx, base=10, limit=32)
    assert trap.value.output == [f"fa4 debug: entry out of range: thread {t}, entry {t + 10} (limit 32)\n"
                                 for t in range(22, LANES)]
    # i64 values: the poisoned entry's thread prints its 64-bit key.
    with pytest.raises(emu.Trap) as trap:
        _run(debug.ptx, base=5, poison=9)
    assert trap.value.output == ["fa4 debug: poisoned key 0x900000004 (38654705668)\n"]
    # A check inside a per-thread branch: only the lower half of the warp checks.
    assert list(_run(debug.ptx, base=1000 - 20)) == list(range(980, 980 + LANES))  # thread 20 skips it
    with pytest.raises(emu.Trap) as trap:
        _run(debug.ptx, base=1000 - 3)
    assert trap.value.output == ["fa4 debug: entry 1000 in thread 3\n"]

    # The release build ignores every violated check.
    assert list(_run(release.ptx, base=10, limit=32)) == list(range(10, 10 + LANES))
    assert list(_run(release.ptx, base=5, poison=9)) == list(range(5, 5 + LANES))


def test_bad_checks_fail_where_the_kernel_states_them():
    k = dsl.Kernel("bad", "sm_90a", num_warps=1)
    k.i32("n")
    with pytest.raises(ValueError, match=r"debug_check message must have one conversion per value \(1\), "
                                         r"got 2 in 'n %d of %d'"):
        with k.body() as arg:
            k.debug_check(arg.n < 4, "n %d of %d", arg.n)
    k = dsl.Kernel("bad", "sm_90a", num_warps=1)
    k.i32("n")
    with pytest.raises(TypeError, match=r"debug_check condition must be an i1 \(a comparison\), got i32"):
        with k.body() as arg:
            k.debug_check(arg.n, "n %d", arg.n)
