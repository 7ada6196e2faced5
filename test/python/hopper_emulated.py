"""Running an sm_90a attention config in the PTX emulator against float64: the check the sm_90a attention tests
share (``test_attention_hopper``, ``test_attention_one_consumer_role``)."""

from __future__ import annotations

import numpy as np

from fa4_mlir.configs.attention import AttentionConfig


def check_in_emulator(config: AttentionConfig, q, k, v, scale: float) -> None:
    """Run ``config``'s kernel in the emulator on bit arrays q (B, Sq, H, D), k and v (B, Sk, Hk, D); O
    (every element written) and the LSE against float64, within twice the error of the same computation
    at the kernel's precision (``fa4_mlir.reference``)."""
    from fa4_mlir import reference, runtime
    from fa4_mlir.tools.fa4_emu import launch_attention

    dtype, causal = config.dtype, config.causal
    o = np.full(q.shape, reference.POISON[dtype], np.uint16)
    lse = np.full((q.shape[0], q.shape[2], q.shape[1]), np.nan, np.float32)
    launch_attention(runtime.load("attention", config, device="emulator"), config, q, k, v, o, lse, scale)
    qf, kf, vf = (reference.to_f64(t, dtype) for t in (q, k, v))
    ref, ref_lse = reference.attention(qf, kf, vf, causal, scale)
    result = reference.compare(o, ref, reference.attention_yardstick(qf, kf, vf, causal, scale, dtype), dtype)
    assert result.ok and result.unwritten == 0, result.summary()
    assert float(np.abs(lse - ref_lse).max()) <= reference.lse_tolerance(ref_lse)
