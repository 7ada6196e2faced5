"""IR checks that stand in for MLIR 22 aborts during serialization."""

from __future__ import annotations

import pytest

from fa4_mlir._mlir import ir
from fa4_mlir.core.guards import check_serializable


@pytest.mark.parametrize("chip, features, ok", [
    ("sm_100a", "+ptx80", False), ("sm_100a", "+ptx86", True), ("sm_100a", "", True),
    ("sm_90a", "+ptx78", False), ("sm_90a", "+ptx80", True), ("sm_120a", "+ptx86", False),
])
def test_ptx_version_must_support_the_chip(ctx, chip, features, ok):
    m = ir.Module.parse(f'gpu.module @k [#nvvm.target<chip = "{chip}", features = "{features}">] {{}}')
    errors = check_serializable(m.operation)
    assert (not errors) == ok
    if not ok:
        assert f"for chip '{chip}', got {features}" in errors[0].message


def test_cta_only_tma_needs_ptx86_on_sm90a(ctx):
    src = """gpu.module @k [#nvvm.target<chip = "sm_90a"{feat}>] {{
      llvm.func @t(%m: !llvm.ptr, %d: !llvm.ptr<3>, %b: !llvm.ptr<3>) attributes {{nvvm.kernel}} {{
        %c0 = llvm.mlir.constant(0 : i32) : i32
        nvvm.cp.async.bulk.tensor.shared.cluster.global %d, %m, %b, box[%c0] {{isCTAOnly = true}} : !llvm.ptr<3>, !llvm.ptr
        llvm.return
      }}
    }}"""
    assert check_serializable(ir.Module.parse(src.format(feat="")).operation)
    assert not check_serializable(ir.Module.parse(src.format(feat=', features = "+ptx86"')).operation)


def test_index_array_is_refused_before_the_parser_sees_it():
    from fa4_mlir.core.guards import check_parsable

    src = 'func.func @f() attributes {a = array<i32: 1>, b = array< index : 0>} { return }'
    (error,) = check_parsable(src, "in.mlir")
    assert str(error) == ("in.mlir:1:58: error: array element type must be an integer or float type, got 'index' "
                          "(write array<i64: ...>)")
    # the words in a comment or a string literal are not code
    assert not check_parsable('// array<index: 0>\nfunc.func @f() attributes {s = "x\\"array<index>"} { return }', "x")
