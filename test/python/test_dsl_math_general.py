"""fa4_mlir.dsl.math's general helpers (constants of any type, intrinsic calls, FMA) and
dsl.element_ptr, each at the author's line."""

from __future__ import annotations

import re

import pytest


def _ops(module) -> str:
    return module.operation.get_asm(enable_debug_info=True)


def test_constants_intrinsics_fma_and_pointers(ctx, module):
    from fa4_mlir._mlir import ir
    from fa4_mlir.dsl import math as s
    from fa4_mlir.dsl import element_ptr

    f32, i32 = s.f32(), ir.IntegerType.get_signless(32)
    x = s.const(f32, float("-inf"))
    s.const(ir.VectorType.get([4], f32), 2.0)
    s.const(ir.VectorType.get([4], i32), range(4, 8))
    s.const(s.i1(), True)
    y = s.intrinsic("llvm.nvvm.ex2.approx.ftz.f", f32, x)
    s.fma(x, y, x)
    element_ptr(_pointer(), s.const(i32, 3), f32)
    text = _ops(module)
    for needle in ("arith.constant 0xFF800000 : f32", "arith.constant dense<2.000000e+00> : vector<4xf32>",
                   "arith.constant dense<[4, 5, 6, 7]> : vector<4xi32>", "arith.constant true",
                   'llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"', "llvm.intr.fma",
                   "llvm.getelementptr %"):
        assert needle in text, needle
    assert re.search(r"getelementptr %\w+\[%\w+\] : \(!llvm.ptr<3>, i32\) -> !llvm.ptr<3>, f32", text)
    assert f'"{__file__}"' in text  # every op at this file's lines


def _pointer():
    from fa4_mlir._mlir import ir, llvm

    return llvm.mlir_zero(ir.Type.parse("!llvm.ptr<3>"))


def test_a_dense_constant_needs_one_value_per_element(ctx, module):
    from fa4_mlir._mlir import ir
    from fa4_mlir.dsl import math as s

    with pytest.raises(ValueError, match=r"one value per element of vector<4xi32>, got 3"):
        s.const(ir.VectorType.get([4], ir.IntegerType.get_signless(32)), [1, 2, 3])


def test_locations_name_each_calls_column(ctx, module):
    """here() caches a code object's positions: two calls on one line still get their own columns."""
    from fa4_mlir.dsl import math as s

    a = s.const(s.f32(), 1.0); b = s.const(s.f32(), 2.0)  # noqa: E702 - two calls on one line
    columns = [int(re.search(r":(\d+)\)$", str(v.owner.location)).group(1)) for v in (a, b)]
    assert columns[0] < columns[1]
