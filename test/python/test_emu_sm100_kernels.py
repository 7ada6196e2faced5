"""The shipped sm_100a kernels, executed: each compiles with fa4-compile --target sm_100a and runs in
the PTX emulator (tcgen05, tensor memory) on random inputs, compared with a float64 NumPy reference
under the GPU tests' error bounds (``fa4_mlir.reference``), with the emulator's race checks on.

No Blackwell GPU runs these; the emulator is the only machine that executes this PTX. The configs
cover 1Q and 2Q attention, head dims 64/96/128, bf16 and fp16, causal and not, GQA groups 1/4/8, odd
and unequal sequence lengths, the GEMM with both B layouts and odd shapes, and the copy pipeline.
(CTA pairs, cta_group::2, are not emulated yet.)
"""

from __future__ import annotations

import json

import pytest

from fa4_mlir.tools import fa4_emu

CASES = [
    ("copy-pipeline", "--shape", "256x128"),
    ("gemm", "--shape", "256x256x512"),
    ("gemm", "--shape", "200x264x136", "--b-major", "mn"),
    ("attention", "--shape", "1x128x256x1"),
    ("attention", "--num-q", "1", "--causal", "--shape", "1x100x300x2"),
    ("attention", "--dtype", "fp16", "--shape", "1x130x257x1"),
    ("attention", "--dtype", "fp16", "--causal", "--head-dim", "64", "--shape", "1x256x256x1"),
    ("attention", "--group", "4", "--shape", "1x128x200x4"),
    ("attention", "--group", "8", "--head-dim", "64", "--shape", "1x64x130x8"),
    ("attention", "--head-dim", "96", "--causal", "--shape", "1x200x140x1"),
]


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c) for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_sm100a_kernel_is_right_in_the_emulator(capsys, argv, seed):
    code = fa4_emu.main([*argv, "--target", "sm_100a", "--seed", str(seed), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err or out
    report = json.loads(out)
    assert report["target"] == "sm_100a" and report["ok"], report
    for name, check in report["checks"].items():
        assert check["ok"], (name, check)
        if "unwritten" in check:
            assert check["unwritten"] == 0, (name, check)  # every output element was written
