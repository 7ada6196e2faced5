"""Every shipped sm_100a kernel over a matrix of 40 configurations, each under scheduler seeds 0, 1 and 2
(FA4_EMU_FULL_MATRIX=1; CI runs a covering subset of the configurations, ``ci_sample.covering``, the i-th under
seed i % 3),
executed in the PTX emulator (the race checks are always on) and compared with a float64 NumPy
reference under the GPU tests' bounds (``fa4_mlir.reference``). Issue 21's "Must show" 1.

Attention: 1Q and 2Q, head dims 64/96/128, bf16 and fp16, causal and not, GQA groups 1/4/8, odd and
unequal sequence lengths, with the LSE. GEMM with the residual: 1-CTA and CTA pair, K- and MN-major B,
beta 0 and 1, odd M/N/K. The copy pipeline. The configurations are a fixed covering design over those
axes (listed in the test ids).
"""

from __future__ import annotations

import numpy as np
import pytest

import ci_sample

from fa4_mlir import reference, runtime
from fa4_mlir.kernels.attention import AttentionConfig
from fa4_mlir.kernels.copy_pipeline import CopyPipelineConfig
from fa4_mlir.kernels.gemm import GemmConfig
from fa4_mlir.tools import fa4_emu

SEEDS = (0, 1, 2)
# CI runs a covering subset of the configurations, each under one of the seeds (the i-th under seed i % 3);
# FA4_EMU_FULL_MATRIX=1 runs all three on every configuration (issue 21's full matrix, on demand).
FULL = ci_sample.FULL
_SQ = (100, 128, 130, 200, 65)
_SK = (300, 130, 257, 96, 211)


def _attention_cases():
    cases = []
    for i in range(30):
        group = (1, 4, 8)[(i // 5) % 3]
        config = dict(num_q=(1, 2)[i % 2], head_dim=(64, 96, 128)[i % 3], dtype=("bf16", "fp16")[(i // 2) % 2],
                      causal=(i // 3) % 2 == 1, group=group)
        shape = dict(batch=1 + i % 2, seq_q=_SQ[i % 5], seq_k=_SK[(i // 2) % 5], heads=group * (1 + (i // 7) % 2))
        cases.append(("attention", config, shape))
    return cases


def _gemm_cases():
    cases = []
    for i, (pair, b_major, beta, shape) in enumerate([
            (False, "k", 1.0, (200, 264, 136)), (False, "mn", 0.0, (129, 136, 72)),
            (False, "k", 0.0, (256, 256, 512)), (False, "mn", 1.0, (77, 520, 200)),
            (True, "k", 1.0, (300, 264, 136)), (True, "mn", 0.0, (512, 256, 264)),
            (True, "k", 0.0, (257, 136, 64)), (True, "mn", 1.0, (256, 512, 136))]):
        config = dict(b_major=b_major, **(dict(cta_group=2, tile_m=256) if pair else {}))
        cases.append(("gemm", config, dict(m=shape[0], n=shape[1], k=shape[2], beta=beta)))
    return cases


CASES = _attention_cases() + _gemm_cases() + [
    ("copy-pipeline", dict(), dict(rows=256, cols=128)),
    ("copy-pipeline", dict(dtype="fp16"), dict(rows=200, cols=192)),
]
CONFIGS = {"attention": AttentionConfig, "gemm": GemmConfig, "copy-pipeline": CopyPipelineConfig}
_loaded: dict = {}


def _kernel(kind, options):
    key = (kind, tuple(sorted(options.items())))
    if key not in _loaded:
        config = CONFIGS[kind](target="sm_100a", **options)
        _loaded[key] = config, runtime.load(kind, config, device="emulator", debug=False)
    return _loaded[key]


def _run_gemm(kernel, config, shape, seed):
    rng = np.random.default_rng(seed)
    m, n, k, e = shape["m"], shape["n"], shape["k"], config.dtype
    a, b, c = (reference.random_bits(rng, s, e, 1.0) for s in ((m, k), (k, n), (m, n)))
    d = np.full((m, n), reference.POISON[e], np.uint16)
    b_mem = np.ascontiguousarray(b.T) if config.b_major == "k" else b
    fa4_emu.launch_gemm(kernel, config, a, b_mem, c, d, 0.75, shape["beta"], seed=seed)
    ref = reference.gemm_residual(*(reference.to_f64(t, e) for t in (a, b, c)), 0.75, shape["beta"])
    return {"d": reference.compare(d, ref, reference.gemm_yardstick(ref, e), e)}


def test_the_matrix_covers_the_issues_axes():
    att = [c for k, c, _ in CASES if k == "attention"]
    assert len(CASES) == 40
    assert {c["num_q"] for c in att} == {1, 2} and {c["head_dim"] for c in att} == {64, 96, 128}
    assert {c["dtype"] for c in att} == {"bf16", "fp16"} and {c["causal"] for c in att} == {False, True}
    assert {c["group"] for c in att} == {1, 4, 8}
    gemm = [(c, s) for k, c, s in CASES if k == "gemm"]
    assert {c.get("cta_group", 1) for c, _ in gemm} == {1, 2} and {c["b_major"] for c, _ in gemm} == {"k", "mn"}
    assert {s["beta"] for _, s in gemm} == {0.0, 1.0}


def _features(kind, options, shape) -> dict:
    """The axes a case varies: the kind, its config's options, and the GEMM's beta."""
    return {"kind": kind, **options, **({"beta": shape["beta"]} if kind == "gemm" else {})}


# CI: every value of every axis, and every pair of the attention tile's head dim, consumer count and mask
# (``ci_sample.covering``), under one seed (9 of 40 cases; every pair of every axis took 15); FA4_EMU_FULL_MATRIX=1:
# every configuration under all three
CI_CASES = ci_sample.covering([_features(*case) for case in CASES], pairs=("head_dim", "num_q", "causal"))
SELECTED = ci_sample.in_ci([(i, *case) for i, case in enumerate(CASES)], CI_CASES)


@pytest.mark.parametrize("index, kind, options, shape", SELECTED,
                         ids=[f"{k}-{'-'.join(f'{a}={b}' for a, b in o.items())}-{'x'.join(str(v) for v in s.values())}"
                              for k, o, s in CASES])
def test_sm100a_kernel_in_the_emulator(index, kind, options, shape):
    config, kernel = _kernel(kind, options)
    for seed in SEEDS if FULL else (SEEDS[index % len(SEEDS)],):
        if kind == "gemm":
            checks = _run_gemm(kernel, config, shape, seed)
            results = {name: (c.ok, c.summary()) for name, c in checks.items()}
        else:
            run_shape = shape if kind == "attention" else dict(rows=shape["rows"], cols=shape["cols"])
            _, checks = fa4_emu.RUNS[kind](kernel, config, run_shape, np.random.default_rng(seed), seed)
            results = {name: (c["ok"], c["summary"]) for name, c in checks.items()}
        bad = {name: summary for name, (ok, summary) in results.items() if not ok}
        assert not bad, f"seed {seed}: {bad}"
