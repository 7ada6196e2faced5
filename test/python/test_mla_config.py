"""MLAConfig (the MLA forward's config): validation and its errors, the tile's shared memory, the
launch geometry, the kernel's parameters and registration, and every shipped config through the whole
compiler (protocol verifier on, ptxas -arch=sm_90a) with zero spills."""

from __future__ import annotations

import re

import pytest

from fa4_mlir.configs.mla import MLAConfig
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels.attention import hopper_mla, mla


def test_defaults_and_derived_sizes():
    c = MLAConfig()
    assert (c.target, c.dtype, c.form, c.causal, c.tile_heads, c.block_n, c.stages, c.group) == \
        ("sm_90a", "bf16", "absorbed", False, 0, 0, 0, 1)
    assert (c.heads_per_tile, c.bn, c.num_stages, c.rows) == (64, 32, 4, 64)  # the absorbed form's defaults
    assert (c.qk_depth, c.v_depth, c.positions) == (576, 512, 1)
    assert c.q_bytes == 64 * 576 * 2 and c.k_stage_bytes == 32 * 576 * 2 and c.v_stage_bytes == 0  # V: in K
    assert c.smem_bytes == 64 * 576 * 2 + 4 * 32 * 576 * 2 + 1024 <= 232448
    assert MLAConfig(tile_heads=16).positions == 4 and MLAConfig(tile_heads=1).positions == 64
    assert c.validate() is c
    assert c.describe() == "MLAConfig sm_90a bf16 absorbed heads/tile 64 BN 32 x4"
    p = MLAConfig(form="prefill", group=4, causal=True)
    assert (p.heads_per_tile, p.bn, p.num_stages, p.rows, p.positions, p.qk_depth, p.v_depth) == \
        (1, 128, 2, 128, 128, 192, 128)
    assert p.smem_bytes == 128 * 192 * 2 + 2 * (128 * 192 * 2 + 128 * 128 * 2) + 1024 <= 232448
    assert p.describe() == "MLAConfig sm_90a bf16 prefill heads/tile 1 BN 128 x2 group 4 causal"


@pytest.mark.parametrize("kwargs, message", [
    (dict(target="sm_100a", form="decode"), r"MLAConfig.form must be one of absorbed, prefill, got 'decode'"),
    (dict(target="sm_100a", form="prefill", dtype="fp8_e4m3"),
     r"MLAConfig.rope_dtype must be bf16 or fp16 with an fp8_e4m3 latent \(the rope columns stay 16-bit\), got ''"),
    (dict(target="sm_100a", tile_heads=256), r"MLAConfig.tile_heads must be in \[0, 128\] on sm_100a: the query "
                                             r"heads H, which the pair kernel packs into its rows \(0: 128"),
    (dict(target="sm_100a", block_n=32), r"MLAConfig.block_n must be 0 on sm_100a \(the kernel's layout "
                                         r"picks BN\), got 32"),
    (dict(target="sm_100a", stages=2), r"MLAConfig.stages must be 0 on sm_100a \(the kernel's layout picks "
                                       r"its slots\), got 2"),
    (dict(target="sm_100a", split_kv=True), r"MLAConfig.split_kv must be False on sm_100a \(no split-KV "
                                            r"kernel yet\), got True"),
    (dict(target="sm_100a", causal=1), r"MLAConfig.causal must be True or False, got 1"),
    (dict(target="sm_80"), r"target must be sm_90a or sm_100a, got 'sm_80'"),
    (dict(dtype="fp8_e4m3", rope_dtype="bf16"), r"MLAConfig.dtype must be bf16 or fp16 on sm_90a \(fp8_e4m3 "
                                                r"runs on sm_100a\), got 'fp8_e4m3'"),
    (dict(dtype="fp32"), r"MLAConfig.dtype must be one of bf16, fp16, fp8_e4m3, got 'fp32'"),
    (dict(rope_dtype="fp16"), r"MLAConfig.rope_dtype must be '' or 'bf16' \(the rope columns share the latent's "
                              r"dtype\), got 'fp16'"),
    (dict(target="sm_100a", dtype="fp8_e4m3"), r"MLAConfig.rope_dtype must be bf16 or fp16 with an fp8_e4m3 latent "
                                               r"\(the rope columns stay 16-bit\), got ''"),
    (dict(target="sm_100a", dtype="fp8_e4m3", rope_dtype="fp8_e4m3"), r"MLAConfig.rope_dtype must be bf16 or fp16 "
                                                                      r"with an fp8_e4m3 latent .* got 'fp8_e4m3'"),
    (dict(form="decode"), r"MLAConfig.form must be one of absorbed, prefill, got 'decode'"),
    (dict(causal=1), r"MLAConfig.causal must be True or False, got 1"),
    (dict(tile_heads=3), r"MLAConfig.tile_heads must be 0 or a power of 2 in \[1, 64\] \(query heads per 64-row "
                         r"tile\), got 3"),
    (dict(tile_heads=128), r"MLAConfig.tile_heads must be 0 or a power of 2 in \[1, 64\] .* got 128"),
    (dict(tile_heads=-1), r"MLAConfig.tile_heads must be .* got -1"),
    (dict(form="prefill", tile_heads=2), r"MLAConfig.tile_heads must be 0 for the prefill form \(a tile holds "
                                         r"positions of one head\), got 2"),
    (dict(block_n=48), r"MLAConfig.block_n must be 0 or one of 16, 32 \(keys per K tile; from 48 the consumers' S, "
                       r"P and O spill past 240 registers\), got 48"),
    (dict(block_n=True), r"MLAConfig.block_n must be 0 or one of 16, 32 .* got True"),
    (dict(form="prefill", block_n=32), r"MLAConfig.block_n must be 0 or one of 64, 80, 96, 112, 128 \(keys per "
                                       r"K/V tile\), got 32"),
    (dict(stages=1), r"MLAConfig.stages must be 0 or in \[2, 8\] \(K tiles in flight\), got 1"),
    (dict(stages=9), r"MLAConfig.stages must be 0 or in \[2, 8\] .* got 9"),
    (dict(group=2), r"MLAConfig.group must be 1 for the absorbed form \(every query head reads the one latent "
                    r"head\), got 2"),
    (dict(form="prefill", group=0), r"MLAConfig.group must be in \[1, 128\] \(query heads per K/V head\), got 0"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        MLAConfig(**kwargs)


def test_unsupported_configs_are_named():
    # Q 72 KiB + 5 stages of 36 KiB do not fit the 227 KiB
    with pytest.raises(ConfigError, match=r"MLAConfig sm_90a bf16 absorbed heads/tile 64 BN 32 x5: shared memory "
                                          r"must be <= 232448 bytes, got 259072"):
        MLAConfig(stages=5).validate()
    # prefill: Q 48 KiB + 3 stages of K (48 KiB) and V (32 KiB)
    with pytest.raises(ConfigError, match=r"MLAConfig sm_90a bf16 prefill heads/tile 1 BN 128 x3: shared memory "
                                          r"must be <= 232448 bytes, got 295936"):
        hopper_mla.build(MLAConfig(form="prefill", stages=3))
    assert MLAConfig(block_n=16, stages=8).validate() and MLAConfig(form="prefill", block_n=64, stages=4).validate()


def test_launch_geometry_and_its_errors():
    assert hopper_mla.launch_geometry(MLAConfig(), 32, 1, 128, 4096) == (1, 2, 32)  # decode: 64 heads a CTA
    assert hopper_mla.launch_geometry(MLAConfig(tile_heads=16), 2, 130, 16, 130) == (33, 1, 2)  # 4 positions
    assert hopper_mla.launch_geometry(MLAConfig(tile_heads=1), 1, 65, 3, 7) == (2, 3, 1)
    assert hopper_mla.launch_geometry(MLAConfig(form="prefill", group=2), 2, 129, 6, 7) == (2, 6, 2)  # 128 rows
    with pytest.raises(LaunchError, match=r"mla_attention: heads \(6\) must be a multiple of the config's group "
                                          r"\(4\)"):
        hopper_mla.launch_geometry(MLAConfig(form="prefill", group=4), 1, 1, 6, 5)
    with pytest.raises(LaunchError, match=r"mla_attention: batch, seq_q, heads and seq_k must be >= 1, got "
                                          r"1, 0, 64, 5"):
        hopper_mla.launch_geometry(MLAConfig(), 1, 0, 64, 5)
    with pytest.raises(LaunchError, match=r"mla_attention: heads \(96\) must be a multiple of the config's "
                                          r"tile_heads \(64\)"):
        hopper_mla.launch_geometry(MLAConfig(), 1, 1, 96, 5)
    with pytest.raises(LaunchError, match=r"mla_attention: heads / tile_heads and batch must be <= 65535, got 1, "
                                          r"70000"):
        hopper_mla.launch_geometry(MLAConfig(), 70000, 1, 64, 5)


def test_parameters_tensor_maps_and_registration():
    from fa4_mlir.kernels import KERNELS
    from fa4_mlir.torch.mla import tile_heads

    assert KERNELS["mla-attention"] == (MLAConfig, mla.build)  # sm_90a: hopper_mla; sm_100a: depth512.mla
    source = hopper_mla.build(MLAConfig(tile_heads=16, causal=True))
    maps = {p.name: p.tensor_map for p in source.params if p.tensor_map}
    # Q and O: 64 columns x 16 heads x 4 positions (the 64 rows); K: 64 columns x 32 keys of the one latent head
    assert maps["q_nope"].box == maps["q_rope"].box == maps["o"].box == (64, 16, 4, 1)
    assert maps["kv"].box == maps["k_rope"].box == (64, 1, 32, 1)
    assert {m.swizzle for m in maps.values()} == {"128B"}
    assert [p.name for p in source.params] == ["q_nope", "q_rope", "kv", "k_rope", "o", "lse", "seq_q", "seq_k",
                                              "num_heads", "scale_log2e", "write_lse"]
    assert source.grid.startswith("(ceil(Sq / 4), H / 16, B)")
    assert source.config == {"dtype": "bf16", "form": "absorbed", "causal": True, "tile_heads": 16, "block_n": 0,
                             "stages": 0, "group": 1, "split_kv": False}
    # V is not loaded: one K ring, no V ring, whose stages are released after P @ V
    text = source.mlir
    assert 'sym_name = "v"' not in text and 'sym_name = "k"' in text
    assert [tile_heads(h) for h in (1, 2, 16, 24, 96, 128)] == [1, 2, 16, 8, 32, 64]
    # prefill: 128 rows of one head (64 a warpgroup), separate K (k_nope, k_rope) and V maps
    source = hopper_mla.build(MLAConfig(form="prefill", group=2, block_n=96))
    maps = {p.name: p.tensor_map for p in source.params if p.tensor_map}
    assert list(maps) == ["q_nope", "q_rope", "k_nope", "k_rope", "v", "o"]
    assert maps["q_nope"].box == maps["o"].box == (64, 1, 64, 1) and maps["v"].box == (64, 1, 96, 1)
    assert source.grid.startswith("(ceil(Sq / 128), H, B)") and 'sym_name = "v"' in source.mlir


def test_split_kv_geometry_and_the_ops_choice():
    from fa4_mlir.torch.mla import num_splits, split_count

    config = MLAConfig(split_kv=True)
    assert hopper_mla.split_geometry(config, 32, 1, 128, 8192, 2) == ((2, 2, 32), 4096)
    assert hopper_mla.split_geometry(config, 1, 1, 64, 150, 3) == ((3, 1, 1), 64)  # 5 tiles: 2, 2, 1
    assert hopper_mla.split_geometry(config, 1, 1, 64, 100, 8) == ((4, 1, 1), 32)  # at most one range a tile
    assert hopper_mla.split_geometry(config, 1, 130, 64, 100, 2) == ((260, 1, 1), 64)  # x: tiles x ranges
    # decode on 132 SMs: B x H / 64 CTAs; ranges until the grid fills 90% of its last wave
    assert num_splits(256, 256, 132) == 1 and num_splits(64, 256, 132) == 2
    assert num_splits(8, 2048, 132) == 15  # 120 CTAs
    assert num_splits(2, 2048, 132) == 60 and num_splits(2, 640, 132) == 20  # ranges of >= 32 tiles
    assert num_splits(64, 63, 132) == 1  # two ranges would be shorter than 32 tiles
    assert split_count(32, 1, 8192, 128, False, 132) == 2 and split_count(32, 1, 8192, 128, True, 132) == 1
    source = hopper_mla.build(config)
    assert [p.name for p in source.params][4:] == ["o", "lse", "seq_q", "seq_k", "num_heads", "scale_log2e",
                                                   "num_splits", "split_keys"]
    assert source.grid.startswith("(ceil(Sq / 1) * num_splits, H / 64, B) (split_geometry)")
    with pytest.raises(ConfigError, match=r"MLAConfig.split_kv must be False unless the form is absorbed and not "
                                          r"causal \(a decode step over a cache\), got True"):
        MLAConfig(split_kv=True, causal=True)


SHIPPED = [dict(), dict(causal=True), dict(split_kv=True), dict(split_kv=True, tile_heads=8, dtype="fp16"), dict(dtype="fp16", tile_heads=16), dict(tile_heads=1, causal=True),
           dict(block_n=16, stages=8), dict(form="prefill"), dict(form="prefill", causal=True, group=4, dtype="fp16"),
           dict(form="prefill", block_n=64, stages=4)]


def test_sm100a_config_is_the_pair_kernels():
    c = MLAConfig(target="sm_100a", tile_heads=16)
    assert (c.depth512.qk_depth, c.depth512.rope_depth, c.depth512.group) == (512, 64, 16)
    assert MLAConfig(target="sm_100a").depth512.group == 128 and c.supported().ok
    assert "16 heads" in c.describe()
    with pytest.raises(ConfigError, match=r"MLAConfig.depth512 is the sm_100a pair kernel's layout; target must be "
                                          r"sm_100a, got 'sm_90a'"):
        MLAConfig().depth512


def test_sm100a_fp8_config_is_the_pair_kernels_fp8_latent():
    from fa4_mlir.configs.depth512 import Depth512Config

    c = MLAConfig(target="sm_100a", dtype="fp8_e4m3", rope_dtype="bf16", tile_heads=16)
    assert c.depth512 == Depth512Config(dtype="fp8_e4m3", rope_depth=64, rope_dtype="bf16", group=16)
    assert c.supported().ok and c.describe() == "MLAConfig sm_100a fp8_e4m3 (bf16 rope) absorbed pair kernel, 16 heads"
    # bf16/fp16: the rope shares the latent's dtype, spelled "" or the dtype; the pair kernel's config as before
    for rope in ("", "fp16"):
        assert MLAConfig(target="sm_100a", dtype="fp16", rope_dtype=rope).depth512 == \
            Depth512Config(dtype="fp16", rope_depth=64, group=128)


@pytest.mark.parametrize("kwargs", SHIPPED, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()) or "default")
def test_configs_assemble_without_spills(kwargs):
    from fa4_mlir.core.compiler import compile_kernel

    config = MLAConfig(**kwargs)
    result = compile_kernel(hopper_mla.build(config), stop="cubin")  # the protocol verifier runs by default
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["wgmma_serialized"] is False, m  # ptxas C7511: the wgmmas serialised
    assert m["threads"][0] == 384 and m["smem_bytes"] <= 232448
    ptx = result.ptx
    # S = Q K' (576 deep: 36 SS wgmmas of n = BN; prefill 192: 12) and O += P V over each warpgroup's 256
    # latent columns (prefill: its 128 V columns)
    bn, n_o = config.bn, 256 if config.form == "absorbed" else 128
    ss = re.findall(rf"wgmma.mma_async.sync.aligned.m64n{bn}k16\S+ \{{[^}}]+\}}, %rd\d+, %rd\d+,", ptx)
    assert len(ss) == 2 * 2 * config.qk_depth // 16  # two warpgroups, tile 0 and the loop
    rs = re.findall(rf"wgmma.mma_async.sync.aligned.m64n{n_o}k16\S+ \{{[^}}]+\}}, \{{%r\d+, %r\d+, %r\d+, %r\d+\}}, "
                    r"%rd\d+, p, 1, 1, 1;", ptx)
    assert len(rs) == 2 * 2 * bn // 16  # two warpgroups, the loop and the last tile
    assert re.search(r"setmaxnreg.inc.sync.aligned.u32\s+240;", ptx)


def test_the_verifier_rejects_the_shared_stage_released_after_q_k(monkeypatch):
    """The kernel's own protocol rule, as a mutant: V is the K stage's first columns, so releasing the
    stage once S = Q K' retired (what the attention kernel does with its separate K ring), not after the
    P @ V that reads it, lets the load warp refill it under the P @ V: the protocol verifier rejects it."""
    import types

    from fa4_mlir.core.compiler import CompileError, compile_kernel
    from fa4_mlir.kernels.attention import hopper_consumer

    init = hopper_consumer.Consumer.__init__

    def early_release(self, k, g, w):
        init(self, k, g, w)
        self.shared_kv = False  # release after S = Q K' ...
        ring = g.kp

        class NoVRelease:  # ... and not after P @ V
            def consumer(self):
                state = ring.consumer()
                state.consumer_release = lambda *args, **kwargs: None
                return state

        self.g = types.SimpleNamespace(**{**vars(g), "vp": NoVRelease()})

    monkeypatch.setattr(hopper_consumer.Consumer, "__init__", early_release)
    with pytest.raises(CompileError) as info:
        compile_kernel(hopper_mla.build(MLAConfig(stages=2)), stop="ptx")
    assert any("protocol error [parity]" in d and "k_full" in d for d in info.value.diagnostics), info.value.diagnostics


def test_verifier_multiplies_per_thread_values():
    """The protocol verifier's ``x * 0`` identity with a per-thread operand (the packed kernel's LSE index
    multiplies per-thread heads by an unknown seq_q): no identity, no crash on the array's truth value."""
    import numpy as np

    from fa4_mlir.protocol.values import simplify

    per_thread = np.arange(4)
    assert simplify("muli", per_thread, None) is None and simplify("muli", None, per_thread) is None
    assert simplify("muli", 0, per_thread) is None and simplify("muli", None, 0) == 0
