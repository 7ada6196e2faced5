"""fa4-emu's fp8 e4m3 attention (``fa4_emu`` runs the kernel for ``--dtype fp8_e4m3``): the inputs it draws
(e4m3 with tensor-wise scales; on sm_90a V passed transposed, as the torch op passes it) and what the bf16 output
and LSE are checked against (float64 attention of the dequantized inputs, the target's fp8 yardstick). No torch."""

from __future__ import annotations

import math

import numpy as np

from fa4_mlir import reference

FP8_SCALES = (0.05, 0.4, 1.5)  # the tensor-wise q, k and v scales (the dequantized values are about N(0, 1))


def v_transposed_bits(v: np.ndarray, sum_rows: int = 0) -> np.ndarray:
    """V^T of e4m3 bytes ``v`` (B, Sk, Hk, D) as the sm_90a fp8 kernel reads it (the torch op's
    ``v_transposed`` in NumPy): (B, Hk, D + sum_rows, Sk'), Sk' = Sk rounded up to 16 (zeros past Sk), keys
    permuted within each 16 (position 4q + 2a + b holds key 8a + 2q + b), the last ``sum_rows`` rows e4m3 ones."""
    b, sk, hk, d = v.shape
    padded = -(-sk // 16) * 16
    raw = np.zeros((b, padded, hk, d), np.uint8)
    raw[:, :sk] = v
    t = raw.reshape(b, padded // 16, 2, 4, 2, hk, d).transpose(0, 5, 6, 1, 3, 2, 4).reshape(b, hk, d, padded)
    ones = np.full((b, hk, sum_rows, padded), reference.E4M3_ONE, np.uint8)
    return np.ascontiguousarray(np.concatenate([t, ones], axis=2))


def draw(config, shape, rng):
    """The inputs of one run: e4m3 q, k and v (N(0, 9) values rounded; ``v_op`` is what the kernel reads: V^T on
    sm_90a), the poisoned bf16 O, the NaN LSE, the softmax scale and ``FP8_SCALES``."""
    bsz, sq, sk, h = shape["batch"], shape["seq_q"], shape["seq_k"], shape["heads"]
    hk, dim = h // config.group, config.head_dim
    q, k, v = (reference.e4m3_bits(rng.standard_normal(s) * 3.0)
               for s in ((bsz, sq, h, dim), (bsz, sk, hk, dim), (bsz, sk, hk, dim)))
    o = np.full((bsz, sq, h, dim), reference.POISON["bf16"], np.uint16)
    lse = np.full((bsz, h, sq), np.nan, np.float32)
    v_op = v_transposed_bits(v, config.hopper.sum_rows) if config.target == "sm_90a" else v
    return q, k, v, v_op, o, lse, 1 / math.sqrt(dim), FP8_SCALES


def expected(config, q, k, v, scale: float, scales):
    """(float64 O, LSE, the target's fp8 yardstick of O, the LSE's limit or None for ``lse_tolerance``) of the
    dequantized inputs: sm_90a rounds P times 2^8 to e4m3 (at head dims 64 and 128 its row sums are of the rounded
    P, and so is its LSE); sm_100a forms the logits in float32 as its kernel does."""
    qs, ks, vs = scales
    causal = config.causal
    qf, kf, vf = (reference.dequantize(t, s) for t, s in ((q, qs), (k, ks), (v, vs)))
    ref, ref_lse = reference.attention(qf, kf, vf, causal, scale)
    if config.target != "sm_90a":
        yard = reference.attention_fp8_scaled_yardstick(*(reference.e4m3_values(t) for t in (q, k, v)), causal,
                                                        scale, qs, ks, vs)
        return ref, ref_lse, yard, None
    from fa4_mlir.kernels.attention.hopper_fp8 import P_BIAS

    rounded = bool(config.hopper.row_sums)
    yard = reference.attention_fp8_yardstick(qf, kf, vf, causal, scale, P_BIAS, rounded_sums=rounded)
    limit = reference.fp8_lse_limit(ref_lse, reference.attention_fp8_lse_yardstick(qf, kf, causal, scale, P_BIAS)) \
        if rounded else None
    return ref, ref_lse, yard, limit
