"""GemmConfig and the GEMM layout with the EpiLoadPipeline barriers (spec 5.1)."""

from __future__ import annotations

import pytest

from fa4_mlir.configs import GemmConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.layouts import gemm_layout
from fa4_mlir.placement import place_contiguous, place_smem


def test_default_sm100_layout_places_within_budget():
    c = GemmConfig()
    layout = gemm_layout(c)
    smem = place_smem([(r.name, r.bytes, r.align, r.alias_of, 0) for r in layout.regions])
    # 3 stages of (128 + 256) x 64 bf16, 2 C sub-tiles + 2 D buffers of 128 x 64, 16 barriers
    # (A/B 2x3, accumulator 2x2, C 2x2, load order 2x1), the TMEM address.
    assert c.stages == 3 and smem.total == c.smem_used == 3 * 49152 + 4 * 16384 + 16 * 8 + 4
    bars = {b.name: b for b in layout.barriers}
    assert bars["epi_load_full"].counts == (1, 1) and bars["epi_load_full"].arrival == "tx"
    assert bars["epi_load_empty"].counts == (128, 128) and bars["epi_load_empty"].arrival == "threads"
    assert bars["load_order_full"].counts == (1,) and bars["load_order_empty"].counts == (1,)
    assert place_contiguous([(t.name, t.columns) for t in layout.tmem]).offsets == {"accum": 0}
    assert layout.tmem[0].columns == 2 * 256


def test_stage_count_is_the_most_that_fits():
    c = GemmConfig(tile_n=128)
    assert c.stages == 5 and c.smem_for(6) > 232448 >= c.smem_for(5)


def test_sm90_has_no_tmem_barriers():
    layout = gemm_layout(GemmConfig(target="sm_90a"))
    names = [b.name for b in layout.barriers]
    assert "accum_producer" not in names and layout.tmem == ()
    bars = {b.name: b for b in layout.barriers}
    # two consumer warpgroups: lane 0 of each of their 8 warps releases a stage; all 256 threads read C
    assert bars["ab_consumer"].counts == (8,) * 3 and bars["ab_consumer"].arrival == "threads"
    assert bars["epi_load_empty"].counts == (256, 256)


def test_sm90_pingpong_gives_each_warpgroup_a_tile_and_the_turns():
    c = GemmConfig(target="sm_90a", pingpong=True, tile_n=192, epi_tile_n=32)
    assert (c.consumers, c.wg_rows, c.tile_consumers, c.epilogue_threads, c.d_buffers) == (2, 128, 1, 128, 4)
    layout = gemm_layout(c)
    bars = {b.name: b for b in layout.barriers}
    # one warpgroup reads a stage and a C sub-tile: 4 warps release it, 128 threads read it
    assert bars["ab_consumer"].counts == (4,) * c.stages and bars["epi_load_empty"].counts == (128, 128)
    assert [(b.name, b.counts) for b in layout.barriers[-4:]] == [
        ("mma_turn_full", (4,)), ("mma_turn_empty", (4,)), ("epilogue_turn_full", (4,)), ("epilogue_turn_empty", (4,))]
    regions = {r.name: r.bytes for r in layout.regions}
    assert regions["d0"] == regions["d1"] == 2 * 128 * 64  # a double-buffered 128-row D staging tile each
    assert c.stages == 4 and c.smem_used == layout.config["smem_budget"] <= 232448
    assert GemmConfig(target="sm_90a", pingpong=True, tile_m=64).wg_rows == 64


def test_epilogue_sub_tile_defaults_per_target():
    assert GemmConfig().epi_tile_n == 64 and GemmConfig(target="sm_90a").epi_tile_n == 64
    assert GemmConfig(epi_tile_n=32).epi_tile_n == 32 and GemmConfig(epi_tile_n=32).epi_swizzle == "64B"


def test_cta_pair_splits_the_tile_and_counts_both_ctas():
    c = GemmConfig(tile_m=256, cta_group=2)
    assert c.rows_per_cta == 128 and c.stage_bytes == (256 + 256) // 2 * 64 * 2
    bars = {b.name: b for b in gemm_layout(c).barriers}
    assert bars["accum_consumer"].counts == (256, 256)


def test_sm90_cluster_shares_b_and_counts_the_releases_of_both_ctas():
    c = GemmConfig(target="sm_90a", pingpong=True, tile_n=192, epi_tile_n=32, cluster_m=2)
    assert (c.cluster_size, c.cluster_rows, c.b_tile_rows) == (2, 256, 192)  # each CTA holds all of B's stage
    single = GemmConfig(target="sm_90a", pingpong=True, tile_n=192, epi_tile_n=32)
    assert (c.stage_bytes, c.stages, c.smem_used) == (single.stage_bytes, single.stages, single.smem_used)
    bars = {b.name: b for b in gemm_layout(c).barriers}
    # each of the 4 warps of the stage's warpgroup releases it in both CTAs
    assert bars["ab_consumer"].counts == (8,) * c.stages and bars["ab_consumer"].multicast_mask == 0b11
    assert all(b.multicast_mask == 0 for name, b in bars.items() if name != "ab_consumer")
    assert gemm_layout(c).config["cluster_m"] == 2 and c.describe().endswith("pingpong cluster_m 2")
    cooperative = GemmConfig(target="sm_90a", cluster_m=2)
    assert {b.name: b for b in gemm_layout(cooperative).barriers}["ab_consumer"].counts == (16,) * cooperative.stages
    pair = GemmConfig(cta_group=2, tile_m=256)
    assert (pair.cluster_size, pair.cluster_rows) == (2, 256)


@pytest.mark.parametrize("kwargs, message", [
    (dict(cluster_m=2), r"GemmConfig.cluster_m must be 1 or 2 on sm_90a \(B multicast over a 2x1 cluster\), 1 on "
                        r"sm_100a \(cta_group pairs CTAs there\), got 2"),
    (dict(cluster_m=4, target="sm_90a"), r"GemmConfig.cluster_m must be 1 or 2 on sm_90a"),
    (dict(cluster_m=2, target="sm_90a", b_major="mn", tile_n=64), r"GemmConfig.tile_n must be >= 128 with cluster_m 2 "
                                                                  r"and b_major 'mn' \(each CTA of the cluster loads "
                                                                  r"B column blocks of 64\), got 64"),
])
def test_cluster_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        GemmConfig(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(dtype="fp8_e4m3"), r"GemmConfig.dtype must be one of bf16, fp16, got 'fp8_e4m3'"),
    (dict(target="sm_80"), r"target must be sm_90a or sm_100a, got 'sm_80'"),
    (dict(tile_m=96), r"GemmConfig.tile_m must be 128 on sm_100a with cta_group 1 \(128 TMEM lanes per CTA\), got 96"),
    (dict(tile_m=256, target="sm_90a"), r"GemmConfig.tile_m must be 64 or 128 on sm_90a \(one consumer warpgroup per 64 rows\), got 256"),
    (dict(tile_m=128, cta_group=2), r"GemmConfig.tile_m must be 256 on sm_100a with cta_group 2"),
    (dict(b_major="km"), r"GemmConfig.b_major must be 'k' \(B given as \(N, K\)\) or 'mn' \(B given as \(K, N\)\), got 'km'"),
    (dict(b_major="mn", tile_n=96, epi_tile_n=32), r"GemmConfig.tile_n / cta_group must be a multiple of 64 when b_major is 'mn'"),
    (dict(group_m=0), r"GemmConfig.group_m must be in \[1, 64\], got 0"),
    (dict(tile_n=100), r"GemmConfig.tile_n must be a multiple of 16 in \[16, 256\], got 100"),
    (dict(tile_k=32), r"GemmConfig.tile_k must be 64 \(one 128B swizzle row of bf16\), got 32"),
    (dict(num_stages=9), r"GemmConfig.num_stages must be in \[0, 8\] \(0: as many as fit\), got 9"),
    (dict(epi_tile_n=48), r"GemmConfig.epi_tile_n must be 16, 32 or 64 \(one swizzled row of at most 128 B\) and <= tile_n \(256\), got 48"),
    (dict(tile_n=96, epi_tile_n=64), r"GemmConfig.epi_tile_n must divide tile_n \(96\), got 64"),
    (dict(epi_load_stages=0), r"GemmConfig.epi_load_stages must be in \[1, 4\], got 0"),
    (dict(accum_stages=3), r"GemmConfig.accum_stages must be 1 or 2, got 3"),
    (dict(cta_group=4), r"GemmConfig.cta_group must be 1 or 2, got 4"),
    (dict(cta_group=2, target="sm_90a"), r"GemmConfig.cta_group must be 1 on sm_90a \(CTA-pair MMA is sm_100a\), got 2"),
    (dict(pingpong=True), r"GemmConfig.pingpong must be False on sm_100a \(one MMA warp feeds a TMEM accumulator\), "
                          r"got True"),
    (dict(pingpong=True, target="sm_90a"), r"GemmConfig.tile_n must be <= 192 with pingpong and tile_m 128 \(a "
                                           r"warpgroup holds its tile's f32 accumulator, at most 192 registers a "
                                           r"thread\), got 256"),
])
def test_field_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        GemmConfig(**kwargs)


@pytest.mark.parametrize("kwargs, reason", [
    (dict(num_stages=5), r"smem needs 311460 B, sm_100a has 232448 B: lower num_stages"),
    (dict(num_stages=1), r"num_stages = 1 must be >= 2 to overlap loads with MMA"),
])
def test_unsupported(kwargs, reason):
    with pytest.raises(ConfigError, match=reason):
        GemmConfig(**kwargs).validate()
