"""The sm_100a fp8 e4m3 attention forward in the PTX emulator (race checks on) against float64.

Each case runs the kernel (``fa4_mlir.torch.attention.launch`` on CPU tensors: the torch op's own
launch, with the Q-tile count chosen here) and checks, against ``reference.attention_fp8`` (float64 on
the dequantized inputs ``q * q_scale``, ``k * k_scale``, ``v * v_scale``):

* the bf16 output: max and rms errors at most twice those of ``reference.attention_fp8_scaled_yardstick`` (the
  same attention with P rounded to e4m3 as the kernel rounds it, exp2 bias included, and the logits
  formed in float32 as the kernel forms them), plus 1e-6 max|ref| (``reference.compare``). The yardstick
  is the precision the kernel's design allows: P in e4m3 (3 mantissa bits, relative error up to 2^-4)
  dominates; twice its error leaves room for the kernel's other roundings (the online maximum, fp32
  accumulation order, ex2.approx), as the bf16 tests do with their yardstick;
* the LSE: within ``reference.lse_tolerance`` (1e-3 of max|lse| + 1e-3).

Cases: head dims 64 and 128, 1Q and 2Q, causal and not, GQA (fused groups 4 and 8), odd lengths,
tensor-wise scales (floats folded into the softmax scale) and random per-token scales log-uniform in
[1e-3, 1e3]. A fixed covering design of 16 cases, each under one scheduler seed; CI runs a covering subset
of them (every kernel, every value and pair of values of the axes: ``ci_sample.covering``);
FA4_EMU_FULL_MATRIX=1 runs all of them under seeds 0, 1 and 2 and adds 8 more (batch 2, longer sequences).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ci_sample

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.torch.attention import Fp8Scales, _token_scale, launch
from fa4_mlir.torch.emulated import emulator

FULL = ci_sample.FULL
SEEDS = (0, 1, 2)
SCALE_RANGE = (1e-3, 1e3)  # per-token scales: log-uniform over this range
V_SCALE = 0.75

# (head_dim, num_q, causal, group, heads, seq_q, seq_k, per-token scales)
CASES = [
    (64, 2, False, 1, 1, 100, 257, False),
    (64, 2, True, 1, 2, 130, 211, True),
    (64, 1, False, 4, 4, 65, 300, True),
    (64, 1, True, 1, 1, 100, 257, False),
    (128, 2, False, 1, 1, 100, 257, True),
    (128, 2, True, 4, 4, 200, 130, False),
    (128, 1, False, 1, 2, 65, 257, False),
    (128, 1, True, 1, 1, 130, 200, True),
    (64, 2, False, 8, 8, 40, 100, False),
    (128, 2, False, 8, 8, 33, 96, True),
    (64, 1, True, 4, 4, 70, 70, True),
    (128, 1, False, 4, 4, 50, 385, True),
    (64, 2, True, 4, 8, 90, 96, False),
    (128, 2, True, 1, 1, 257, 257, True),
    (64, 1, False, 1, 1, 1, 1, True),
    (128, 1, True, 8, 8, 17, 300, False),
]
EXTRA = [
    (64, 2, False, 1, 2, 300, 600, True),
    (128, 2, True, 4, 8, 300, 400, True),
    (64, 1, True, 8, 16, 200, 513, False),
    (128, 1, False, 1, 1, 129, 700, True),
    (64, 2, True, 1, 1, 513, 513, False),
    (128, 2, False, 4, 4, 128, 1024, True),
    (64, 1, False, 4, 8, 300, 64, True),
    (128, 1, True, 1, 2, 256, 384, False),
]
_kernels: dict = {}


def _log_uniform(rng: np.random.Generator, shape) -> np.ndarray:
    lo, hi = (math.log(x) for x in SCALE_RANGE)
    return np.exp(rng.uniform(lo, hi, shape))


def _fp8(rng: np.random.Generator, shape) -> torch.Tensor:
    return torch.from_numpy(rng.standard_normal(shape) * 3.0).to(torch.float8_e4m3fn)


def run_case(case, seed: int) -> dict:
    """Run one case in the emulator; returns the comparisons (and the emulated time in seconds)."""
    d, num_q, causal, group, heads, sq, sk, tokens = case
    batch = 2 if case in EXTRA else 1
    config = AttentionConfig(dtype="fp8_e4m3", head_dim=d, num_q=num_q, causal=causal, group=group,
                             token_scales=tokens)
    rng = np.random.default_rng([seed, *(int(x) for x in case)])
    hk = heads // group
    q, k, v = _fp8(rng, (batch, sq, heads, d)), _fp8(rng, (batch, sk, hk, d)), _fp8(rng, (batch, sk, hk, d))
    softmax_scale = 1.0 / math.sqrt(d)
    if tokens:
        qs, ks = _log_uniform(rng, (batch, heads, sq)), _log_uniform(rng, (batch, hk, sk))
        scales = Fp8Scales(V_SCALE, _token_scale(torch.from_numpy(qs), "q_scale", qs.shape),
                           _token_scale(torch.from_numpy(ks), "k_scale", ks.shape))
        kernel_scale = softmax_scale
    else:  # tensor-wise: folded into the softmax scale, as flash_attention does with float scales
        qs, ks = 0.05, 0.4
        scales = Fp8Scales(V_SCALE)
        kernel_scale = softmax_scale * qs * ks
    out = torch.full((batch, sq, heads, d), float("nan"), dtype=torch.bfloat16)
    lse = torch.full((batch, heads, sq), float("nan"), dtype=torch.float32)
    emu = emulator(target="sm_100a", seed=seed)
    if config not in _kernels:
        _kernels[config] = emu.load("attention", config)
    launch(config, _kernels[config], q, k, v, out, lse, kernel_scale, emulated=emu, scales=scales)
    qf, kf, vf = (t.to(torch.float64).numpy() for t in (q, k, v))
    ref, ref_lse = reference.attention_fp8(qf, kf, vf, causal, softmax_scale, qs, ks, V_SCALE)
    yard = reference.attention_fp8_scaled_yardstick(qf, kf, vf, causal, softmax_scale, qs, ks, V_SCALE)
    bits = out.view(torch.int16).numpy().view(np.uint16)
    return {"out": reference.compare(bits, ref, yard, "bf16"),
            "lse": (float(np.abs(lse.numpy() - ref_lse).max()), reference.lse_tolerance(ref_lse))}


def _id(case) -> str:
    d, nq, causal, group, heads, sq, sk, tokens = case
    return (f"d{d}-{nq}Q" + ("-causal" if causal else "") + (f"-g{group}" if group > 1 else "")
            + f"-h{heads}-{sq}x{sk}-" + ("token" if tokens else "tensor"))


def test_the_cases_cover_the_axes():
    assert len(CASES) >= 16
    assert {c[0] for c in CASES} == {64, 128} and {c[1] for c in CASES} == {1, 2}
    assert {c[2] for c in CASES} == {False, True} and {c[7] for c in CASES} == {False, True}
    assert any(c[3] > 1 for c in CASES) and any(c[5] % 2 or c[6] % 2 for c in CASES)
    for d in (64, 128):  # every fp8 kernel (head dim x Q tiles x scales) runs
        assert {(c[1], c[7]) for c in CASES if c[0] == d} == {(1, False), (1, True), (2, False), (2, True)}


def _features(case) -> dict:
    """A case's axes, and its kernel (head dim, Q tiles, scales: one compile each)."""
    d, nq, causal, group, _, _, _, tokens = case
    return {"head_dim": d, "num_q": nq, "causal": causal, "group": group, "tokens": tokens, "kernel": (d, nq, tokens)}


# CI: a covering subset under one seed; FA4_EMU_FULL_MATRIX=1: every case under all three, and EXTRA
CI_CASES = ci_sample.covering([_features(c) for c in CASES], pairs=("head_dim", "num_q", "causal", "group", "tokens"))
ACTIVE = CASES + (EXTRA if FULL else [])
SELECTED = ci_sample.in_ci(list(enumerate(ACTIVE)), CI_CASES + list(range(len(CASES), len(ACTIVE))))


@pytest.mark.parametrize("index, case", SELECTED, ids=[_id(c) for c in ACTIVE])
def test_fp8_attention_in_the_emulator(index, case):
    for seed in SEEDS if FULL else (SEEDS[index % len(SEEDS)],):
        checks = run_case(case, seed)
        out = checks["out"]
        assert out.unwritten == 0 and out.ok, f"seed {seed}: {out.summary()}"
        err, tol = checks["lse"]
        assert err <= tol, f"seed {seed}: lse error {err:.3g} > {tol:.3g}"


def test_the_torch_op_runs_fp8_in_the_emulator():
    """``fa4_mlir.torch.flash_attention`` on fp8 CPU tensors: a per-token q_scale tensor with a float
    k_scale (broadcast to per-token scales), the bf16 output and the LSE against float64."""
    import fa4_mlir.torch

    rng = np.random.default_rng(7)
    q, k, v = _fp8(rng, (1, 70, 2, 64)), _fp8(rng, (1, 150, 2, 64)), _fp8(rng, (1, 150, 2, 64))
    qs = _log_uniform(rng, (1, 2, 70))
    with emulator(target="sm_100a", seed=1):
        out, lse = fa4_mlir.torch.flash_attention(q, k, v, causal=True, q_scale=torch.from_numpy(qs), k_scale=0.5,
                                                  v_scale=V_SCALE, return_lse=True)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    qf, kf, vf = (t.to(torch.float64).numpy() for t in (q, k, v))
    ref, ref_lse = reference.attention_fp8(qf, kf, vf, True, 0.125, qs, 0.5, V_SCALE)
    yard = reference.attention_fp8_scaled_yardstick(qf, kf, vf, True, 0.125, qs, 0.5, V_SCALE)
    check = reference.compare(out.view(torch.int16).numpy().view(np.uint16), ref, yard, "bf16")
    assert check.ok, check.summary()
    assert float(np.abs(lse.numpy() - ref_lse).max()) <= reference.lse_tolerance(ref_lse)
