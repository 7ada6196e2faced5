"""The depth-256/512 pair-CTA attention kernel over a matrix of 24 configurations, each under scheduler seeds
0, 1 and 2 (FA4_EMU_FULL_MATRIX=1; CI runs a covering subset, ``ci_sample.covering``, the i-th under seed
i % 3), in the PTX emulator with the race checks on and compared with a float64 NumPy reference under the GPU tests'
bounds, O and the LSE. Issue 23's "Must show" 3.

Axes: head dims 256 and 512, causal and not, bf16 and fp16, GQA groups 1 and 4, batch 1 and 2, and
sequence lengths from {1, 63, 128, 129, 700, 2048} for seq_q and seq_k, mostly unequal (one key tile
and many, one query row and several CTA pairs). A group of 4 is only paired with short query lengths:
it packs 4 heads into a tile, so a long seq_q means many CTA pairs.
"""

from __future__ import annotations

import numpy as np
import pytest

import ci_sample

from fa4_mlir import runtime
from fa4_mlir.kernels.attention import AttentionConfig
from fa4_mlir.tools import fa4_emu

SEEDS = (0, 1, 2)
FULL = ci_sample.FULL
LENGTHS = (1, 63, 128, 129, 700, 2048)

# (head_dim, dtype, causal, group, batch, seq_q, seq_k)
CASES = [
    (256, "bf16", False, 1, 1, 1, 1), (512, "fp16", True, 1, 1, 1, 1),
    (256, "fp16", True, 4, 1, 63, 128), (512, "bf16", False, 4, 2, 63, 128),
    (256, "bf16", False, 1, 2, 128, 63), (512, "fp16", True, 1, 1, 128, 63),
    (256, "fp16", False, 4, 1, 129, 700), (512, "bf16", True, 1, 1, 129, 700),
    (256, "bf16", True, 1, 1, 700, 129), (512, "fp16", False, 1, 1, 700, 129),
    (256, "fp16", False, 1, 1, 2048, 63), (512, "bf16", True, 1, 1, 2048, 63),
    (256, "bf16", True, 1, 1, 63, 2048), (512, "fp16", False, 4, 1, 63, 2048),
    (256, "fp16", True, 4, 2, 128, 129), (512, "bf16", False, 1, 2, 128, 129),
    (256, "bf16", False, 4, 1, 129, 128), (512, "fp16", True, 4, 1, 129, 128),
    (256, "fp16", True, 1, 1, 700, 700), (512, "bf16", False, 1, 1, 700, 700),
    (256, "bf16", False, 4, 1, 1, 700), (512, "fp16", True, 1, 1, 1, 700),
    (256, "fp16", True, 1, 1, 700, 1), (512, "bf16", False, 1, 1, 700, 1),
]
_loaded: dict = {}


def _kernel(head_dim, dtype, causal, group):
    key = (head_dim, dtype, causal, group)
    if key not in _loaded:
        config = AttentionConfig(target="sm_100a", head_dim=head_dim, dtype=dtype, causal=causal, group=group)
        _loaded[key] = config, runtime.load("attention", config, device="emulator", debug=False)
    return _loaded[key]


def test_the_matrix_covers_the_issues_axes():
    assert len(CASES) >= 24
    assert {c[0] for c in CASES} == {256, 512} and {c[1] for c in CASES} == {"bf16", "fp16"}
    assert {c[2] for c in CASES} == {False, True} and {c[3] for c in CASES} == {1, 4}
    assert {c[5] for c in CASES} | {c[6] for c in CASES} == set(LENGTHS)
    assert sum(c[5] != c[6] for c in CASES) >= 20
    for depth in (256, 512):  # each head dim sees both causal modes, both dtypes and GQA
        mine = [c for c in CASES if c[0] == depth]
        assert {c[1] for c in mine} == {"bf16", "fp16"} and {c[2] for c in mine} == {False, True}
        assert 4 in {c[3] for c in mine}


# CI: every value of every axis, and every pair of the kernel's axes, under one seed (``ci_sample.covering``);
# FA4_EMU_FULL_MATRIX=1: every configuration under all three seeds
_AXES = ("head_dim", "dtype", "causal", "group", "batch", "seq_q", "seq_k")
CI_CASES = ci_sample.covering([dict(zip(_AXES, c)) for c in CASES], pairs=_AXES[:4])
SELECTED = ci_sample.in_ci(list(enumerate(CASES)), CI_CASES)


@pytest.mark.parametrize("index, case", SELECTED,
                         ids=[f"d{d}-{t}-{'causal' if c else 'full'}-g{g}-{b}x{sq}x{sk}"
                              for d, t, c, g, b, sq, sk in CASES])
def test_depth512_kernel_in_the_emulator(index, case):
    head_dim, dtype, causal, group, batch, seq_q, seq_k = case
    config, kernel = _kernel(head_dim, dtype, causal, group)
    shape = dict(batch=batch, seq_q=seq_q, seq_k=seq_k, heads=group * (2 if batch == 1 and seq_q <= 129 else 1))
    for seed in SEEDS if FULL else (SEEDS[index % len(SEEDS)],):
        _, checks = fa4_emu.RUNS["attention"](kernel, config, shape, np.random.default_rng(seed), seed)
        assert set(checks) == {"o", "lse"}
        bad = {name: c["summary"] for name, c in checks.items() if not c["ok"] or c.get("unwritten", 0)}
        assert not bad, f"seed {seed}: {bad}"
