"""bench/ncu_stalls.py reads Nsight Compute's per-instruction export: the stall shares, the opcode mix and the
regions cut where the execution count changes, on a small export written here (two kernels, the columns ncu
names)."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import ncu_stalls  # noqa: E402

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_wait",'
          '"stall_no_inst","stall_selected","stall_wait (Not Issued)"')


def _export(rows_a, rows_b) -> list[str]:
    lines = ['"Kernel Name","attention",', HEADER]
    lines += [f'"0x{i:x}","{src}","{n}","{ex}","{w}","{ni}","{sel}","{w}"' for i, (src, n, ex, w, ni, sel)
              in enumerate(rows_a)]
    lines += ['"Kernel Name","peer_kernel",', HEADER]
    lines += [f'"0x{i:x}","{src}","{n}","{ex}","{w}","{ni}","{sel}","0"' for i, (src, n, ex, w, ni, sel)
              in enumerate(rows_b)]
    return lines


# (source, samples, executions, wait, no_inst, selected): a prologue run 10 times, a loop body run 1,000 times
OURS = [("      S2R R0, SR_TID.X", 4, "10", 2, 2, 0), ("@P0   BRA 0x10", 6, "10", 0, 6, 0),
        ("      FFMA R1, R2, R3, R4", 30, "1,000", 20, 0, 10), ("      MUFU.EX2 R5, R5", 60, "1,000", 30, 10, 20)]
PEER = [("      FADD R1, R2, R3", 10, "2,000", 5, 0, 5)]


def test_the_summary_counts_stalls_and_opcodes_per_kernel():
    kernels = ncu_stalls.parse(_export(OURS, PEER))
    assert list(kernels) == ["attention", "peer_kernel"]
    ours = ncu_stalls.summary(kernels["attention"])
    assert (ours["instructions"], ours["samples"], ours["executed"]) == (4, 100, 2020)
    assert ours["stalls"] == {"wait": 0.52, "selected": 0.30, "no_inst": 0.18}  # "(Not Issued)" left out
    assert ours["opcodes"] == {"FFMA": 1000, "MUFU": 1000, "S2R": 10, "BRA": 10}  # the @P0 guard skipped
    assert ncu_stalls.summary(kernels["peer_kernel"])["stalls"] == {"wait": 0.5, "selected": 0.5}


def test_a_second_kernel_of_the_same_name_is_kept_apart():
    """The op's fp8 and bf16 kernels are both "attention" (``bench/ncu_pair.py --dtype fp8 --peer bf16``): the
    second one's rows are ``attention#2``'s, not added to the first's."""
    lines = _export(OURS, PEER) + ['"Kernel Name","attention",', HEADER,
                                   '"0x0","      FADD R1, R2, R3","10","2,000","5","0","5","0"']
    kernels = ncu_stalls.parse(lines)
    assert list(kernels) == ["attention", "peer_kernel", "attention#2"]
    assert ncu_stalls.summary(kernels["attention"])["instructions"] == 4
    assert ncu_stalls.summary(kernels["attention#2"])["opcodes"] == {"FADD": 2000}


def test_regions_cut_where_the_execution_count_changes():
    rows = ncu_stalls.parse(_export(OURS, PEER))["attention"]
    got = [(r["first"], r["size"], r["executed"], r["share"]) for r in ncu_stalls.regions(rows)]
    assert got == [(0, 2, 10, 0.10), (2, 2, 1000, 0.90)]
    assert ncu_stalls.regions(rows)[0]["stalls"] == {"no_inst": 0.8, "wait": 0.2}
    assert [r["first"] for r in ncu_stalls.regions(rows, min_share=0.5)] == [2]


def test_the_cli_names_a_missing_kernel_and_a_file_that_is_not_an_export(tmp_path, capsys):
    export = tmp_path / "source.csv"
    export.write_text("\n".join(_export(OURS, PEER)) + "\n")
    assert ncu_stalls.main([str(export), "--regions", "attention"]) == 0
    assert "attention: 4 SASS instructions" in capsys.readouterr().out
    assert ncu_stalls.main([str(export), "--regions", "nothing"]) == 2
    assert "--regions must name a kernel of the file (attention, peer_kernel), got 'nothing'" in \
        capsys.readouterr().err
    export.write_text("not,an,export\n")
    with pytest.raises(SystemExit, match="no 'Kernel Name' line: the file must be ncu --page source --csv output"):
        ncu_stalls.main([str(export)])
