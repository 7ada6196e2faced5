"""The shipped sm_100a kernels, executed: each compiles with fa4-compile --target sm_100a and runs in
the PTX emulator (tcgen05, tensor memory) on random inputs, compared with a float64 NumPy reference
under the GPU tests' error bounds (``fa4_mlir.reference``), with the emulator's race checks on.

No Blackwell GPU runs these; the emulator is the only machine that executes this PTX. The configs
cover 1Q and 2Q attention, head dims 64/96/128, bf16 and fp16, causal and not, GQA groups 1/4/8, odd
and unequal sequence lengths, the GEMM with both B layouts and odd shapes, and the copy pipeline.
The GEMM also runs as a CTA pair (cta_group::2, clusters of two).
"""

from __future__ import annotations

import json

import pytest

import ci_sample

from fa4_mlir.tools import fa4_emu

CASES = [
    ("copy-pipeline", "--shape", "256x128"),
    ("gemm", "--shape", "256x256x512"),
    ("gemm", "--shape", "200x264x136", "--b-major", "mn"),
    ("gemm", "--cta-group", "2", "--tile", "256x256x64", "--shape", "512x256x512"),
    ("gemm", "--cta-group", "2", "--tile", "256x256x64", "--shape", "300x264x136", "--b-major", "mn"),
    ("attention", "--shape", "1x128x256x1"),
    ("attention", "--num-q", "1", "--causal", "--shape", "1x100x300x2"),
    ("attention", "--dtype", "fp16", "--shape", "1x130x257x1"),
    ("attention", "--dtype", "fp16", "--causal", "--head-dim", "64", "--shape", "1x256x256x1"),
    ("attention", "--group", "4", "--shape", "1x128x200x4"),
    ("attention", "--group", "8", "--head-dim", "64", "--shape", "1x64x130x8"),
    ("attention", "--head-dim", "96", "--causal", "--shape", "1x200x140x1"),
]


# CI: every other case (the kernel matrix, test_emu_sm100_matrix.py, runs these kernels too); FA4_EMU_FULL_MATRIX=1: all
@pytest.mark.parametrize("argv", ci_sample.in_ci(CASES, range(0, len(CASES), 2), one_arg=True),
                         ids=[" ".join(c) for c in CASES])
@pytest.mark.parametrize("seed", ci_sample.in_ci([0, 1], [0], one_arg=True))  # seed 1: FA4_EMU_FULL_MATRIX=1
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


@pytest.mark.parametrize("name", ["triton_matmul", "triton_matmul_128"])
def test_tritons_sm100a_matmul_runs_and_matches_numpy(name):
    # Third-party Blackwell PTX: Triton 3.9's tl.dot matmul compiled for GPUTarget("cuda", 100, 32)
    # (test/python/emu_ptx/generate.py --sm100a NAME) at two tile shapes: 64x64x64 (tcgen05.mma with
    # M = 64, data-path layout F) and 128x128x64 (M = 128); tcgen05.ld/st .16x32bx2, commit, TMEM alloc.
    # Same source, shapes and NumPy reference as the sm_90a fixtures; only the PTX differs.
    import pathlib
    import sys

    import numpy as np

    from fa4_mlir import emu

    here = pathlib.Path(__file__).resolve().parent / "emu_ptx"
    sys.path.insert(0, str(here))
    import reference

    fixture = json.loads((here / "kernels_sm100a.json").read_text())[name]
    text = (here / fixture["file"]).read_text()
    assert fixture["target"] == "sm_100a" and "tcgen05.mma.cta_group::1.kind::f16" in text
    program = emu.load_ptx(text)
    for seed in range(3):
        _, _, _, args, check = reference.case(name, np.random.default_rng(100 + seed))
        # Race checks on, with thread syncs performing the tcgen05 fences: Triton 3.9 emits none (test below).
        program.launch(fixture["entry"], grid=tuple(fixture["grid"]), block=tuple(fixture["block"]),
                       smem_bytes=fixture["smem_bytes"], args=args, seed=seed, race_checks="implicit-tcgen05-fences")
        check(args)


@pytest.mark.parametrize("name", ["triton_matmul", "triton_matmul_128"])
def test_the_race_checks_report_tritons_missing_tcgen05_fences(name):
    # Triton 3.9's sm_100a matmul zeroes the accumulator with tcgen05.st (every warp), waits with
    # tcgen05.wait::st, passes bar.sync 0 and lets one thread issue tcgen05.mma over those cells, with no
    # tcgen05.fence::before_thread_sync / after_thread_sync around the barrier (the PTX file has no tcgen05
    # fence at all). The ISA's pattern for a tcgen05.st in one thread and an MMA in another is st;
    # wait::st; fence::before_thread_sync; sync | sync; fence::after_thread_sync; mma ("Memory Consistency
    # Model for 5th generation of TensorCore operations"), so the race checks report it (docs/emulator.md).
    import pathlib
    import sys

    import numpy as np

    from fa4_mlir import emu

    here = pathlib.Path(__file__).resolve().parent / "emu_ptx"
    sys.path.insert(0, str(here))
    import reference

    fixture = json.loads((here / "kernels_sm100a.json").read_text())[name]
    text = (here / fixture["file"]).read_text()
    assert "tcgen05.fence" not in text
    _, _, _, args, _ = reference.case(name, np.random.default_rng(100))
    with pytest.raises(emu.ProtocolError, match=r"tcgen05.mma.* writes tensor memory .* that line \d+: @%p\d+ "
                                                r"tcgen05.st.* executed no tcgen05.fence::before_thread_sync"):
        emu.load_ptx(text).launch(fixture["entry"], grid=tuple(fixture["grid"]), block=tuple(fixture["block"]),
                                  smem_bytes=fixture["smem_bytes"], args=args, seed=0)


def test_tritons_sm100a_fp8_matmul_runs_and_matches_numpy():
    # Triton 3.9's tl.dot on float8e4nv (A) x float8e5 (B) compiled for GPUTarget("cuda", 100, 32)
    # (generate.py --sm100a triton_matmul_fp8): tcgen05.mma .kind::f8f6f4 with mixed formats (instruction
    # descriptor A format E4M3, B format E5M2) and an N-major B, 128x128x128 tiles, masked edges; against
    # the float64 product of the dequantised inputs (reference.fp8_bits_to_f64), seeds 0-2.
    import pathlib
    import sys

    import numpy as np

    from fa4_mlir import emu

    here = pathlib.Path(__file__).resolve().parent / "emu_ptx"
    sys.path.insert(0, str(here))
    import reference

    fixture = json.loads((here / "kernels_sm100a.json").read_text())["triton_matmul_fp8"]
    text = (here / fixture["file"]).read_text()
    assert fixture["target"] == "sm_100a" and "tcgen05.mma.cta_group::1.kind::f8f6f4" in text
    program = emu.load_ptx(text)
    for seed in range(3):
        _, _, _, args, check = reference.case("triton_matmul_fp8", np.random.default_rng(100 + seed))
        # Thread syncs perform the tcgen05 fences (test_the_race_checks_report_tritons_missing...).
        program.launch(fixture["entry"], grid=tuple(fixture["grid"]), block=tuple(fixture["block"]),
                       smem_bytes=fixture["smem_bytes"], args=args, seed=seed, race_checks="implicit-tcgen05-fences")
        check(args)
