"""Depth512AttentionSMem / Depth512MBars (fa4_mlir.dsl.structs.depth512): what they declare is what the
spec's tables say (spec 2.2, 3.4, worked totals of 1.5), and their Python-side offsets are where the
allocation passes put things."""

from __future__ import annotations

import pytest

from fa4_mlir import dsl
from fa4_mlir._mlir import ir
from fa4_mlir.configs.depth512 import Depth512Config
from fa4_mlir.core.layout_ir import ALLOCATE
from fa4_mlir.core.pipeline import build_pass_manager, parse_pipeline
from fa4_mlir.dsl.structs.depth512 import Depth512AttentionSMem

# spec 1.5's worked shared-memory totals
WORKED = {("bf16", 512): 229780, ("bf16", 256): 230084, ("fp8_e4m3", 512): 229892}
MLA_SMEM = 205188  # bf16 d512 + rope 64 (absorbed MLA)
# spec 3.4: barrier index by name, split_o (d512) and not (d256)
SPEC_INDEX = {
    True: {"PO_lo": 0, "PO_hi": 1, "S_even_consumer": 2, "S_odd_consumer": 3, "C_producer": 4, "C_consumer": 5,
           "S_even_producer": 6, "S_odd_producer": 7, "O_mma_lo": 8, "O_mma_hi": 9, "KV": 10},
    False: {"PO_lo": 0, "S_even_consumer": 1, "S_odd_consumer": 2, "C_producer": 3, "C_consumer": 4,
            "S_even_producer": 5, "S_odd_producer": 6, "O_mma_lo": 7, "KV": 8},
}
SPEC_COUNT = {"PO_lo": 512, "PO_hi": 256, "S_even_consumer": 256, "S_odd_consumer": 256, "C_producer": 128,
              "C_consumer": 128, "S_even_producer": 1, "S_odd_producer": 1, "O_mma_lo": 1, "O_mma_hi": 1,
              "kv_producer": 1, "kv_consumer": 1}


def _build(config: Depth512Config):
    k = dsl.Kernel("d512", "sm_100a", 16, cluster=(2, 1, 1))
    with k.body():
        smem = Depth512AttentionSMem(config)
        mbars = smem.misc_mbars()
        mbars.init()
    return k, smem, mbars


def _ops(k) -> list:
    func = k.module.body.operations[0].regions[0].blocks[0].operations[0]
    return list(func.regions[0].blocks[0].operations)


@pytest.mark.parametrize("dtype, depth, rope", [*((t, d, 0) for t, d in WORKED), ("bf16", 512, 64)])
def test_offsets_are_where_the_allocation_passes_put_them(dtype, depth, rope):
    config = Depth512Config(dtype=dtype, qk_depth=depth, rope_depth=rope)
    k, smem, mbars = _build(config)
    assert smem.smem_size == config.smem_used == (MLA_SMEM if rope else WORKED[dtype, depth])
    if rope:  # absorbed MLA: Q is 64 x 576 (the rope columns after the latent ones), three KV slots
        assert (smem.offset("p"), smem.offset("kv"), mbars.KV_offset, mbars.size) == (73728, 106496, 10, 16)
    with k.module.context:
        build_pass_manager(parse_pipeline(ALLOCATE), report=[]).run(k.module.operation)
    placed = {"fa4.smem_region": {}, "fa4.mbarrier_alloc": {}, "fa4.tmem_region": {}}
    field = {"fa4.smem_region": "offset", "fa4.mbarrier_alloc": "index", "fa4.tmem_region": "column"}
    for op in _ops(k):
        name = op.operation.name
        if name in placed:
            attrs = op.operation.attributes
            placed[name][ir.StringAttr(attrs["sym_name"]).value] = ir.IntegerAttr(attrs[field[name]]).value
    assert placed["fa4.smem_region"] == {r: smem.offset(r) for r in placed["fa4.smem_region"]}
    assert placed["fa4.mbarrier_alloc"] == {b: smem.declared.barrier_index(b) for b in placed["fa4.mbarrier_alloc"]}
    assert placed["fa4.tmem_region"] == {t: smem.declared.tmem_column(t) for t in placed["fa4.tmem_region"]}
    assert placed["fa4.tmem_region"] == {name: first for name, (first, _) in config.tmem_columns.items()}
    assert smem.offset("o") == smem.offset("q") == 0 and smem.offset("p") == config.q_bytes


@pytest.mark.parametrize("depth", (512, 256))
def test_barrier_offsets_and_counts_follow_the_spec_table(depth):
    config = Depth512Config(qk_depth=depth)
    _, _, mbars = _build(config)
    want = SPEC_INDEX[config.split_o]
    for name, index in want.items():
        assert getattr(mbars, f"{name}_offset") == index, name
    assert mbars.num_fixed == want["KV"]
    # StagedPipeline's indexing (spec 3.2): every producer (full) barrier, then every consumer one
    assert mbars._d.barrier_index("kv_consumer") == want["KV"] + config.num_kv_stages
    assert mbars.size == want["KV"] + 2 * config.num_kv_stages
    counts = {}
    for b in mbars._d.layout.barriers:
        counts[b.name] = set(b.counts)
    assert counts == {name: {n} for name, n in SPEC_COUNT.items() if name in counts}
    assert ("PO_hi" in counts) == ("O_mma_hi" in counts) == config.split_o


def test_pipelines_pair_the_reference_barriers():
    k, smem, mbars = _build(Depth512Config(qk_depth=512))
    pipes = {}
    for op in _ops(k):
        if op.operation.name == "fa4.pipeline_create":
            full, empty = (ir.StringAttr(o.owner.attributes["sym_name"]).value for o in op.operation.operands)
            pipes[ir.StringAttr(op.operation.attributes["sym_name"]).value] = (full, empty)
    assert pipes == {"s_even": ("S_even_producer", "S_even_consumer"), "s_odd": ("S_odd_producer", "S_odd_consumer"),
                     "c": ("C_producer", "C_consumer"), "o_lo": ("O_mma_lo", "PO_lo"), "o_hi": ("O_mma_hi", "PO_hi"),
                     "kv": ("kv_producer", "kv_consumer")}
    assert mbars.get_kv_mbars().stages == Depth512Config(qk_depth=512).num_kv_stages


def test_the_mma_o_producers_start_at_phase_zero_the_others_at_the_pipeline_default():
    k = dsl.Kernel("d512", "sm_100a", 16, cluster=(2, 1, 1))
    with k.body():
        mbars = Depth512AttentionSMem(Depth512Config(qk_depth=512)).misc_mbars()
        o_lo, s_even = mbars.producer_o_lo(), mbars.producer_s_even()
        assert o_lo.phase.owner.name == "arith.constant"
        assert ir.IntegerAttr(o_lo.phase.owner.attributes["value"]).value == 0
        assert s_even.phase.owner.name == "fa4.pipeline_initial_state"


def test_declarations_carry_the_authors_line():
    k, _, _ = _build(Depth512Config(qk_depth=256))
    region = next(op for op in _ops(k) if op.operation.name == "fa4.smem_region")
    assert "test_dsl_structs_depth512.py" in str(region.operation.location)


def test_errors_name_what_is_wrong():
    _, smem, mbars = _build(Depth512Config(qk_depth=256))
    with pytest.raises(AttributeError, match=r"PO_hi exists only with split_o \(ov_depth 512\), got ov_depth 256"):
        mbars.PO_hi_offset
    with pytest.raises(AttributeError, match="O_mma_hi exists only with split_o"):
        mbars.O_mma_hi_offset
    with pytest.raises(AttributeError, match="PO_hi exists only with split_o"):
        mbars.producer_o_hi()
    with pytest.raises(KeyError, match=r"'O_lo' must be a region, barrier array or TMEM region of the depth512 layout"):
        smem.tmem("O_lo")
    with pytest.raises(TypeError, match="config must be a Depth512Config, got dict"):
        Depth512AttentionSMem({})
