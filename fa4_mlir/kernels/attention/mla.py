"""mla: the multi-head latent attention kernels by target and form, behind one registry name ("mla-attention").

sm_90a: ``hopper_mla`` (the absorbed and prefill forms on the sm_90a consumer warpgroups); sm_100a:
``depth512.mla`` (the absorbed form as the depth-512 pair-CTA kernel with a rope chunk, for
``MLAConfig.depth512``) and ``mla_prefill`` (the prefill form as the FA4 kernel, for ``MLAConfig.fa4``).
This module imports no MLIR.
"""

from __future__ import annotations

from fa4_mlir.configs.mla import MLAConfig
from fa4_mlir.kernels.attention import hopper_mla, mla_prefill
from fa4_mlir.kernels.attention.depth512 import mla as pair_mla
from fa4_mlir.kernels.source import KernelSource


def build(config: MLAConfig) -> KernelSource:
    if config.target == "sm_100a" and config.form == "prefill":
        return mla_prefill.build(config)
    if config.target == "sm_100a":
        return pair_mla.build(config.depth512, causal=config.causal)
    return hopper_mla.build(config)


def launch_geometry(config: MLAConfig, batch: int, seq_q: int, heads: int, seq_k: int) -> tuple[int, int, int]:
    """The grid of ``config``'s kernel for a (batch, seq_q, heads) x seq_k problem."""
    if config.target == "sm_100a" and config.form == "prefill":
        return mla_prefill.launch_geometry(config, batch, seq_q, heads, seq_k)
    if config.target == "sm_100a":
        return pair_mla.launch_geometry(config.depth512, batch, seq_q, heads, seq_k)
    return hopper_mla.launch_geometry(config, batch, seq_q, heads, seq_k)
