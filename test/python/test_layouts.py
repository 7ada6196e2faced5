"""The reference layouts (spec 2.1, 2.2, 3.3, 3.4) placed by the shared placement rules."""

from __future__ import annotations

import pytest

from fa4_mlir.configs import Depth512Config, FA4Config
from fa4_mlir.layouts import depth512_layout, fa4_layout
from fa4_mlir.placement import place_contiguous, place_smem, tmem_allocation


def placed(layout):
    smem = place_smem([(r.name, r.bytes, r.align, r.alias_of, 0) for r in layout.regions])
    bars = place_contiguous([(b.name, len(b.counts)) for b in layout.barriers])
    tmem = place_contiguous([(t.name, t.columns) for t in layout.tmem])
    return smem, bars, tmem


def test_fa4_bf16_d128_2q_fused():
    # Spec 2.1: 65536 + 5 x 32768 + 1024 + 23*8 + 4 = 230588 (the config reserves 230596: 8 B more).
    layout = fa4_layout(FA4Config(qk_depth=128))
    smem, bars, tmem = placed(layout)
    assert smem.offsets == {"q": 0, "o": 0, "kv": 65536, "correction": 229376, "mbarriers": 230400,
                            "tmem_addr": 230584}
    assert smem.total == 230588 and layout.config["smem_budget"] == 230596
    # Spec 3.3 example: 0-3 S consumers, 4-7 C, 8-9 S producers, 10 Q1Sync, 11-20 KV ring, 21-22 O.
    assert bars.offsets == {"S0_consumer": 0, "S1_consumer": 2, "C0_producer": 4, "C0_consumer": 5,
                            "C1_producer": 6, "C1_consumer": 7, "S0_producer": 8, "S1_producer": 9, "Q1_sync": 10,
                            "kv_producer": 11, "kv_consumer": 16, "O0_producer": 21, "O1_producer": 22}
    assert bars.total == layout.num_mbarriers == 23
    counts = [n for b in layout.barriers for n in b.counts]
    assert counts[:4] == [256, 128, 256, 128] and counts[4:8] == [128] * 4 and counts[8:] == [1] * 15
    assert tmem.offsets == {"S0": 0, "S1": 128, "O0": 256, "O1": 384} and tmem_allocation(tmem.total) == 512


def test_fa4_bf16_d64_2q_split():
    # Spec 2.1: 32768 (Q) + 4 x (24576 + 24576) (K, V) + 1024 + 29*8 + 4 = 230636 = the config's budget.
    layout = fa4_layout(FA4Config(qk_depth=64))
    smem, bars, tmem = placed(layout)
    assert smem.offsets == {"q": 0, "o": 0, "k": 32768, "v": 131072, "correction": 229376, "mbarriers": 230400,
                            "tmem_addr": 230632}
    assert smem.total == layout.config["smem_budget"] == 230636
    assert bars.total == 29 and bars.offsets["k_producer"] == 11 and bars.offsets["v_producer"] == 19
    assert bars.offsets["O0_producer"] == 27
    assert tmem.offsets == {"S0": 0, "S1": 192, "O0": 384, "O1": 448} and tmem.total == 512


@pytest.mark.parametrize("kwargs", [dict(qk_depth=128, pair_cta=True), dict(qk_depth=128, num_q=1),
                                    dict(dtype="fp8_e4m3", qk_depth=128), dict(qk_depth=64)])
def test_split_layouts_fill_exactly_the_budget(kwargs):
    # In split mode the barrier accounting is exact: the placed total equals the config's smem_used.
    layout = fa4_layout(FA4Config(**kwargs))
    smem, bars, _ = placed(layout)
    assert smem.total == layout.config["smem_budget"]
    nkv, nqk = layout.config["num_kv_stages"], layout.config["num_qk_stages"]
    q1 = nqk if kwargs.get("num_q", 2) == 2 else 0
    assert bars.total == 4 + 4 + 2 + q1 + 2 * nqk * nkv + 2 * nkv + 2


@pytest.mark.parametrize("qk_depth, num_q, fused, nkv, bufs", [(64, 2, False, 8, 8), (64, 1, True, 17, 9),
                                                            (128, 2, True, 11, 6), (128, 1, False, 6, 6)])
def test_fp8_token_scale_layouts(qk_depth, num_q, fused, nkv, bufs):
    # fp8 MHA with fp32 per-token scales: q_scale (BM fp32) then k_scale (one BN buffer per K stage, or
    # per two slots of a fused ring) after the correction slots, 128-byte aligned without padding.
    c = FA4Config(dtype="fp8_e4m3", qk_depth=qk_depth, num_q=num_q, scale_dtype="fp32")
    assert (c.swizzle_bytes, c.mma_k, c.fused_kv, c.num_kv_stages, c.num_k_scale_bufs) == (64, 32, fused, nkv, bufs)
    layout = fa4_layout(c)
    smem, _, _ = placed(layout)
    sizes = {r.name: r.bytes for r in layout.regions}
    assert sizes["q_scale"] == c.bm * 4 and sizes["k_scale"] == bufs * c.bn * 4
    assert smem.offsets["q_scale"] == smem.offsets["correction"] + c.correction_bytes
    assert smem.offsets["k_scale"] == smem.offsets["q_scale"] + c.bm * 4
    assert smem.offsets["mbarriers"] == smem.offsets["k_scale"] + bufs * c.bn * 4
    assert smem.offsets["q_scale"] % 128 == smem.offsets["k_scale"] % 128 == 0 and (c.bn * 4) % 128 == 0
    # the placed total is the config's budget (fused: the reference's 8 B of over-reservation)
    assert c.smem_used - smem.total == (8 if fused and num_q == 2 and c._derived_qk_stages() > 1 else 0)
    assert FA4Config(dtype="fp8_e4m3", qk_depth=qk_depth, num_q=num_q).num_k_scale_bufs == 0


def test_pair_cta_counts_both_ctas():
    layout = fa4_layout(FA4Config(qk_depth=128, pair_cta=True))
    by_name = {b.name: b for b in layout.barriers}
    assert by_name["S0_consumer"].counts == (512, 256) and by_name["S0_consumer"].cta_group == 2
    assert by_name["C0_producer"].counts == (128,) and by_name["C0_producer"].cta_group == 1  # CTA-local


@pytest.mark.parametrize("kwargs, fixed, nkv, total", [
    (dict(qk_depth=512), 10, 4, 229780),
    (dict(qk_depth=256), 8, 8, 230084),
    (dict(dtype="fp8_e4m3", qk_depth=512), 10, 11, 229892),
    (dict(qk_depth=512, rope_depth=64, group=16), 10, 3, 205188),  # absorbed MLA: Q 64 x 576, 3 slots
    # fp8 latent, bf16 rope: Q 64 x (512 B + 128 B), 10 slots of 16 KiB (the rope chunk fills one)
    (dict(qk_depth=512, rope_depth=64, group=16, dtype="fp8_e4m3", rope_dtype="bf16"), 10, 10, 221684),
])
def test_depth512_layouts(kwargs, fixed, nkv, total):
    layout = depth512_layout(Depth512Config(**kwargs))
    smem, bars, tmem = placed(layout)
    assert smem.total == total == layout.config["smem_budget"]
    assert bars.offsets["kv_producer"] == fixed and bars.total == fixed + 2 * nkv
    counts = [b.counts[0] for b in layout.barriers]
    split = fixed == 10
    expected = [512] + ([256] if split else []) + [256, 256, 128, 128] + [1] * (4 if split else 3)
    assert counts[:fixed] == expected
    assert tmem.total == 512


def test_depth512_d512_named_barrier_indices():
    _, bars, tmem = placed(depth512_layout(Depth512Config(qk_depth=512)))
    assert bars.offsets == {"PO_lo": 0, "PO_hi": 1, "S_even_consumer": 2, "S_odd_consumer": 3, "C_producer": 4,
                            "C_consumer": 5, "S_even_producer": 6, "S_odd_producer": 7, "O_mma_lo": 8,
                            "O_mma_hi": 9, "kv_producer": 10, "kv_consumer": 14}
    assert tmem.offsets == {"O_lo": 0, "O_hi": 128, "S_even": 256, "S_odd": 384}


@pytest.mark.parametrize("kwargs, regions", [
    # DeepSeek-style MLA: 128 nope + 64 rope (bf16), fused ring with ceil(nkv/2) rope buffers.
    (dict(qk_depth=192, ov_depth=128, is_mla=True, rope_dtype="bf16"),
     [("q", 0, 65536), ("q_rope", 65536, 32768), ("o", 0, 65536), ("kv", 98304, 98304), ("rope", 196608, 32768),
      ("correction", 229376, 1024), ("mbarriers", 230400, 152), ("tmem_addr", 230552, 4)]),
    # fp8 nope + bf16 rope with fp32 per-token scales: split rings, q_scale and k_scale tiles.
    (dict(qk_depth=192, ov_depth=128, is_mla=True, rope_dtype="bf16", dtype="fp8_e4m3", scale_dtype="fp32"),
     [("q", 0, 32768), ("q_rope", 32768, 32768), ("o", 0, 32768), ("k", 65536, 98304), ("v", 163840, 49152),
      ("correction", 212992, 1024), ("q_scale", 214016, 1024), ("k_scale", 215040, 1536),
      ("mbarriers", 216576, 200), ("tmem_addr", 216776, 4)]),
])
def test_mla_layouts_place_to_the_config_budget(kwargs, regions):
    c = FA4Config(**kwargs)
    layout = fa4_layout(c)
    smem, _, _ = placed(layout)
    assert [(r.name, smem.offsets[r.name], r.bytes) for r in layout.regions] == regions
    assert smem.total == c.smem_used


def test_placing_a_layout_reports_the_passes_errors(ctx):
    # An FA4 layout has TMEM regions; sm_90a has no tensor memory, so fa4-allocate-tmem fails.
    from fa4_mlir.core.layout_ir import place_layout
    from fa4_mlir.errors import LoweringError

    with pytest.raises(LoweringError, match=r"'fa4.tmem_region' needs tensor memory, which sm_100a has and "
                                            r"sm_90a has not"):
        place_layout(fa4_layout(FA4Config()), "sm_90a")
