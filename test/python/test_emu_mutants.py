"""The emulator catches a missing synchronisation: a CI-sized slice of bench/emu_mutants.py (the whole
study, every kernel and kind of synchronisation: docs/emulator-mutants.md).

The sm_90a GEMM (256x256x256 with the residual C; one persistent CTA takes both 128x256 tiles, so
every A/B stage and epilogue buffer is reused) is built with fa4-compile into a temporary folder, and
mutants are made by editing its PTX, each removing one synchronisation in place:

* a consumer warpgroup's mbarrier wait for a full A/B stage, made to succeed at once (4 sites: two
  warpgroups, each with a wait for the first K block and one in the K loop);
* a ``wgmma.wait_group`` deleted (4 sites: per warpgroup, ``1`` in the K loop, which must retire the
  previous stage's MMAs before releasing it, and ``0`` before the epilogue reads the accumulator);
* a TMA-store drain (``cp.async.bulk.wait_group.read``) of the epilogue deleted: the first of the path
  with C and the first of the path without C (which only the has_c=0 launch runs).

Each must be detected (an EmulationError or a result outside the tolerance) under some scheduler seed
in 0..19, and the unmutated kernel must pass every seed up to the detecting one. The same for the
sm_100a GEMM (issue 21; 512x256x256, four tiles): a deleted ``tcgen05.commit``, a deleted
``tcgen05.fence::after_thread_sync`` before the first MMA of a stage and a deleted
``tcgen05.fence::before_thread_sync`` before the epilogue hands the accumulator back (the race checks
report both fences: docs/emulator.md, "Race detection").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fa4_mlir import emu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import emu_mutants as M  # noqa: E402

SEEDS = 20


@pytest.fixture(scope="module")
def gemm(tmp_path_factory):
    case = M.gemm_case(str(tmp_path_factory.mktemp("gemm")))
    return case, M.mutants(case), _Unmutated(case)


class _Unmutated:
    """The unmutated GEMM's outcome per launch and seed, each run once for the whole module."""

    def __init__(self, case):
        self.case, self.program, self.outcomes = case, emu.load_ptx(case.ptx), {}

    def assert_passes(self, seeds, variant: int = 0) -> None:
        for seed in seeds:
            if (variant, seed) not in self.outcomes:
                self.outcomes[variant, seed] = M.run_once(self.case, self.program, seed, variant=variant)
            out = self.outcomes[variant, seed]
            assert not out.detected, f"the unmutated GEMM fails under seed {seed} (launch {variant}): {out.how}"


def _detecting_seed(case, mutant, variant: int = 0) -> tuple[int | None, str]:
    program = emu.load_ptx(mutant.ptx)
    for seed in range(SEEDS):
        out = M.run_once(case, program, seed, variant=variant)
        if out.detected:
            assert "CRASH" not in out.how and not out.how.startswith("hang"), f"{mutant.ident}: {out.how}"
            return seed, out.how
    return None, out.how


def _detected(case, mutant, variant: int = 0) -> tuple[int, str]:
    seed, how = _detecting_seed(case, mutant, variant)
    assert seed is not None, (f"line {mutant.line} ({mutant.text}) -> {mutant.replacement}: no seed in "
                              f"0..{SEEDS - 1} detects the missing synchronisation ({how})")
    return seed, how


def _consumer_stage_waits(case, mutants):
    """The consumers' waits for a full A/B stage: the mbarrier waits a wgmma.fence follows."""
    lines = case.ptx.split("\n")
    return [m for m in mutants if m.kind == "mbarrier wait"
            and any("wgmma.fence" in line for line in lines[m.line:m.line + 8])]


def test_each_mutant_removes_one_synchronisation(gemm):
    case, mutants, _ = gemm
    original = case.ptx.split("\n")
    for m in mutants:
        changed = [i for i, (a, b) in enumerate(zip(original, m.ptx.split("\n"))) if a != b]
        assert changed == [m.line - 1] and len(m.ptx.split("\n")) == len(original), m.ident
    waits = _consumer_stage_waits(case, mutants)
    assert len(waits) == 4, [m.line for m in waits]
    assert "setp.eq.u32 P1, 0, 0;" in waits[0].ptx.split("\n")[waits[0].line - 1]
    deleted = [m for m in mutants if m.kind == "wgmma.wait_group deleted"]
    assert sorted(m.text.split()[-1] for m in deleted) == ["0;", "0;", "1;", "1;"], [m.text for m in deleted]
    assert all(f"// mutant: removed {m.text}" in m.ptx for m in deleted)


def test_a_missing_mbarrier_wait_for_a_full_stage_is_detected(gemm):
    case, mutants, unmutated = gemm
    for m in _consumer_stage_waits(case, mutants):
        seed, how = _detected(case, m)
        unmutated.assert_passes(range(seed + 1))


@pytest.mark.parametrize("n", [0, 1])
def test_a_missing_wgmma_wait_group_is_detected(gemm, n):
    case, mutants, unmutated = gemm
    deleted = [m for m in mutants if m.kind == "wgmma.wait_group deleted" and m.text.split()[-1] == f"{n};"]
    for m in deleted:
        seed, how = _detected(case, m)
        if n == 0:
            # The epilogue reads an accumulator register a wgmma still owns: undefined in the ISA.
            assert how.startswith("ProtocolError") and "while a wgmma.mma_async still writes it" in how, how
        else:
            # The stage is released while its MMAs are unretired; the producer's next TMA load into it is
            # a data race on the wgmma's shared operands, reported whatever the timing.
            assert how.startswith("ProtocolError") and "that the wgmma.mma_async at line" in how, how
        unmutated.assert_passes(range(seed + 1))


def test_a_missing_tma_store_drain_is_detected(gemm):
    # The next sub-tile's st.shared overwrites a staging buffer whose TMA store no wait_group.read has
    # retired: a data race on the store's source, reported whatever the timing. The first drain (in PTX
    # order) of each epilogue path: with C (has_c=1) and without (has_c=0, which the C launch never runs).
    case, mutants, unmutated = gemm
    drains = [m for m in mutants if m.kind == "bulk wait_group deleted"]
    assert len(drains) == 18, [m.line for m in drains]
    tried = {}
    for m in drains:
        variant, seed, how = 0, 0, M.run_once(case, emu.load_ptx(m.ptx), 0).how
        if not how.startswith("ProtocolError"):  # seed 0 missed it: is the line on the path without C?
            variant = 0 if M.probe_reached(case, m.line) else 1
            if variant in tried:
                continue
            seed, how = _detected(case, m, variant)
        assert how.startswith("ProtocolError") and "that the TMA store at line" in how, f"line {m.line}: {how}"
        unmutated.assert_passes(range(seed + 1), variant)
        tried[variant] = m.line
        if len(tried) == 2:
            break
    assert set(tried) == {0, 1}, tried


@pytest.fixture(scope="module")
def gemm_sm100(tmp_path_factory):
    M.TARGET = "sm_100a"
    try:  # four tiles: both TMEM accumulator stages are reused, so their hand-backs matter
        case = M.gemm_case(str(tmp_path_factory.mktemp("gemm100")), m=512)
    finally:
        M.TARGET = "sm_90a"
    return case, M.mutants(case), _Unmutated(case)


def _handoff_fence(case, m) -> bool:
    """Is ``m`` the before-fence right before an mbarrier arrive (the epilogue handing the accumulator back)?"""
    return "mbarrier.arrive" in case.ptx.split("\n")[m.line]


@pytest.mark.parametrize("kind, pick, expect", [
    # The MMA warp's commit is the only arrive on the stage-empty / accumulator-full barrier: without it
    # the waiting producer or epilogue never proceeds.
    ("tcgen05.commit", lambda case, m: True, "Deadlock"),
    # A deleted tcgen05.wait::ld is not listed: using a tcgen05.ld result without it is defined (PTX ISA
    # 9.7.16.6.4.5, a true register dependency; CuTe DSL's GEMMs do it), and the race it leaves, a TMEM
    # write passing the load, needs the accumulator to be rewritten before the warp's next wait::ld, which
    # the epilogue never allows: a later wait::ld retires each tile's loads before it hands the stage back
    # (the study's equivalent mutants; test_emu_tcgen05 covers that race).
    # The MMA warp's first tcgen05.mma after its wait for a full A/B stage: without the after-fence the
    # MMA is not ordered after the wait that orders the TMA load (race checks, docs/emulator.md).
    ("tcgen05.fence::after_thread_sync", lambda case, m: m.ordinal == 1,
     "executed no tcgen05.fence::after_thread_sync after the mbarrier wait that orders the load"),
    # The epilogue's last tcgen05.ld of a tile, then the accumulator-empty arrive: without the
    # before-fence the MMA warp's next MMA into that stage is not ordered after the load (a WAR race).
    ("tcgen05.fence::before_thread_sync", _handoff_fence,
     "executed no tcgen05.fence::before_thread_sync between it and the barrier or arrive that orders it"),
])
def test_sm100a_missing_commit_or_fence_is_detected(gemm_sm100, kind, pick, expect):
    case, mutants, unmutated = gemm_sm100
    sites = [m for m in mutants if m.kind == kind and pick(case, m)]
    assert sites, f"the sm_100a GEMM has no {kind}"
    for m in sites[:2 if kind == "tcgen05.commit" else 1]:  # a fence's first site is on the launch's path
        seed, how = _detected(case, m)
        assert expect in how, f"line {m.line}: {how}"
        unmutated.assert_passes(range(seed + 1))
