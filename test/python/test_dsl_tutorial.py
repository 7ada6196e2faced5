"""The fa4_mlir.dsl tutorial kernel (examples/row_center.py, docs/authoring.md): a user's kernel file
compiles for both targets through fa4-compile and runtime.load_file, passes the verifiers and ptxas,
and computes y = x - mean(x) per row in the PTX emulator; broken, it gets the protocol verifier's
witness in Python locations; a bad kernel file is a clear error."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from fa4_mlir import runtime
from fa4_mlir.dsl.loader import load_kernel_file
from fa4_mlir.errors import ConfigError
from fa4_mlir.runtime import GlobalTensor

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "row_center.py"


def _bf16(values: np.ndarray) -> np.ndarray:
    """float -> bf16 bit patterns, rounded to nearest even."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a"])
def test_the_tutorial_kernel_centres_rows_in_the_emulator(target):
    kernel = runtime.load_file(EXAMPLE, target=target, device="emulator")
    assert kernel.manifest["target"] == target and [p["name"] for p in kernel.params] == ["x", "y", "tiles"]
    for rows, ctas, seed in ((300, 2, 0), (128 * 5 + 7, 3, 1), (128, 1, 2)):
        rng = np.random.default_rng(seed)
        x = _bf16(rng.standard_normal((rows, 64)) * 4 + rng.standard_normal((rows, 1)) * 8)
        y = np.full((rows, 64), 0xFFFF, np.uint16)  # NaN: a row the kernel never writes shows
        tiles = -(-rows // 128)
        kernel.launch((min(ctas, tiles),), {"x": GlobalTensor.host(x, "bf16"), "y": GlobalTensor.host(y, "bf16"),
                                            "tiles": tiles}, seed=seed)
        xf = _float(x)
        want = xf - xf.mean(axis=1, keepdims=True)
        # bf16 rounding of the result (half an ulp: 2^-9 relative, 2^-8 with margin) plus the f32 row sum's
        # rounding (64 terms: 64 * 2^-24 of the sum of |x|, divided by 64 for the mean).
        bound = 2.0 ** -8 * np.abs(want) + 2.0 ** -22 * np.abs(xf).sum(axis=1, keepdims=True)
        err = np.abs(_float(y) - want)
        assert not np.isnan(err).any() and (err <= bound).all(), f"{target} {rows} rows: {np.max(err / bound):.3g} x"


def test_the_broken_tutorial_gets_the_protocol_witness_in_python_lines(tmp_path):
    # The consumer's release deleted: the producer's next acquire of the stage waits forever.
    lines = EXAMPLE.read_text().splitlines()
    broken = tmp_path / "row_center_broken.py"
    broken.write_text("\n".join(line for line in lines if "state.consumer_release()" not in line) + "\n")
    acquire = next(i for i, line in enumerate(broken.read_text().splitlines(), 1) if "state.producer_acquire()" in line)
    done = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", str(broken), "--target", "sm_90a",
                           "-o", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 1
    assert (f"{broken}:{acquire}:17: error: protocol error [deadlock]: producer waits at "
            f"fa4.pipeline_producer_acquire at {broken}:{acquire}:17 for empty[") in done.stderr, done.stderr
    assert f"note: witness: step" in done.stderr and f"fa4.pipeline_consumer_wait at {broken}:" in done.stderr


def test_a_bad_kernel_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="kernel file '.*nope.py' must exist, got no such file"):
        load_kernel_file(tmp_path / "nope.py", "sm_90a")
    cases = {
        "syntax.py": ("def build(target)\n", r"must import cleanly, got SyntaxError: .* at line 1"),
        "raises.py": ("import math\nx = 1\nmath.sqrt(-1)\n", r"must import cleanly, got ValueError: math domain error at line 3"),
        "nobuild.py": ("x = 1\n", r"must define build\(target\) returning its KernelSource \(fa4_mlir.dsl.Kernel.source\), "
                                  r"got no build function"),
        "fails.py": ("def build(target):\n    raise KeyError(target)\n",
                     r"build\('sm_90a'\) must return a KernelSource, got KeyError: 'sm_90a' at line 2"),
        "wrong.py": ("def build(target):\n    return 'module {}'\n",
                     r"build\('sm_90a'\) must return a KernelSource \(fa4_mlir.dsl.Kernel.source\), got str"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_kernel_file(path, "sm_90a")
    done = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", str(tmp_path / "nobuild.py")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith(f"fa4-compile: error: kernel file '{tmp_path / 'nobuild.py'}' "
                                                           f"must define build(target)"), done.stderr
