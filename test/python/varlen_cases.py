"""Packed variable-length attention batches for the emulator tests of both targets' ``varlen`` kernels:
random lengths (empty sequences, Sq != Sk), the float64 reference, and the check of one run."""

from __future__ import annotations

import numpy as np

from fa4_mlir import reference


def prefix_sums(lengths) -> np.ndarray:
    """int32[B + 1]: 0, then the running sums of ``lengths``."""
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def packed_batch(rng: np.random.Generator, lengths_q, lengths_k, heads: int, kv_heads: int, d: int, dtype: str):
    """q (total_q, H, D), k and v (total_k, Hk, D) random bits and the two prefix sums."""
    cu_q, cu_k = prefix_sums(lengths_q), prefix_sums(lengths_k)
    q = reference.random_bits(rng, (int(cu_q[-1]), heads, d), dtype, 1.0)
    k, v = (reference.random_bits(rng, (int(cu_k[-1]), kv_heads, d), dtype, 1.0) for _ in range(2))
    return q, k, v, cu_q, cu_k


def check_varlen_in_emulator(config, q, k, v, cu_q, cu_k, scale: float, seed: int = 0) -> None:
    """Run ``config``'s packed kernel in the emulator (race detector on); O (every row written: the poison
    must be gone, rows past a sequence's end belong to the next one and must hold its values) and the LSE
    against float64 (``reference.varlen_attention``), within twice the error of the computation at the
    kernel's precision; rows that see no key must be exactly 0 with LSE +inf."""
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_varlen_attention

    dtype, causal = config.dtype, config.causal
    o = np.full(q.shape, reference.POISON[dtype], np.uint16)
    lse = np.full((q.shape[1], q.shape[0]), np.nan, np.float32)
    launch_varlen_attention(runtime.load("attention", config, device="emulator"), config, q, k, v, o, lse, scale,
                            cu_q, cu_k, seed=seed)
    qf, kf, vf = (reference.to_f64(t, dtype) for t in (q, k, v))
    ref, ref_lse = reference.varlen_attention(qf, kf, vf, cu_q, cu_k, causal, scale)
    yard, _ = reference.varlen_attention(qf, kf, vf, cu_q, cu_k, causal, scale, dtype=dtype)
    result = reference.compare(o, ref, yard, dtype)
    assert result.ok and result.unwritten == 0, result.summary()
    empty = np.isinf(ref_lse)  # (H, total_q): rows without a visible key
    assert np.array_equal(np.isinf(lse) & (lse > 0), empty), "LSE must be +inf exactly on the rows that see no key"
    assert not reference.to_f64(o, dtype).transpose(1, 0, 2)[empty].any(), "rows that see no key must be 0"
    if (~empty).any():
        assert float(np.abs(lse[~empty] - ref_lse[~empty]).max()) <= reference.lse_tolerance(ref_lse[~empty])
