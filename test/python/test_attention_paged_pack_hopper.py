"""The sm_90a paged attention with the query heads of a K/V head packed into a CTA's rows
(``AttentionConfig(target="sm_90a", page_size=P, pack_gqa=G)``, the decode form): configs through the whole
compiler (protocol verifier on, ptxas -arch=sm_90a) with zero spills, Q/O TMA boxes of (64 columns, G heads,
64 / G positions), the grid of a CTA per K/V head; numerics in the PTX emulator (race checks on) over ragged
batches (sequences without keys, several K/V heads, Sq 1..16, bottom-right causal, rows past Sq clipped); the
config rules of ``pack_gqa`` and its launch checks. The GPU runs are the lead's (test/gpu)."""

from __future__ import annotations

import numpy as np
import pytest

import ci_sample
from built import artifact
from varlen_cases import SM90_EVERY, check_paged_in_emulator, paged_batch, sampled

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels import attention

# pack_gqa 2, 4, 8, 16 at head dims 64 and 128 over pages 16, 64 and 256 (both masks), and the largest packs
COMPILED = [dict(head_dim=d, page_size=p, pack_gqa=g, causal=(i + j) % 2 == 1)
            for i, g in enumerate((2, 4, 8, 16)) for d in (64, 128) for j, p in enumerate((16, 64, 256))]
COMPILED += [dict(head_dim=128, page_size=64, pack_gqa=32, causal=True), dict(head_dim=64, page_size=256, pack_gqa=64),
             dict(head_dim=128, page_size=16, pack_gqa=8, dtype="fp16", block_n=128)]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


# CI compiles each value of the sweep once (sm_90a: the H100 session builds the op's artifacts, and CI's
# emulator tests compile more); FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(COMPILED, pairs=()), ids=_ids)
def test_packed_configs_assemble_without_spills(ctx, kwargs):
    config = AttentionConfig(target="sm_90a", **kwargs)
    source = attention.build(config)
    result = artifact(config)  # the protocol verifier runs beside ptxas; the emulator tests load this build
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["wgmma_serialized"] is False, m  # ptxas C7511: the wgmmas serialised
    g = config.pack_gqa
    boxes = {p.name: tuple(p.tensor_map.box) for p in source.params if p.tensor_map is not None}
    assert boxes["q"] == boxes["o"] == (64, g, 64 // g, 1)  # a warpgroup's 64 rows: 64 / G positions x G heads
    assert boxes["k"] == (64, 1, config.page_chunk, 1)
    assert source.config["pack_gqa"] == source.config["group"] == g and f"H / {g}" in source.grid
    assert "block_table" in [p.name for p in source.params]


@pytest.mark.parametrize("group", [2, 4, 8, 16, 32, 64])
def test_the_grid_is_a_cta_per_kv_head_and_its_positions(group):
    config = AttentionConfig(target="sm_90a", page_size=64, pack_gqa=group, group=group)
    assert (config.fused_group, config.positions, config.cta_positions) == (group, 64 // group, 128 // group)
    assert config.canonical() == AttentionConfig(target="sm_90a", page_size=64, pack_gqa=group)
    assert attention.launch_geometry(config.canonical(), 3, 1, 8 * group, 9000) == (1, 8, 3)
    assert attention.launch_geometry(config, 2, 129, 2 * group, 5) == (-(-129 * group // 128), 2, 2)
    assert attention.gqa_arguments(config.canonical(), 8 * group, 8) == {"group": group}


def test_launches_must_have_the_packed_group():
    config = AttentionConfig(target="sm_90a", page_size=64, pack_gqa=8)
    with pytest.raises(LaunchError, match=r"attention: heads / kv_heads must be the config's pack_gqa \(8, the heads "
                                          r"packed into a CTA's rows\), got 16 / 4 = 4"):
        attention.gqa_arguments(config, 16, 4)
    with pytest.raises(LaunchError, match=r"attention: heads \(12\) must be a multiple of pack_gqa \(8\)"):
        attention.launch_geometry(config, 1, 1, 12, 64)


_PACK = (r"AttentionConfig.pack_gqa must be 0 \(a head a CTA\) or a power of two in \[2, 64\] \(query heads per "
         r"K/V head packed into a consumer warpgroup's 64 rows\), got ")
_PACK_WHERE = (r"AttentionConfig.pack_gqa must be 0 unless target is sm_90a with a paged K/V cache \(page_size > 0\) "
               r"and dense Q \(varlen False\): the decode form packs the heads of a K/V head, got 4")


@pytest.mark.parametrize("kwargs, message", [
    (dict(page_size=64, pack_gqa=1), _PACK + "1"),
    (dict(page_size=64, pack_gqa=3), _PACK + "3"),
    (dict(page_size=64, pack_gqa=128), _PACK + "128"),
    (dict(page_size=64, pack_gqa=-4), _PACK + "-4"),
    (dict(page_size=64, pack_gqa=4.0), _PACK + "4.0"),
    (dict(page_size=64, pack_gqa=True), _PACK + "True"),
    (dict(pack_gqa=4), _PACK_WHERE),
    (dict(page_size=64, varlen=True, pack_gqa=4), _PACK_WHERE),
    (dict(target="sm_100a", page_size=64, pack_gqa=4), _PACK_WHERE),
    (dict(page_size=64, pack_gqa=4, group=8),
     r"AttentionConfig.group must be 1 or pack_gqa \(4\) with pack_gqa \(the packed heads are the group's\), got 8"),
])
def test_pack_gqa_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AttentionConfig(**{"target": "sm_90a", **kwargs})


# (dtype, head dim, causal, page size, pack_gqa, key counts, Sq, kv heads). Grouped by config (one compile each)
EMULATED = [
    ("bf16", 128, True, 64, 8, [37, 0, 200], 1, 2),  # decode, a sequence without keys, 4 tiles over 4 pages
    ("bf16", 128, True, 64, 8, [5, 130], 16, 1),  # Sq 16 x 8 = 128 rows: one CTA; Sq > Sk: keyless causal rows
    ("bf16", 128, True, 64, 8, [1, 64, 0, 300], 3, 3),
    ("bf16", 128, False, 64, 8, [129, 0], 5, 2),  # positions past Sq in the tile: O clipped, no LSE
    ("fp16", 64, False, 16, 4, [200, 16, 0], 1, 2),  # d64, BN 192 over 12 pages of 16 (the chunk loop)
    ("fp16", 64, False, 16, 4, [40, 3], 16, 1),  # 64 rows of a warpgroup: 16 positions x 4 heads
    ("fp16", 64, True, 16, 4, [0, 90, 7], 9, 2),
    ("bf16", 64, True, 256, 4, [300, 2], 33, 1),  # 33 x 4 > 128: two CTAs a K/V head (the second one's rows partly)
    ("bf16", 128, False, 256, 16, [513, 1], 2, 2),  # pack 16: 4 positions a warpgroup; a page spans two tiles
]


@pytest.mark.parametrize("dtype, d, causal, page, pack, lengths_k, sq, hk",
                         sampled(EMULATED, every=SM90_EVERY),
                         ids=[f"{c[0]}-d{c[1]}-{'causal' if c[2] else 'full'}-p{c[3]}-g{c[4]}-sq{c[6]}-{i}"
                              for i, c in enumerate(EMULATED)])
def test_packed_batches_match_f64_reference_in_the_emulator(dtype, d, causal, page, pack, lengths_k, sq, hk):
    """O and the LSE against float64 over the keys the block table names (``varlen_cases``)."""
    config = AttentionConfig(target="sm_90a", dtype=dtype, head_dim=d, causal=causal, page_size=page, pack_gqa=pack)
    rng = np.random.default_rng(len(lengths_k) * 1000 + d + page + sq)
    k_cache, v_cache, table, seqused_k = paged_batch(rng, lengths_k, page, hk, d, dtype)
    q = reference.random_bits(rng, (len(lengths_k), sq, hk * pack, d), dtype, 1.0)
    check_paged_in_emulator(config, q, k_cache, v_cache, table, seqused_k, d ** -0.5)
