"""The declarative op layer: IRDL emission, typed OpViews, keyword builders, field checks."""

from __future__ import annotations

import re

import pytest

from fa4_mlir._mlir import ir


def test_irdl_declares_every_op_and_type_without_aborting_constructs():
    from fa4_mlir.dialects.fa4 import DIALECT

    text = DIALECT.irdl_text()
    for cls in DIALECT.ops:
        assert f"irdl.operation @{cls.OPERATION_NAME.split('.', 1)[1]} {{" in text
    for t in DIALECT.types:
        assert f"irdl.type @{t.mnemonic}" in text
    # any_of over base constraints aborts MLIR 22 (toolchain notes 0.B); the layer never emits it.
    assert "irdl.any_of" not in text
    # IRDL op names allow only [a-z0-9_]; a dotted name would fail to load.
    assert all(re.fullmatch(r"fa4\.[a-z0-9_]+", cls.OPERATION_NAME) for cls in DIALECT.ops)


def test_only_required_attributes_are_in_irdl():
    from fa4_mlir.dialects.fa4 import DIALECT, SmemRegionOp

    block = DIALECT.irdl_text().split("irdl.operation @smem_region {")[1].split("}")[0]
    assert '"sym_name"' in block and '"bytes"' in block
    assert '"align"' not in block and '"offset"' not in block  # defaulted / optional: Python-checked
    assert {a.name for a in SmemRegionOp._attrs if a.required} == {"sym_name", "bytes"}


def test_loading_twice_into_one_context_is_a_no_op(ctx):
    from fa4_mlir.dialects.fa4 import DIALECT

    DIALECT.load(ctx)  # a second IRDL load would abort the process (toolchain notes 0.C)
    DIALECT.load(ctx)
    assert ctx.is_registered_operation("fa4.pipeline_create")


def test_parsed_ops_come_back_as_typed_opviews(ctx):
    from fa4_mlir.dialects.fa4 import MbarrierAllocOp, PipelineCreateOp

    m = ir.Module.parse("""
      %f = "fa4.mbarrier_alloc"() {sym_name = "f", num_barriers = 3, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
      %e = "fa4.mbarrier_alloc"() {sym_name = "e", num_barriers = 3, arrive_count = 2, arrival = "threads"} : () -> !fa4.mbarriers
      %p = "fa4.pipeline_create"(%f, %e) {sym_name = "p", num_stages = 3} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
    """)
    f, e, p = m.body.operations
    assert isinstance(f, MbarrierAllocOp) and isinstance(p, PipelineCreateOp)
    assert (p.num_stages, p.producer_sub_stages, p.consumer_sub_stages) == (3, 1, 1)  # defaults
    assert p.producer.sym_name == "f" and p.consumer.arrive_count == 2
    assert p.full == f.result and str(p.result.type) == "!fa4.pipeline"


def test_keyword_builders_and_snake_case_builders(module):
    from fa4_mlir.dialects import fa4

    full = fa4.mbarrier_alloc(sym_name="full", num_barriers=2, arrive_count=1, arrival="tx")
    empty = fa4.mbarrier_alloc(sym_name="empty", num_barriers=2, arrive_count=1, arrival="commit")
    assert isinstance(full, ir.Value) and str(full.type) == "!fa4.mbarriers"
    pipe = fa4.pipeline_create(full, empty, sym_name="kv", num_stages=2)
    stage, phase = fa4.pipeline_initial_state(pipe, side="producer")  # two results: a tuple
    op = fa4.pipeline_producer_acquire(pipe, stage, phase)  # no results: the op
    assert isinstance(op, fa4.PipelineProducerAcquireOp) and op.sub_stage == 0
    role_parent = fa4.warp_specialize(num_warps=4)
    with role_parent.region_ip():
        role = fa4.warp_role(sym_name="load", warps=[0], registers=40)
    assert role.warps == [0] and role.registers == 40
    assert module.operation.verify()
    assert str(fa4.pipeline_create.__signature__).startswith("(full, empty, *, sym_name, num_stages")


def test_builders_reject_bad_arguments_with_the_op_name(module):
    from fa4_mlir.dialects import fa4

    full = fa4.mbarrier_alloc(sym_name="f", num_barriers=1, arrive_count=1, arrival="tx")
    with pytest.raises(TypeError, match=r"'fa4.pipeline_create' builder: missing a required argument: 'empty'"):
        fa4.pipeline_create(full, sym_name="x", num_stages=1)
    with pytest.raises(TypeError, match=r"'fa4.pipeline_create' builder: missing a required argument: 'num_stages'"):
        fa4.pipeline_create(full, full, sym_name="x")
    with pytest.raises(ValueError, match=r"'fa4.pipeline_create' num_stages must be >= 1, got 0"):
        fa4.pipeline_create(full, full, sym_name="x", num_stages=0)
    with pytest.raises(ValueError, match=r"'fa4.mbarrier_alloc' arrival must be one of 'threads', 'tx', 'commit', got 'tma'"):
        fa4.mbarrier_alloc(sym_name="f", num_barriers=1, arrive_count=1, arrival="tma")
    with pytest.raises(TypeError, match=r"num_barriers must be an int, got '4'"):
        fa4.mbarrier_alloc(sym_name="f", num_barriers="4", arrive_count=1, arrival="tx")
    with pytest.raises(TypeError, match=r"warps must be a sequence of ints"):
        fa4.warp_role(sym_name="r", warps=[0.5])


def test_every_op_documents_semantics_and_lowering():
    from fa4_mlir.dialects.fa4 import DIALECT

    for cls in DIALECT.ops:
        assert cls.summary(), cls.OPERATION_NAME
        assert "Lowers to" in cls.description(), cls.OPERATION_NAME


def test_generated_docs_are_up_to_date():
    import pathlib

    from fa4_mlir.dialects.fa4 import DIALECT

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "dialect.md"
    assert doc.read_text() == DIALECT.markdown(), "regenerate: python -m fa4_mlir.tools.dialect_docs > docs/dialect.md"


def test_round_trip_test_covers_every_op_and_type():
    import pathlib

    from fa4_mlir.dialects.fa4 import DIALECT

    ops_test = (pathlib.Path(__file__).resolve().parents[1] / "Dialect" / "FA4" / "ops.mlir").read_text()
    for cls in DIALECT.ops:
        assert f'"{cls.OPERATION_NAME}"' in ops_test, f"{cls.OPERATION_NAME} missing from ops.mlir"
    for t in DIALECT.types:
        assert t.asm in ops_test, f"{t.asm} missing from ops.mlir"
