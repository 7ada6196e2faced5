"""The GEMM kernel builder against its layout table and launch rules (the launch rules need no MLIR;
building the kernel does: it is built with fa4_mlir.dsl)."""

from __future__ import annotations

import re

import pytest

from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels import gemm
from fa4_mlir.layouts import gemm_layout

CONFIGS = [dict(), dict(target="sm_90a"), dict(target="sm_90a", b_major="mn", dtype="fp16"),
           dict(cta_group=2, tile_m=256), dict(tile_n=128, epi_tile_n=32, accum_stages=1),
           dict(target="sm_90a", tile_m=64, tile_n=128),
           dict(target="sm_90a", pingpong=True, tile_n=192, epi_tile_n=32),
           dict(target="sm_90a", pingpong=True, tile_m=64, b_major="mn"),
           dict(target="sm_90a", pingpong=True, tile_n=192, epi_tile_n=32, cluster_m=2),
           dict(target="sm_90a", cluster_m=2, b_major="mn")]


def _declared(text: str, op: str) -> list[dict[str, str]]:
    """The attributes of every ``fa4.<op>`` in ``text``, in order (the printer's generic form:
    attributes sorted, integers typed ``: i64``)."""
    return [{k: v.strip('"') for k, v in re.findall(r'(\w+) = ("[^"]*"|\d+)', m.group(1))}
            for m in re.finditer(rf'"fa4\.{op}"\(\) \{{([^}}]*)\}}', text)]


@pytest.mark.parametrize("kwargs", CONFIGS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()) or "default")
def test_kernel_declares_the_layout_tables_barriers_and_regions(kwargs):
    config = GemmConfig(**kwargs)
    text = gemm.build(config).mlir
    layout = gemm_layout(config)
    barriers = [(a["sym_name"], int(a["num_barriers"]), int(a["arrive_count"]), a["arrival"],
                 int(a.get("cta_group", 1)), int(a.get("multicast_mask", 0)))
                for a in _declared(text, "mbarrier_alloc")]
    assert barriers == [(b.name, len(b.counts), b.counts[0], b.arrival, b.cta_group, b.multicast_mask)
                        for b in layout.barriers]
    assert ("nvvm.cluster_dim = array<i32: 2, 1, 1>" in text) == (config.cluster_size == 2)
    regions = {a["sym_name"]: int(a["bytes"]) for a in _declared(text, "smem_region")}
    expected = {r.name: r.bytes for r in layout.regions if r.name != "mbarriers"}
    if "tmem_addr" in expected:
        expected["tmem_addr"] = 4
    assert regions == expected
    tmem = {a["sym_name"]: int(a["columns"]) for a in _declared(text, "tmem_region")}
    assert tmem == {t.name: t.columns for t in layout.tmem}


def test_source_describes_its_tensor_maps():
    sm90 = gemm.build(GemmConfig(target="sm_90a", b_major="mn"))
    maps = {p.name: p.tensor_map for p in sm90.params if p.tensor_map}
    assert maps["a"].box == (64, 128) and maps["a"].swizzle == "128B"
    assert maps["b"].box == (64, 64)  # a 128B-wide column block of the (K, N) matrix
    assert maps["c"].box == (64, 128) and maps["d"].box == (64, 64) and maps["d"].swizzle == "128B"
    pair = gemm.build(GemmConfig(cta_group=2, tile_m=256))
    maps = {p.name: p.tensor_map for p in pair.params if p.tensor_map}
    assert maps["a"].box == (64, 128) and maps["b"].box == (64, 128)  # each CTA loads half of A and of B
    assert [p.name for p in pair.params] == ["a", "b", "c", "d", "num_m", "num_n", "k_tiles", "alpha", "beta", "has_c"]
    cluster = gemm.build(GemmConfig(target="sm_90a", pingpong=True, tile_n=192, epi_tile_n=32, cluster_m=2))
    maps = {p.name: p.tensor_map for p in cluster.params if p.tensor_map}
    assert maps["a"].box == (64, 128) and maps["b"].box == (64, 96)  # each CTA of the cluster loads half of B
    # B's two halves, each loaded by one CTA (a branch on its rank) and multicast to both, in the tile's first
    # K block and in the K loop
    loads = re.findall(r'"fa4\.tma_load"\([^)]*\) \{([^}]*)\}', cluster.mlir)
    assert [("multicast_mask = 3" in a, "dst_offset = 12288" in a) for a in loads if "bytes = 12288" in a] == [
        (True, False), (True, True)] * 2


def test_launch_geometry_is_persistent_and_pairs_ctas():
    config = GemmConfig(target="sm_90a")
    grid, scalars = gemm.launch_geometry(config, 8192, 8192, 8192, 132)
    assert grid == (132,) and scalars == {"num_m": 64, "num_n": 32, "k_tiles": 128}
    assert gemm.launch_geometry(config, 100, 100, 1, 132) == ((1,), {"num_m": 1, "num_n": 1, "k_tiles": 1})
    pair = GemmConfig(cta_group=2, tile_m=256)
    assert gemm.launch_geometry(pair, 1000, 1000, 64, 148)[0] == (32,)  # 4 x 4 tiles, 2 CTAs each
    assert gemm.launch_geometry(pair, 8192, 8192, 64, 147)[0] == (146,)  # whole pairs only
    cluster = GemmConfig(target="sm_90a", cluster_m=2)  # a cluster's tile: 256 rows, 2 CTAs
    assert gemm.launch_geometry(cluster, 1000, 1000, 64, 132) == ((32,), {"num_m": 4, "num_n": 4, "k_tiles": 1})
    assert gemm.launch_geometry(cluster, 8192, 8192, 64, 131)[0] == (130,)  # whole clusters only
    assert gemm.launch_geometry(cluster, 100, 100, 64, 1)[0] == (2,)


@pytest.mark.parametrize("shape, message", [
    ((0, 8, 8), r"gemm: the output must have 1 to 2147483647 tiles of 128x256, got 0 for 0x8"),
    ((8, 8, 0), r"gemm: K must be >= 1, got 0"),
])
def test_launch_geometry_errors(shape, message):
    with pytest.raises(LaunchError, match=message):
        gemm.launch_geometry(GemmConfig(), *shape, 132)


def test_build_rejects_configs_that_do_not_fit():
    from fa4_mlir.errors import ConfigError

    with pytest.raises(ConfigError, match=r"smem needs \d+ B, sm_90a has 232448 B: lower num_stages"):
        gemm.build(GemmConfig(target="sm_90a", num_stages=6))


@pytest.mark.parametrize("m, n, ctas, pingpong", [
    (8192, 8192, 132, True), (16384, 8192, 132, True), (8192, 28672, 132, True),  # many tiles a CTA
    (4096, 4096, 132, False), (2048, 2048, 132, False),  # few: 6 pingpong rounds against 4, 2 against 1
    (128, 128, 132, True), (4096, 4096, 1000, True),  # one round either way: the smaller tile
])
def test_the_op_takes_pingpong_where_its_rounds_cost_less(m, n, ctas, pingpong):
    """``choose_schedule``: the cooperative 128 x 256 tile or the pingpong 128 x 192 one, by rounds of
    tiles per CTA times the tile's area over its rate (the sweep in docs/PERF.md)."""
    base = GemmConfig(target="sm_90a", b_major="mn")
    chosen = gemm.choose_schedule(base, m, n, ctas)
    assert chosen.pingpong is pingpong
    assert chosen == (GemmConfig(target="sm_90a", b_major="mn", **gemm.SM90_PINGPONG) if pingpong else base)


def test_the_schedule_choice_keeps_other_configs():
    for config in (GemmConfig(), GemmConfig(target="sm_90a", tile_m=64), GemmConfig(target="sm_90a", pingpong=True,
                                                                                   tile_m=64)):
        assert gemm.choose_schedule(config, 8192, 8192, 132) is config
