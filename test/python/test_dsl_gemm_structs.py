"""fa4_mlir.dsl additions of the GEMM port (issue 22): ``if_else`` (two-armed, carrying state), the bit
operations, and the GEMM's reference structs (``dsl.structs.gemm``) derived from ``fa4_mlir.layouts``."""

from __future__ import annotations

import re

import pytest

from fa4_mlir import dsl
from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.layouts import gemm_barriers, gemm_layout


def _kernel(body, target: str = "sm_100a") -> str:
    k = dsl.Kernel("t", target, num_warps=4)
    k.i32("n", doc="a flag")
    with k.body() as arg:
        body(k, arg)
    return k.source(grid="(1, 1, 1)").mlir


def test_if_else_yields_each_arms_state_and_rebinds_it_after():
    seen = {}

    def body(k, arg):
        x = dsl.Var(dsl.Value(1))
        before = x.value.value
        with dsl.if_else(arg.n == 0, carry=[x]) as branch:
            with branch.then_():
                x.value = x.value + 2
            with branch.else_():
                seen["else starts from the state before"] = x.value.value == before
                x.value = x.value * 3
        seen["after is the branch's result"] = x.value.value.owner.name == "scf.if"

    text = _kernel(body)
    assert re.search(r"= scf\.if %\w+ -> \(i32\) \{", text) and "} else {" in text
    assert "arith.addi" in text and "arith.muli" in text
    assert len(re.findall(r"scf\.yield %\w+ : i32", text)) == 2
    assert all(seen.values()) and len(seen) == 2, seen


def test_if_else_yields_the_state_unchanged_from_an_arm_not_written():
    def body(k, arg):
        x = dsl.Var(dsl.Value(5))
        with dsl.if_else(arg.n == 0, carry=[x]) as branch, branch.then_():
            x.value = x.value + 1

    text = _kernel(body)
    assert re.search(r"\} else \{\s*scf\.yield %c5_i32 : i32", text)


def test_if_else_builds_each_arm_once():
    def body(k, arg):
        with dsl.if_else(arg.n == 0) as branch:
            with branch.then_():
                pass
            with pytest.raises(RuntimeError, match="the then arm of an if_else must be built once, got it twice"):
                with branch.then_():
                    pass

    _kernel(body)


def test_bit_operations_are_located_at_the_author():
    def body(k, arg):
        dsl.andi(dsl.shrui(dsl.shli(dsl.xori(arg.n, 3), 4), 7), 7)

    text = _kernel(body)
    for op in ("xori", "shli", "shrui", "andi"):
        assert re.search(rf"arith\.{op} %\w+, %c\w+ : i32 loc\(#loc\d+\)", text), op
    assert "test_dsl_gemm_structs.py" in text


@pytest.mark.parametrize("kwargs", [dict(), dict(cta_group=2, tile_m=256), dict(target="sm_90a"),
                                    dict(target="sm_90a", pingpong=True, tile_n=192)],
                         ids=["sm_100a", "pair", "sm_90a", "sm_90a-pingpong"])
def test_gemm_structs_declare_the_layout(kwargs):
    from fa4_mlir.dsl.structs.gemm import GemmMBars, GemmSMem

    config = GemmConfig(**kwargs)
    made = {}

    def body(k, arg):
        made["smem"], made["mbars"] = GemmSMem(config), GemmMBars(config)
        if config.pingpong:  # warpgroup 0 hands each turn over first (the producer side), 1 hands it back
            made["turns"] = [(t.pipeline.name, t.side) for t in (made["mbars"].turn("mma", 0),
                                                                 made["mbars"].turn("epilogue", 1))]

    text = _kernel(body, config.target)
    layout = gemm_layout(config)
    assert re.findall(r'"fa4\.smem_region"\(\) \{[^}]*sym_name = "(\w+)"', text) == [
        r.name for r in layout.regions if r.name != "mbarriers"]
    assert re.findall(r'"fa4\.mbarrier_alloc"\(\) \{[^}]*sym_name = "(\w+)"', text) == [
        b.name for b in gemm_barriers(config)]
    assert re.findall(r'"fa4\.pipeline_create"\(%(\w+), %(\w+)\)', text)[0] == ("ab_producer", "ab_consumer")
    smem, mbars = made["smem"], made["mbars"]
    assert smem.out_tile_bytes == (config.epi_tile_bytes if config.has_tmem else
                                   (128 if config.pingpong else 64) * config.epi_row_bytes)
    assert mbars.ab_pipeline().stages == config.stages
    if config.pingpong:
        assert made["turns"] == [("mma_turn", "producer"), ("epilogue_turn", "consumer")]
    else:
        with pytest.raises(KeyError, match="GemmMBars pipeline must be one of .*, got 'mma_turn'"):
            mbars.turn("mma", 0)
    if not config.has_tmem:
        pipelines = "ab, epi, order, mma_turn, epilogue_turn" if config.pingpong else "ab, epi, order"
        with pytest.raises(KeyError, match=f"GemmMBars pipeline must be one of {pipelines}, got 'acc'"):
            mbars.accum_pipeline()
        with pytest.raises(KeyError, match="the TMEM accumulator must exist on the target, got sm_90a"):
            smem.accum_tmem()
    with pytest.raises(KeyError, match=r"GemmSMem region must be one of a, b, c, .*got 'q'"):
        smem._region("q")
    with pytest.raises(KeyError, match=r"GemmMBars array must be one of ab_producer, .*got 'kv_producer'"):
        mbars.barriers("kv_producer")


def test_epi_load_pipeline_sides_keep_to_their_methods():
    from fa4_mlir.dsl.structs.gemm import GemmMBars

    config = GemmConfig()

    def body(k, arg):
        mbars = GemmMBars(config)
        producer = mbars.epi_load_pipeline("producer")
        with producer.produce() as stage:
            stage.expect_bytes(config.epi_tile_bytes)
        with pytest.raises(RuntimeError, match="wait_producer must be called on the consumer side, got the producer"):
            producer.wait_producer()
        with pytest.raises(ValueError, match="side must be 'producer' or 'consumer', got 'both'"):
            mbars.load_order("both")

    text = _kernel(body)
    assert re.search(r'"fa4\.pipeline_producer_acquire"\(%epi,.*\n.*"fa4\.pipeline_producer_commit"\(%epi, %[\w#]+\) '
                     r'\{sub_stage = 0 : i64, tx_bytes = \d+ : i64\}.*\n.*"fa4\.pipeline_advance"\(%epi', text)
