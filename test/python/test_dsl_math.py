"""fa4_mlir.dsl.math (f32 constants, exp2/log2 as the PTX approximations, fma) and fa4_mlir.dsl.names
(names for op results and block arguments in the printed IR), with their errors."""

from __future__ import annotations

import pytest

from fa4_mlir import dsl
from fa4_mlir._mlir import ir, scf
from fa4_mlir.dsl import math as fm
from fa4_mlir.dsl.names import name, name_all


def _module(build):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        build()
    return module.operation.get_asm(use_name_loc_as_prefix=True)


def test_math_builds_the_intrinsics_and_constants(ctx):
    def build():
        x = name(fm.constant(fm.NEG_INF), "ninf")
        y = fm.exp2(x)
        fm.fma(fm.log2(y), fm.constant(fm.LN2), fm.constant(2))

    text = _module(build)
    assert "%ninf = arith.constant 0xFF800000 : f32" in text
    assert 'llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%ninf) : (f32) -> f32' in text
    assert 'llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"' in text
    assert "arith.constant 0.693147182 : f32" in text and "arith.constant 2.000000e+00 : f32" in text
    assert "llvm.intr.fma(" in text


def test_math_errors(ctx):
    with ir.InsertionPoint(ir.Module.create().body):
        with pytest.raises(TypeError, match=r"exp2's operand must be an f32 value, got i32"):
            fm.exp2(dsl.Value(1).value)
        with pytest.raises(TypeError, match=r"a float constant must be an int or a float, got str"):
            fm.constant("1.0")


def test_names_reach_block_arguments_and_results(ctx):
    def build():
        zero = name(dsl.Value(0), "zero")
        loop = scf.ForOp(zero.value, zero.value, zero.value, [zero.value, zero.value])
        name_all(loop.inner_iter_args, ["stage", "phase"])
        name(loop.induction_variable, "j")
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(list(loop.inner_iter_args))
        name(loop.results[0], "after")

    text = _module(build)
    assert "%after:2 = scf.for %j = %zero to %zero step %zero iter_args(%stage = %zero, %phase = %zero)" in text
    with pytest.raises(ValueError, match=r"a value name must be an identifier, got 'a b'"):
        name(None, "a b")
    with pytest.raises(TypeError, match=r"only an SSA value can be named, got int \('x'\)"):
        name(3, "x")
    with pytest.raises(ValueError, match=r"name_all needs one label per value, got 1 labels for 2 values"):
        name_all([None, None], ["a"])
