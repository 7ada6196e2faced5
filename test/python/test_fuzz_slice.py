"""The CI slice of the input fuzzer (test/fuzz/fuzz_inputs.py, issue 19), and the fuzzer's own checks.

The slice runs a fixed seed over a few hundred inputs (IR mutants through fa4-verify,
fa4-verify-protocol and fa4-compile --emit ptx; fa4-compile and fa4-layout command lines) and fails on
any traceback, abort or hang. The full run (>= 2000 inputs) is on demand; docs/fuzzing.md has its
numbers and the command.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ))

import fuzz_inputs  # noqa: E402
import fuzz_runner  # noqa: E402

# 250 inputs took about 70 s in the CI suite (two workers on two cores, 2026-11-27), 150 about 60 s; 100 keep
# every kind of input (the full run is docs/fuzzing.md's)
SLICE_SEED, SLICE_COUNT = 19, 100


def test_same_seed_same_inputs():
    first = [fuzz_inputs.make_case(7, i).digest() for i in range(40)]
    assert first == [fuzz_inputs.make_case(7, i).digest() for i in range(40)]
    assert first != [fuzz_inputs.make_case(8, i).digest() for i in range(40)]
    kinds = {fuzz_inputs.make_case(7, i).kind for i in range(100)}
    assert kinds == {"ir", "compile-options", "layout-options"}


def test_a_case_does_not_depend_on_the_cases_before_it():
    alone = fuzz_inputs.make_case(3, 25)
    assert alone.digest() == [fuzz_inputs.make_case(3, i) for i in range(26)][25].digest()


@pytest.mark.parametrize("returncode, sig, timed_out, stderr, outcome", [
    (0, None, False, "", "ok"),
    (1, None, False, "in.mlir:3:5: error: 'fa4.smem_region' bytes must be >= 1, got 0\n", "error"),
    (2, None, False, "usage: fa4-opt ...\nfa4-opt: error: unrecognized arguments: --x\n", "error"),
    (1, None, False, "fa4-compile: error: internal error: TypeError: boom (rerun with FA4_TRACEBACK=1 ...)",
     "traceback"),
    (1, None, False, "Traceback (most recent call last):\n  File ...\nValueError: x\n", "traceback"),
    (1, None, False, "in.mlir: error: 'fa4.x' verifier failed with KeyError: 1; this is a bug in fa4-mlir", "traceback"),
    (1, None, False, "python: Alignment.h:70: Assertion `llvm::isPowerOf2_64(Value)' failed.\n"
                     "in.mlir: error: MLIR aborted (SIGABRT) while running stage 'ptx'", "abort"),
    (1, None, False, "LLVM ERROR: Cannot select: intrinsic\n", "abort"),
    (None, 6, False, "", "abort"),
    (None, 9, True, "", "hang"),
    (1, None, False, "", "unclean"),
    (3, None, False, "x: error: y", "unclean"),
    (1, None, False, "error: can't parse integer attribute -1 in nvvm.cluster_dim\n", "error"),
])
def test_runs_are_classified(returncode, sig, timed_out, stderr, outcome):
    assert fuzz_runner.classify(returncode, sig, timed_out, stderr) == outcome


def test_a_run_past_its_time_limit_is_a_hang_and_is_killed(tmp_path):
    fuzz_runner.preload()
    run = fuzz_runner.run("compile-options", "fa4-compile", ["attention", "--emit", "ptx", "-o", str(tmp_path)],
                          timeout=0.05, scratch=str(tmp_path))
    assert run.outcome == "hang" and run.seconds < 5


def test_slice(tmp_path):
    """The fixed CI slice: no traceback, abort or hang (the fuzzer exits 1 and prints reproducers)."""
    proc = subprocess.run([sys.executable, str(FUZZ / "fuzz_inputs.py"), "--seed", str(SLICE_SEED), "--count",
                           str(SLICE_COUNT), "--out", str(tmp_path)], capture_output=True, text=True,
                          errors="replace", timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert f"seed {SLICE_SEED}: {SLICE_COUNT} inputs" in proc.stdout
