"""The sm_100a attention kernel over a paged K/V cache (``AttentionConfig(page_size=P)``, issue 26), with a
dense Q (B, Sq, H, D) and with a packed Q (``varlen=True``): paged configs through the whole compiler
(protocol verifier on, ptxas -arch=sm_100a, zero spills); the kernel run in the PTX emulator (race checks
on) on shuffled pages (``varlen_cases.paged_batch``), with sequences of 0 keys, keys not a multiple of the
page, tiles spanning several pages and pages spanning several tiles, decode-like Sq 1..16 and longer
queries, causal (bottom-right) or not, GQA 1 / 4 / 8; the rules a paged config must keep."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import ci_sample
from built import artifact
from varlen_cases import SM100_EVERY, check_paged_case, check_paged_in_emulator, paged_batch, sampled

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels import attention

# page sizes: smaller than a K/V tile (several pages a tile), equal, larger (several tiles a page), and pages that
# end mid-tile (128 and 256 with head dim 64: bn 192, chunks of gcd(192, page) = 64 rows)
COMPILED = [dict(page_size=16, head_dim=128), dict(page_size=16, head_dim=64, varlen=True),
            dict(page_size=16, num_q=1, head_dim=128, causal=True, varlen=True),
            dict(page_size=64, head_dim=96, causal=True),
            dict(page_size=64, num_q=1, head_dim=64, varlen=True, group=4),
            dict(page_size=128, num_q=1, head_dim=128, varlen=True, causal=True),
            dict(page_size=128, head_dim=64, group=8, causal=True),
            dict(page_size=256, head_dim=128, dtype="fp16", varlen=True), dict(page_size=256, num_q=1, head_dim=96),
            dict(page_size=128, head_dim=64), dict(page_size=256, num_q=1, head_dim=64, causal=True, varlen=True)]
# the other page sizes, and pages of 16 with 1Q at head dim 64 (12 chunks a tile, two tiles' entries live: the load
# warp's 64 registers spilled), are gathered row by row (``page_gather``: test_attention_paged_gather_sm100.py)


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


# CI compiles each value of the sweep once; FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(COMPILED, pairs=()), ids=_ids)
def test_paged_config_verifies_and_assembles_without_spills(kwargs):
    config = AttentionConfig(**kwargs)
    m = artifact(config).manifest  # the protocol verifier beside ptxas; the emulator tests load this build
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["threads"][0] == 512


def test_paged_parameters_and_chunk_boxes():
    """k / v boxes hold one chunk of a page (gcd(bn, page_size) rows); a packed Q drops cu_seqlens_k."""
    for kwargs, rows in ((dict(page_size=16), 16), (dict(page_size=512), 128), (dict(page_size=256), 128),
                         (dict(page_size=64, varlen=True), 64)):
        source = attention.build(AttentionConfig(**kwargs))
        maps = {p.name: p.tensor_map for p in source.params if p.tensor_map}
        assert maps["k"].box == maps["v"].box == (64, 1, rows, 1), kwargs
        names = [p.name for p in source.params]
        assert names[-4:] == ["block_table", "pages_per_seq", "seqused_k", "num_pages"]
        assert ("cu_seqlens_q" in names) == kwargs.get("varlen", False) and "cu_seqlens_k" not in names


@pytest.mark.parametrize("page, head_dim, entries", [(16, 128, 8), (16, 64, 12), (64, 128, 2), (256, 128, 1)])
def test_a_paged_tile_reads_the_block_table_once_for_k_and_v(page, head_dim, entries):
    """The load warp's steady loop (2Q: one K/V tile an iteration) reads bn / chunk block-table entries and
    issues bn / chunk TMA loads per 64-column block of K and of V (head dim 128: 2 blocks, bn 128; 64: 1
    block, bn 192)."""
    import re

    from fa4_mlir.core.compiler import compile_kernel

    ptx = compile_kernel(attention.build(AttentionConfig(page_size=page, head_dim=head_dim)), stop="cubin",
                         verify_protocol=False).ptx
    blocks = re.split(r"\n\$L__BB\d+_\d+:", ptx)
    loop = [b for b in blocks if "ld.global" in b and "shared::cta.global.tile" in b][-1]
    assert loop.count("ld.global.b32") == entries
    assert loop.count("cp.async.bulk.tensor.4d.shared::cta.global") == entries * 2 * (head_dim // 64)


def _case_id(case):
    kw, sq, lk, heads = case
    q = f"q{'.'.join(map(str, sq))}" if isinstance(sq, list) else f"sq{sq}"
    return f"{_ids(kw)}-{q}-k{'.'.join(map(str, lk))}-h{heads}"


# (config, Sq (dense Q) or query lengths (varlen), key counts, heads)
CASES = [
    # decode-like dense Q: Sq 1..16, pages smaller than, equal to and larger than a tile, 0 keys
    (dict(page_size=16, head_dim=64), 1, [37, 0, 130], 2),
    (dict(page_size=16, head_dim=128, causal=True), 4, [1, 200, 16], 1),
    (dict(page_size=64, head_dim=128, num_q=1), 16, [65, 3, 0], 1),
    (dict(page_size=64, head_dim=64, causal=True, group=4), 5, [130, 1], 4),
    (dict(page_size=256, head_dim=128, causal=True, dtype="fp16"), 2, [300, 0, 7], 1),
    (dict(page_size=256, head_dim=96, num_q=1), 1, [257, 40], 2),
    (dict(page_size=32, head_dim=128), 3, [100, 47, 0], 1),
    (dict(page_size=128, head_dim=64, num_q=1, causal=True), 9, [129, 300], 1),
    (dict(page_size=128, head_dim=64, group=8, causal=True, dtype="fp16"), 2, [129, 5], 8),
    # longer dense Q (Sq > Sk: causal rows that see no key)
    (dict(page_size=16, head_dim=96, causal=True), 150, [40, 170], 1),
    (dict(page_size=64, head_dim=128), 140, [200, 0], 1),
    (dict(page_size=128, head_dim=64, num_q=1, causal=True, group=4), 40, [20, 300], 4),
    # packed Q
    (dict(page_size=16, head_dim=64, varlen=True), [5, 0, 130], [7, 3, 300], 1),
    (dict(page_size=16, head_dim=128, varlen=True, causal=True, num_q=1), [1, 129, 3], [1, 17, 200], 1),
    (dict(page_size=64, head_dim=96, varlen=True, causal=True), [33, 1, 0], [257, 0, 5], 1),
    (dict(page_size=64, head_dim=64, varlen=True, num_q=1, group=8), [20, 1], [9, 140], 8),
    (dict(page_size=256, head_dim=128, varlen=True, causal=True, dtype="fp16"), [200, 3], [130, 1], 1),
    (dict(page_size=256, head_dim=64, varlen=True, group=4), [40, 0, 33], [1, 5, 300], 4),
    (dict(page_size=32, head_dim=96, varlen=True, causal=True), [17, 60], [90, 59], 1),
    (dict(page_size=512, head_dim=128, num_q=1, varlen=True), [3, 50], [170, 80], 1),
    (dict(page_size=128, head_dim=64, varlen=True, group=4, causal=True, num_q=1), [70, 1], [20, 33], 4),
]


@pytest.mark.parametrize("case", sampled(CASES, one_arg=True, every=SM100_EVERY), ids=[_case_id(c) for c in CASES])
def test_paged_kernel_is_right_in_the_emulator(case):
    kwargs, sq, lengths_k, heads = case
    check_paged_case(AttentionConfig(**kwargs), sq, lengths_k, heads, zlib.crc32(_case_id(case).encode()))


_PAGE_SIZE = (r"AttentionConfig.page_size must be 0 \(contiguous K/V\) or >= 1 \(pages TMA cannot load are gathered "
              r"row by row: ``page_gather``\), got ")


@pytest.mark.parametrize("kwargs, message", [
    (dict(page_size=-16), _PAGE_SIZE + "-16"),
    (dict(page_size=16.0), _PAGE_SIZE + "16.0"),
    (dict(page_size=True), _PAGE_SIZE + "True"),
    (dict(page_size=16, dtype="fp8_e4m3"), r"AttentionConfig.page_size must be 0 with fp8_e4m3, persistent, or "
                                           r"head dim 256/512 on sm_100a"),
    (dict(page_size=16, head_dim=256), r"AttentionConfig.page_size must be 0 with fp8_e4m3"),
    (dict(page_size=16, head_dim=512), r"AttentionConfig.page_size must be 0 with fp8_e4m3"),
    (dict(page_size=24, head_dim=512), r"AttentionConfig.page_size must be 0 with fp8_e4m3"),
])
def test_paged_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AttentionConfig(**kwargs)


def test_long_paged_sequences_match_f64_reference_in_the_emulator():
    """Key counts drawn in 1..4096 (one of 4096: 32 K/V tiles over 16 pages of 256), an empty sequence, a decode
    step of 3 queries, causal, fused GQA 2: the ring and the page walk over a whole 4k context."""
    rng = np.random.default_rng(4096)
    lengths = [4096, int(rng.integers(1, 4097)), 0]
    config = AttentionConfig(head_dim=64, page_size=256, causal=True, group=2)
    k_cache, v_cache, table, used = paged_batch(rng, lengths, 256, 1, 64, "bf16")
    q = reference.random_bits(rng, (3, 3, 2, 64), "bf16", 1.0)
    check_paged_in_emulator(config, q, k_cache, v_cache, table, used, 0.125)
