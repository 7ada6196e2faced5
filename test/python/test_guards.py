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
    # a flag LLVM does not know is ignored (with a warning): "+ptx86x" is no PTX version (found by the fuzzer)
    assert check_serializable(ir.Module.parse(src.format(feat=', features = "+ptx86x"')).operation)
    assert not check_serializable(ir.Module.parse(src.format(feat=', features = "+ptx80,+ptx86"')).operation)


def test_index_array_is_refused_before_the_parser_sees_it():
    from fa4_mlir.core.guards import check_parsable

    src = 'func.func @f() attributes {a = array<i32: 1>, b = array< index : 0>} { return }'
    (error,) = check_parsable(src, "in.mlir")
    assert str(error) == ("in.mlir:1:58: error: array element type must be an integer or float type, got 'index' "
                          "(write array<i64: ...>)")
    # the words in a comment or a string literal are not code
    assert not check_parsable('// array<index: 0>\nfunc.func @f() attributes {s = "x\\"array<index>"} { return }', "x")


@pytest.mark.parametrize("alignment, ok", [(0, True), (16, True), (1 << 32, True), (7, False), (96, False),
                                           (1 << 33, False), (-4, False)])
def test_alignments_llvm_cannot_represent(ctx, alignment, ok):
    m = ir.Module.parse(f"""gpu.module @k [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {{
      llvm.func @f(%p: !llvm.ptr<1>) {{
        %v = llvm.load %p {{alignment = {alignment} : i64}} : !llvm.ptr<1> -> i32
        llvm.return
      }}
    }}""")
    errors = check_serializable(m.operation)
    assert (not errors) == ok
    if not ok:
        assert errors[0].message == f"'llvm.load' alignment must be 0 or a power of two <= 4294967296, got {alignment}"


@pytest.mark.parametrize("features, ok", [("+ptx86", True), ("+ptx86,-foo", True), (",+ptx86", True),
                                          ("ptx86", False), (" +ptx86", False), ("+ptx86,sm_90a", False)])
def test_target_features_need_their_sign(ctx, features, ok):
    m = ir.Module.parse(f'gpu.module @k [#nvvm.target<chip = "sm_100a", features = "{features}">] {{}}')
    errors = check_serializable(m.operation)
    assert (not errors) == ok
    if not ok:
        assert f'start with \'+\' or \'-\' (e.g. "+ptx86"), got "{features}"' in errors[0].message


def test_parser_aborts_are_refused_in_code_only():
    from fa4_mlir.core.guards import check_parsable

    src = ('// llvm.extractvalue %s[4294967296] #nvvm.target<chip = "9">\n'
           'func.func @f() attributes {a = "llvm.insertvalue %v, %s[4294967296]"} { return }\n'
           'gpu.module @k [#nvvm.target<chip = "sm">] {}\n'
           '%x = llvm.insertvalue %v, %s[0, 4294967297] : !t')
    assert [(d.line, d.message) for d in check_parsable(src, "in.mlir")] == [
        (3, '#nvvm.target chip must be a name like "sm_100a", got "sm"'),
        (4, "'llvm.insertvalue' position must be < 4294967296, got [0, 4294967297]")]


@pytest.mark.parametrize("dims, ok", [([2, 1, 1], True), ([0, 0, 0], True), ([0, 1, 1], False), ([1, 0, 1], False)])
def test_cluster_shapes_nvptx_cannot_print(ctx, dims, ok):
    m = ir.Module.parse(f"""gpu.module @k [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {{
      llvm.func @f() attributes {{nvvm.kernel, nvvm.cluster_dim = array<i32: {", ".join(map(str, dims))}>}} {{
        llvm.return
      }}
    }}""")
    errors = check_serializable(m.operation)
    assert (not errors) == ok
    if not ok:
        assert errors[0].message.endswith(f"nvvm.cluster_dim must have every dimension >= 1 (or all 0: no cluster), "
                                          f"got {dims}")
