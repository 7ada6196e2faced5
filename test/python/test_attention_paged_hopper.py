"""The sm_90a attention over a paged K/V cache (``AttentionConfig(target="sm_90a", page_size=P)``,
``hopper_paged``), with dense Q and with packed Q (``varlen=True``): paged configs through the whole
compiler (protocol verifier on, ptxas -arch=sm_90a) with zero spills, the paged parameters and BN / chunk
TMA loads per 64-column block of a K/V tile; their numerics in the PTX emulator (race checks on) over
ragged batches (sequences without keys, keys not a multiple of the page, tiles spanning pages and pages
spanning tiles, decode-like Sq, GQA, bottom-right causal); the config rules of ``page_size``. The GPU runs
are the lead's (test/gpu)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ci_sample
from built import artifact
from varlen_cases import SM90_EVERY, check_paged_in_emulator, paged_batch, prefix_sums, sampled

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels import attention
from fa4_mlir.kernels.attention.abi import params

# every head dim and page size 16, 32, 64, 128, 256, 512 (chunks of gcd(BN, page)), dense and
# packed Q; BN is 192 at head dim 64, 128 at 96/128, 112 at 192, 80 at 256 (num_q 3 is not paged)
COMPILED = [
    dict(head_dim=64, page_size=16, causal=True), dict(head_dim=64, page_size=128, varlen=True),
    dict(head_dim=64, page_size=256, dtype="fp16"), dict(head_dim=64, page_size=64, varlen=True, causal=True),
    dict(head_dim=64, page_size=32),
    dict(head_dim=96, page_size=64, varlen=True, causal=True), dict(head_dim=96, page_size=512),
    dict(head_dim=128, page_size=16, varlen=True), dict(head_dim=128, page_size=32, causal=True),
    dict(head_dim=128, page_size=128, dtype="fp16", causal=True), dict(head_dim=128, page_size=256, varlen=True),
    dict(head_dim=192, page_size=32), dict(head_dim=192, page_size=64, varlen=True, causal=True),
    dict(head_dim=192, page_size=256, dtype="fp16"),
    dict(head_dim=256, page_size=64, varlen=True, causal=True), dict(head_dim=256, page_size=32),
    dict(head_dim=256, page_size=128, varlen=True, dtype="fp16"), dict(head_dim=256, page_size=64, causal=True),
    # pages that are not a power of two (head dims 64-128): chunks of 16 or 48 keys, pages that tiles cross
    dict(head_dim=64, page_size=48, causal=True), dict(head_dim=96, page_size=80, varlen=True),
    dict(head_dim=128, page_size=48, varlen=True, causal=True), dict(head_dim=128, page_size=208),
]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


# CI compiles each value of the sweep once (sm_90a: the H100 session builds the op's artifacts, and CI's
# emulator tests compile more); FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(COMPILED, pairs=()), ids=_ids)
def test_paged_configs_assemble_without_spills(ctx, kwargs):
    config = AttentionConfig(target="sm_90a", **kwargs)
    source = attention.build(config)
    result = artifact(config)  # the protocol verifier runs beside ptxas; the emulator tests load this build
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["wgmma_serialized"] is False, m  # ptxas C7511: the wgmmas serialised
    names = [p.name for p in source.params]
    assert names == [p.name for p in params(None, None, None, runtime_group=True, varlen=config.varlen, paged=True,
                                            schedule=config.varlen)]
    assert names[-4:] == ["block_table", "pages_per_seq", "seqused_k", "num_pages"]
    assert ("cu_seqlens_q" in names) == config.varlen and "cu_seqlens_k" not in names
    k_box = next(p for p in source.params if p.name == "k").tensor_map
    assert tuple(k_box.box) == (64, 1, config.page_chunk, 1)
    # a K/V tile is BN / chunk TMA loads per 64-column block: unrolled (K_0, K_j and V_{j-1} in the loop, the
    # last V) or one chunk an iteration of a loop; Q: a load per warpgroup and block
    ptx, t = result.ptx, config.hopper
    blocks = t.head_dim // 64
    loads = len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.shared::cta\.global", ptx))
    chunks = t.bn // config.page_chunk
    per_tile = blocks * chunks if blocks * chunks <= 4 else blocks
    assert loads == t.consumers * blocks + 4 * per_tile
    assert re.search(r"ld\.global\.nc\.b32", ptx)  # seqused_k and the block table: read-only loads


def _paged_config(**kwargs) -> AttentionConfig:
    return AttentionConfig(target="sm_90a", **kwargs)


# (dtype, head dim, causal, num_q, page size, key counts, Sq (dense Q) or query lengths (packed Q), heads, kv
# heads). Grouped by config (one compile each); each case names what it covers.
EMULATED = [
    # d64, BN 192, page 16: a tile spans 12 pages (the chunk loop)
    ("bf16", 64, False, 2, 16, [37, 0, 200], 1, 4, 1),  # decode, GQA 4, no keys, 200 = 12.5 pages, 2 tiles
    ("bf16", 64, False, 2, 16, [16, 400], 16, 8, 1),  # GQA 8, exactly one page, 3 tiles (ring wrap)
    ("bf16", 64, False, 2, 16, [150, 5], 150, 1, 1),  # two CTAs, O's rows past Sq clipped
    # d64, page 64: 3 chunks of 64, unrolled, entries carried K -> V; packed Q
    ("fp16", 64, True, 2, 64, [1, 100, 5, 0], [1, 40, 0, 9], 4, 1),  # Sk = 0 with rows: O = 0, LSE = +inf
    ("fp16", 64, True, 2, 64, [50, 300], [130, 3], 1, 1),  # Sq > Sk causal: rows without keys; Sq < Sk
    ("fp16", 64, True, 2, 128, [200], [200], 2, 2),
    # d128, BN 128, page 64: two pages a tile (unrolled, carried)
    ("bf16", 128, True, 2, 64, [1, 64, 129], 1, 8, 1),  # decode causal, GQA 8
    ("bf16", 128, True, 2, 64, [0, 7, 300], 12, 2, 1),  # Sq > Sk: keyless rows; 3 tiles
    ("bf16", 128, True, 2, 64, [100, 260], 140, 1, 1),  # a CTA whose rows see no key (trip count 0)
    # d128, page 256: a page spans two tiles (one chunk); packed Q
    ("bf16", 128, False, 2, 256, [300, 9, 513], [5, 0, 70], 4, 1),  # 5 tiles over 3 pages
    ("bf16", 128, False, 2, 256, [0, 256], [1, 1], 1, 1),
    ("bf16", 128, False, 2, 256, [1, 255], [129, 17], 2, 1),
    # d256, BN 80, page 256: chunks of 16 straddling page ends (the chunk loop, clamped)
    ("fp16", 256, True, 2, 256, [250, 0, 257], 3, 2, 1),
    ("fp16", 256, True, 2, 256, [20, 100], 64, 1, 1),
    ("fp16", 256, True, 2, 256, [170], 16, 8, 1),
    # d64 (BN 192), page 32: 6 chunks a tile (the loop), causal dense Q
    ("bf16", 64, True, 2, 32, [64, 300], 200, 1, 1),
    ("bf16", 64, True, 2, 32, [0, 70], 7, 4, 1),
    ("bf16", 64, True, 2, 32, [1], 1, 1, 1),
    # d96 (BN 128), page 32: 4 chunks of 32 (the loop: 8 TMA loads a tile)
    ("fp16", 96, False, 2, 32, [81, 0, 160], [3, 2, 70], 4, 1),
    ("fp16", 96, False, 2, 32, [400], [33], 1, 1),
    ("fp16", 96, False, 2, 32, [79, 1], [1, 100], 2, 2),
    # d192 (BN 112), page 64: chunks of 16 (the loop); dense Q
    ("bf16", 192, True, 2, 64, [113, 0], 9, 4, 1),
    ("bf16", 192, True, 2, 64, [30, 250], 100, 1, 1),
    ("bf16", 192, False, 2, 64, [64, 128, 3], 5, 2, 1),
    # pages that are not a power of two: d64 (BN 192), page 48: 4 whole pages a tile, unrolled; d128 (BN 128),
    # page 80: chunks of 16 (the loop) that tiles and pages cut differently; packed Q
    ("bf16", 64, True, 2, 48, [47, 0, 300], 3, 4, 1),
    ("bf16", 64, True, 2, 48, [193, 48], 60, 1, 1),
    ("fp16", 128, False, 2, 80, [79, 81, 400], [2, 0, 33], 2, 1),
    ("fp16", 128, False, 2, 80, [160], [129], 1, 1),
]


@pytest.mark.parametrize("dtype, d, causal, num_q, page, lengths_k, queries, h, hk",
                         sampled(EMULATED, every=SM90_EVERY),
                         ids=[f"{c[0]}-d{c[1]}-{'causal' if c[2] else 'full'}-q{c[3]}-p{c[4]}-{i}"
                              for i, c in enumerate(EMULATED)])
def test_paged_batches_match_f64_reference_in_the_emulator(dtype, d, causal, num_q, page, lengths_k, queries, h, hk):
    """O and the LSE against float64 over the keys the block table names (``varlen_cases``)."""
    packed = isinstance(queries, list)
    config = _paged_config(dtype=dtype, head_dim=d, causal=causal, num_q=num_q, page_size=page, varlen=packed)
    rng = np.random.default_rng(len(lengths_k) * 1000 + d + page)
    k_cache, v_cache, table, seqused_k = paged_batch(rng, lengths_k, page, hk, d, dtype)
    if packed:
        cu_q = prefix_sums(queries)
        q = reference.random_bits(rng, (int(cu_q[-1]), h, d), dtype, 1.0)
    else:
        cu_q = None
        q = reference.random_bits(rng, (len(lengths_k), queries, h, d), dtype, 1.0)
    check_paged_in_emulator(config, q, k_cache, v_cache, table, seqused_k, d ** -0.5, cu_q=cu_q)


def test_dense_and_varlen_kernels_keep_their_parameters():
    for varlen in (False, True):
        names = [p.name for p in attention.build(AttentionConfig(target="sm_90a", varlen=varlen)).params]
        assert "block_table" not in names and ("cu_seqlens_k" in names) == varlen


def test_paged_arguments_only_for_paged_kernels():
    table, used = np.zeros((1, 1), np.int32), np.ones(1, np.int32)
    assert attention.paged_arguments(AttentionConfig(target="sm_90a"), table, 1, used, 4) == {}
    paged = AttentionConfig(target="sm_90a", page_size=64)
    assert attention.paged_arguments(paged, table, 1, used, 4) == {"block_table": table, "pages_per_seq": 1,
                                                                   "seqused_k": used, "num_pages": 4}


_PAGED_RULE = (r"AttentionConfig.page_size must be 0 with fp8_e4m3, persistent, or head dim 256/512 on sm_100a or "
               r"512 on sm_90a \(the paged K/V cache is built for the 16-bit one-tile kernels\), got 64")
_PAGE_SIZE = (r"AttentionConfig.page_size must be 0 \(contiguous K/V\) or >= 1 \(pages TMA cannot load are gathered "
              r"row by row: ``page_gather``\), got ")


@pytest.mark.parametrize("kwargs, message", [
    (dict(page_size=-16), _PAGE_SIZE + "-16"),
    (dict(page_size=-1), _PAGE_SIZE + "-1"),
    (dict(page_size=64.0), _PAGE_SIZE + "64.0"),
    (dict(page_size=True), _PAGE_SIZE + "True"),
    (dict(page_size=64, dtype="fp8_e4m3"), _PAGED_RULE),
    (dict(page_size=64, persistent=True), _PAGED_RULE),
    (dict(page_size=64, head_dim=512), _PAGED_RULE),
    (dict(page_size=40, head_dim=512), _PAGED_RULE.replace("got 64", "got 40")),
    (dict(page_size=64, target="sm_100a", head_dim=256), _PAGED_RULE),
    (dict(page_size=64, head_dim=64, num_q=3), r"AttentionConfig.num_q must be 2 with a paged K/V cache on sm_90a "
                                               r"\(three consumer warpgroups leave the load warp 32 registers, and its "
                                               r"paged loads spill\), got 3"),
    (dict(page_size=8, head_dim=64, num_q=3), r"AttentionConfig.num_q must be 2 with a paged K/V cache on sm_90a"),
])
def test_page_size_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AttentionConfig(**{"target": "sm_90a", **kwargs})


def test_page_chunk_is_the_gcd_of_the_tile_and_the_page():
    assert [_paged_config(head_dim=64, page_size=p).page_chunk for p in (16, 32, 128, 256, 512)] == [16, 32, 64, 64, 64]
    assert _paged_config(head_dim=192, page_size=64).page_chunk == 16  # BN 112
    assert AttentionConfig(target="sm_90a").page_chunk == 0
