"""fa4-opt as a user runs it: a subprocess, with its exit code and stderr."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parents[1]
OPS = TESTS / "Dialect" / "FA4" / "ops.mlir"
INPUTS = TESTS / "fa4-opt" / "Inputs"


def fa4_opt(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_opt", *map(str, args)], input=stdin,
                          capture_output=True, text=True)


def test_round_trip_through_a_pipe_is_a_fixed_point():
    once = fa4_opt(OPS)
    assert once.returncode == 0, once.stderr
    twice = fa4_opt("-", stdin=once.stdout)
    assert twice.returncode == 0, twice.stderr
    assert twice.stdout == once.stdout
    assert once.stdout.count('"fa4.') >= 22  # every op kind appears


@pytest.mark.parametrize("args", [
    [INPUTS / "malformed.mlir"],
    [INPUTS / "invariant.mlir"],
    [INPUTS / "kernel.mlir", "-p", "no-such-pass"],
    [INPUTS / "kernel.mlir", "-p", "func.func(fa4-verify)"],
    [INPUTS / "kernel.mlir", "-p", "gpu-module-to-binary{format=offload}"],
    [INPUTS / "ptx80-sm100a.mlir", "-p", "gpu-module-to-binary{format=isa}"],
    [INPUTS / "missing.mlir"],
])
def test_bad_input_is_an_error_line_without_traceback(args):
    r = fa4_opt(*args)
    assert r.returncode == 1
    assert "error:" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_internal_errors_are_one_line_unless_asked(tmp_path, monkeypatch):
    # A directory as input makes open() fail with IsADirectoryError: a handled read error.
    r = fa4_opt(tmp_path)
    assert r.returncode == 1 and "cannot read input file" in r.stderr and "Traceback" not in r.stderr


def test_version_and_help():
    assert "MLIR 22.1.8" in fa4_opt("--version").stdout
    assert "--pass-pipeline" in fa4_opt("--help").stdout
