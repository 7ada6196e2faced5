"""fa4_mlir.dsl.structs.attention: SM100AttentionSMem, FA4MiscMBars and FA4Tmem declare what
fa4_layout lists, and their static offsets, indices and columns are where the allocation passes put
them (place_layout) and where the spec's worked examples say (sections 2.1 and 3.3)."""

from __future__ import annotations

import re

import pytest

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.layouts import fa4_layout

CONFIGS = [dict(), dict(head_dim=64), dict(num_q=1), dict(head_dim=96, dtype="fp16", causal=True), dict(group=4),
           dict(num_q=1, head_dim=64, group=16)]
# fp8 e4m3 (64B swizzle), tensor-wise and per-token scales: both K/V ring modes occur in each
CONFIGS += [dict(dtype="fp8_e4m3", head_dim=hd, num_q=nq, token_scales=ts)
            for hd in (64, 128) for nq in (1, 2) for ts in (False, True)]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items()) or "default"


def _declare(config, pipelines: bool = True):
    """A kernel body declaring the three structs; returns (smem, mbars, tmem, the kernel's MLIR)."""
    from fa4_mlir import dsl
    from fa4_mlir.dsl.structs.attention import FA4Tmem, SM100AttentionSMem

    k = dsl.Kernel("structs", "sm_100a", 16)
    with k.body():
        smem = SM100AttentionSMem(config)
        mbars = smem.misc_mbars()
        tmem = FA4Tmem(config)
        if pipelines:
            mbars.declare_pipelines()
            mbars.init()
    return smem, mbars, tmem, k.source(grid="(1, 1, 1)").mlir


@pytest.mark.parametrize("kwargs", CONFIGS, ids=_ids)
def test_static_placement_is_the_allocation_passes(ctx, kwargs):
    from fa4_mlir.core.layout_ir import place_layout

    config = AttentionConfig(**kwargs)
    smem, mbars, tmem, _ = _declare(config)
    layout = fa4_layout(config.fa4)
    _, placed = place_layout(layout, "sm_100a")
    assert smem.size == placed.smem_bytes
    for name, offset in placed.region_offsets.items():
        assert smem.offset(name) == offset, name
    assert {b.name: mbars.index(b.name) for b in layout.barriers} == placed.barrier_index
    assert mbars.num_mbars() == layout.num_mbarriers
    assert {t.name: tmem.column(t.name) for t in layout.tmem} == placed.tmem_column
    assert smem.kv_offset * config.fa4.qkv.bytes == smem.offset("kv" if config.fa4.fused_kv else "k")
    assert smem.correction_offset * 4 == smem.offset("correction")
    assert smem.mbar_offset * 8 == smem.offset("mbarriers")


@pytest.mark.parametrize("kwargs", CONFIGS, ids=_ids)
def test_declarations_follow_the_layout(kwargs):
    config = AttentionConfig(**kwargs)
    _, _, _, text = _declare(config)
    layout = fa4_layout(config.fa4)
    regions = re.findall(r'"fa4\.smem_(region|alias)"\(%?\w*\) \{[^}]*bytes = (\d+) : i64[^}]*sym_name = "(\w+)"',
                         text)
    declared = [(r.name, r.bytes) for r in layout.regions if r.name != "mbarriers"]  # the allocator adds it
    assert [(n, int(b)) for _, b, n in regions] == declared
    assert [n for kind, _, n in regions if kind == "alias"] == [r.name for r in layout.regions if r.alias_of]
    arrays = re.findall(r'"fa4\.mbarrier_alloc"\(\) \{arrival = "(\w+)", '
                        r'(arrive_count = \d+ : i64|arrive_counts = array<[^>]*>), '
                        r'num_barriers = (\d+) : i64, sym_name = "(\w+)"', text)
    want = []
    for b in layout.barriers:
        counts = (f"arrive_count = {b.counts[0]} : i64" if len(set(b.counts)) == 1
                  else f"arrive_counts = array<i32: {', '.join(map(str, b.counts))}>")
        want.append((b.arrival, counts, str(len(b.counts)), b.name))
    assert arrays == want
    assert re.findall(r'tmem_region"\(\) \{columns = (\d+) : i64, sym_name = "(\w+)"', text) == \
        [(str(t.columns), t.name) for t in layout.tmem]
    assert text.count('"fa4.mbarrier_init"') == len(layout.barriers)


def test_spec_worked_totals_and_barrier_map():
    """Spec 2.1: d64 bf16 2Q split = 230636 bytes, d128 bf16 2Q fused = 230588; spec 3.3: bf16 d128
    2Q fused, nkv = 5: S consumers 0-3, C 4-7, S producers 8-9, Q1Sync 10, KV ring 11-20, O
    producers 21-22, 23 barriers."""
    smem, _, _, _ = _declare(AttentionConfig(head_dim=64))
    assert smem.size == 230636
    smem, mbars, _, _ = _declare(AttentionConfig(head_dim=128))
    assert smem.size == 230588
    assert [mbars.index(n) for n in ("S0_consumer", "S1_consumer", "C0_producer", "C0_consumer", "C1_producer",
                                     "C1_consumer", "S0_producer", "S1_producer", "Q1_sync", "kv_producer",
                                     "kv_consumer", "O0_producer", "O1_producer")] == \
        [0, 2, 4, 5, 6, 7, 8, 9, 10, 11, 16, 21, 22]
    assert mbars.num_mbars() == 23


def test_accessors_return_the_declared_values():
    from fa4_mlir.dsl import PipelineState

    for kwargs, fused in ((dict(), True), (dict(head_dim=64), False)):
        config = AttentionConfig(**kwargs)
        from fa4_mlir import dsl
        from fa4_mlir.dsl.structs.attention import FA4Tmem, SM100AttentionSMem

        k = dsl.Kernel("structs", "sm_100a", 16)
        with k.body():
            smem = SM100AttentionSMem(config)
            mbars = smem.misc_mbars()
            tmem = FA4Tmem(config)
            mbars.declare_pipelines()
            name = lambda v: v.owner.attributes["sym_name"].value  # noqa: E731
            assert name(smem.q_smem()) == "q" and name(smem.o_smem()) == "o"
            assert name(smem.correction_smem()) == "correction" and name(smem.tmem_addr_ptr()) == "tmem_addr"
            assert (smem.v_smem_base() == smem.k_smem_base()) is fused
            assert name(smem.k_smem_base()) == ("kv" if fused else "k")
            assert name(smem.v_smem_base()) == ("kv" if fused else "v")
            assert (mbars.get_v_mbars() == mbars.get_k_mbars()) is fused
            assert (mbars.v_pipeline() is mbars.k_pipeline()) is fused
            assert mbars.k_pipeline().stages == config.fa4.num_kv_stages
            assert name(mbars.q1_wait_mbar()) == "Q1_sync"
            assert name(mbars.producer_o0()) == "O0_producer" and name(mbars.producer_o1()) == "O1_producer"
            assert name(mbars.combined_p_o_consumer(1)) == "S1_consumer"
            assert name(tmem.s(1)) == "S1" and name(tmem.o(0)) == "O0"
            for state, side in ((mbars.producer_s0(), "producer"), (mbars.consumer_s(1), "consumer"),
                                (mbars.producer_c(0), "producer"), (mbars.consumer_c1(), "consumer")):
                assert isinstance(state, PipelineState) and state.side == side


@pytest.mark.parametrize("call, error, message", [
    (lambda s, m: s.rope_smem_base(), ValueError, 
     r"SM100AttentionSMem has no rope region: rope_depth is 0 in this config"),
    (lambda s, m: s.q_scale_smem(), ValueError, r"SM100AttentionSMem has no q_scale region: scale_dtype is None"),
    (lambda s, m: s.k_scale_smem(), ValueError, r"SM100AttentionSMem has no k_scale region"),
    (lambda s, m: s.offset("p"), ValueError, 
     r"region must be one of q, o, k, v, correction, mbarriers, tmem_addr, got 'p'"),
    (lambda s, m: m.q1_wait_mbar(), ValueError, r"FA4MiscMBars has no Q1_sync barriers: num_q is 1 in this config"),
    (lambda s, m: m.q0_wait_mbar(), ValueError, r"FA4MiscMBars has no Q0_sync barriers: page_gather is False in this "
                                                r"config \(Q0 rides on the first K tile's barriers\)"),
    (lambda s, m: m.pipeline_order_wait(0), ValueError, r"no order barriers: use_order_barriers is False"),
    (lambda s, m: m.index("order"), ValueError, r"FA4MiscMBars has no 'order' barriers in this config"),
    (lambda s, m: m.consumer_s(0), RuntimeError, r"pipelines must be declared first \(declare_pipelines\(\)\)"),
    (lambda s, m: m.producer_c(2), ValueError, r"must be 0 or 1, got 2"),
])
def test_missing_regions_and_misuse_are_named(call, error, message):
    from fa4_mlir import dsl
    from fa4_mlir.dsl.structs.attention import SM100AttentionSMem

    k = dsl.Kernel("structs", "sm_100a", 16)
    with k.body():
        smem = SM100AttentionSMem(AttentionConfig(num_q=1))
        with pytest.raises(error, match=message):
            call(smem, smem.misc_mbars())


def test_config_must_be_an_sm100_layout():
    from fa4_mlir.dsl.structs.attention import SM100AttentionSMem

    with pytest.raises(TypeError, match="config must be an FA4Config or an sm_100a AttentionConfig, got int"):
        SM100AttentionSMem(3)
