"""Splitting textual pipelines into fa4 Python passes and upstream text."""

from __future__ import annotations

import dataclasses

import pytest

from fa4_mlir.core.pipeline import parse_pipeline, split_elements
from fa4_mlir.errors import PipelineError
from fa4_mlir.passes.base import Fa4Pass


def test_split_keeps_nesting_options_and_columns():
    els = split_elements('a, b{x=1 y="p,q"},gpu.module(c,d{z=2})')
    assert [(e.name, e.options, e.nested, e.column) for e in els] == [
        ("a", "", None, 1), ("b", 'x=1 y="p,q"', None, 4), ("gpu.module", "", "c,d{z=2}", 19)]


def test_upstream_runs_merge_and_fa4_passes_split_them():
    steps = parse_pipeline("builtin.module(canonicalize,cse,fa4-verify,gpu.module(canonicalize),cse)")
    assert [(s.text, s.fa4_pass.name if s.fa4_pass else None) for s in steps] == [
        ("canonicalize,cse", None), (None, "fa4-verify"), ("gpu.module(canonicalize),cse", None)]
    assert [s.column for s in steps] == [16, 33, 44]


@pytest.mark.parametrize("text, message, column", [
    ("builtin.module(fa4-verify,nope)", "'nope' does not refer to a registered pass", 27),
    ("func.func(cse,fa4-verify)", "fa4 pass 'fa4-verify' cannot be nested under 'func.func'", 1),
    ("fa4-verify(cse)", "fa4 pass 'fa4-verify' takes no nested pipeline", 1),
    ("fa4-verify{x}", "option 'x' of pass 'fa4-verify' must be key=value", 1),
    ("cse,,cse", "empty element in pass pipeline", 5),
    ("cse)", "unbalanced ')' in pass pipeline", 4),
    ("builtin.module{x=1}(cse)", "expected 'builtin.module(...)' around the pass list", 1),
    ("cse x", "unexpected 'x' after pass 'cse'", 1),
    ("cse,{x=1}", "expected a pass name, got '{x=1}'", 5),
    ("gpu-module-to-binary{format=ptx}", "option 'format' must be one of llvm,", 1),
])
def test_bad_pipelines_name_the_column(text, message, column):
    with pytest.raises(PipelineError, match=None) as info:
        parse_pipeline(text)
    assert message in str(info.value) and info.value.column == column


@dataclasses.dataclass(frozen=True)
class _OptionsPass(Fa4Pass):
    """Test pass with options."""

    name = "fa4-test-options"
    bound: int = 8
    strict: bool = False


def test_pass_options_are_typed_fields():
    assert _OptionsPass.from_options({"bound": "0x10", "strict": "true"}) == _OptionsPass(bound=16, strict=True)
    with pytest.raises(PipelineError, match="option 'bound' of pass 'fa4-test-options' must be a int, got 'many'"):
        _OptionsPass.from_options({"bound": "many"})
    with pytest.raises(PipelineError, match="option 'strict' of pass 'fa4-test-options' must be a bool, got 'yes'"):
        _OptionsPass.from_options({"strict": "yes"})
    with pytest.raises(PipelineError, match=r"pass 'fa4-test-options' has no option 'depth' \(options: bound, strict\)"):
        _OptionsPass.from_options({"depth": "1"})
