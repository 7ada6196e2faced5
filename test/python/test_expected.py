"""--verify-diagnostics: expected-* comments and how diagnostics are matched against them."""

from __future__ import annotations

from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.core.expected import check_expectations, parse_expectations

SOURCE = """\
op1 // expected-error {{same line}}
// expected-warning @+2 {{two below}}
// expected-note @below {{next ir line}}
op4
op5
// expected-remark @-1 {{one above}}
// expected-error @above {{skips designators}}
"""


def test_designators_resolve_to_lines():
    got = [(e.severity, e.line, e.text) for e in parse_expectations(SOURCE)]
    assert got == [("error", 1, "same line"), ("warning", 4, "two below"), ("note", 4, "next ir line"),
                   ("remark", 5, "one above"), ("error", 5, "skips designators")]


def _d(severity, line, message):
    return Diagnostic(severity, message, "f.mlir", line, 1)


def test_all_matched_is_clean_and_substrings_match():
    diags = [_d("error", 1, "xx same line xx"), _d("warning", 4, "two below"), _d("note", 4, "next ir line"),
             _d("remark", 5, "one above"), _d("error", 5, "it skips designators")]
    assert check_expectations(SOURCE, "f.mlir", diags) == []


def test_missing_wrong_line_and_unexpected_are_reported():
    diags = [_d("error", 2, "same line"), _d("warning", 4, "two below")]
    problems = check_expectations(SOURCE, "f.mlir", diags)
    assert "f.mlir:2:1: error: unexpected error: same line" in problems
    assert 'f.mlir:1: error: expected error "same line" was not produced (on line 1)' in problems
    assert len(problems) == 1 + 4  # one unexpected, four expectations left unmatched


def test_notes_are_matched_too():
    note = _d("note", 4, "next ir line")
    diags = [Diagnostic("error", "same line", "f.mlir", 1, 1, notes=(note,))]
    problems = check_expectations(SOURCE, "f.mlir", diags)
    assert not any("next ir line" in p for p in problems)
