"""Split KV in the sm_100a attention kernel (``AttentionConfig(page_size=P, split_kv=True)``): every split config
of head dims 64 / 96 / 128, causal or not, pages of 16 / 64 / 256 keys and groups 1 / 4 / 8 (and 1Q at a few)
through the whole compiler: the protocol verifier proves it (compile_kernel's default), ptxas -arch=sm_100a
assembles it with zero spills. The emulator tests are test_split_kv_sm100.py."""

from __future__ import annotations

import pytest

import ci_sample

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.kernels import attention


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


# every head dim x causal x page size x group with the default num_q 2 (the sm_100a paged rules allow them all), and
# 1Q at a few (page 16 with 1Q at head dim 64 is gathered: test_attention_paged_gather_sm100.py)
SPILL_CONFIGS = [dict(head_dim=d, causal=causal, page_size=p, group=g)
                 for d in (64, 96, 128) for causal in (False, True) for p in (16, 64, 256) for g in (1, 4, 8)]
SPILL_CONFIGS += [dict(head_dim=d, num_q=1, causal=causal, page_size=p, group=g)
                  for d, p, g in ((64, 64, 1), (96, 16, 4), (128, 256, 8), (128, 16, 1)) for causal in (False, True)]


# CI compiles each value of the sweep once; FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(SPILL_CONFIGS, pairs=()), ids=_ids)
def test_split_config_verifies_and_assembles_without_spills(kwargs):
    """The protocol verifier proves the split kernel (compile_kernel's default) and ptxas spills nothing."""
    from fa4_mlir.core.compiler import compile_kernel

    config = AttentionConfig(split_kv=True, **kwargs)
    m = compile_kernel(attention.build(config), stop="cubin").manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["threads"][0] == 512
