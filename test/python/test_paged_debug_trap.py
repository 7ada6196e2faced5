"""A debug build of a paged attention kernel (``fa4.debug_check`` in its load warp) traps on a block-table entry
outside the cache, naming the sequence and the page, in the PTX emulator on both targets; a release build of
the same kernel reads the entry unchecked (the torch op checks the table before any launch)."""

from __future__ import annotations

import ci_sample
import numpy as np
import pytest
from varlen_cases import paged_batch

from fa4_mlir import emu, reference, runtime
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.core.compiler import compile_kernel
from fa4_mlir.kernels import attention
from fa4_mlir.tools.fa4_emu import launch_paged_attention

DEBUG_MS = 100


# CI: each target once, one with TMA pages (16) and one with gathered pages (24); FA4_EMU_FULL_MATRIX=1: all four
@pytest.mark.parametrize("target, page, bad", ci_sample.in_ci([("sm_90a", 16, 2), ("sm_100a", 16, 2), ("sm_90a", 24, 1),
                                                               ("sm_100a", 24, 1)], [1, 2]))
def test_an_out_of_range_page_traps_naming_sequence_and_page(target, page, bad):
    """Pages of 24 keys: the gathered load warp (``page_gather``, both targets) reads the entries per lane."""
    config = AttentionConfig(target=target, head_dim=64, page_size=page)
    rng = np.random.default_rng(5)
    k_cache, v_cache, table, used = paged_batch(rng, [20, 40], page, 2, 64, "bf16")
    table[1, bad] = k_cache.shape[0] + 3  # sequence 1's last page: past the cache's pages
    q = reference.random_bits(rng, (2, 3, 2, 64), "bf16", 1.0)
    o = np.zeros(q.shape, np.uint16)
    kernel = runtime.load("attention", config, device="emulator", debug=DEBUG_MS)
    with pytest.raises(emu.Trap) as trap:
        launch_paged_attention(kernel, config, q, k_cache, v_cache, o, None, 0.125, table, used)
    want = (f"fa4 debug: block_table entry out of range: sequence 1, page {bad}, entry {k_cache.shape[0] + 3} "
            f"(num_pages {k_cache.shape[0]})\n")
    assert want in trap.value.output
    release = compile_kernel(attention.build(config), stop="cubin", verify_protocol=False).ptx
    assert "vprintf" not in release and "trap;" not in release
