"""``--verify-diagnostics``: match emitted diagnostics against ``expected-*`` comments.

Syntax as in mlir-opt: ``// expected-error @+1 {{text}}`` where the designator is ``@+N``,
``@-N``, ``@above``, ``@below`` or absent (the comment's own line), and ``text`` must occur in the
message. Severity is ``error``, ``warning``, ``note`` or ``remark``.
"""

from __future__ import annotations

import dataclasses
import re

from fa4_mlir.core.diagnostics import Diagnostic

_EXPECT = re.compile(r"expected-(error|warning|note|remark)\s*(?:@\s*([+-]\d+|above|below))?\s*\{\{(.*?)\}\}")


@dataclasses.dataclass(frozen=True)
class Expectation:
    severity: str
    line: int  # 1-based line the diagnostic must be reported on
    text: str
    comment_line: int


def parse_expectations(source: str) -> list[Expectation]:
    lines = source.split("\n")
    only_designators = [bool(_EXPECT.search(s)) and s.strip().startswith("//") for s in lines]
    found = []
    for i, line in enumerate(lines, start=1):
        for m in _EXPECT.finditer(line):
            severity, where, text = m.groups()
            if where is None:
                target = i
            elif where in ("above", "below"):
                step = -1 if where == "above" else 1
                target = i + step
                while 1 <= target <= len(lines) and only_designators[target - 1]:
                    target += step
            else:
                target = i + int(where)
            found.append(Expectation(severity, target, text, i))
    return found


def check_expectations(source: str, file: str, diagnostics: list[Diagnostic]) -> list[str]:
    """Error lines for unmatched expectations and unexpected diagnostics; empty means all matched."""
    expected = parse_expectations(source)
    flat = [d for top in diagnostics for d in (top, *top.notes)]
    matched: set[int] = set()
    problems = []
    for d in flat:
        hit = next((k for k, e in enumerate(expected) if k not in matched and e.severity == d.severity
                    and e.line == d.line and e.text in d.message), None)
        if hit is None:
            problems.append(f"{d.place()}error: unexpected {d.severity}: {d.message}")
        else:
            matched.add(hit)
    for k, e in enumerate(expected):
        if k not in matched:
            problems.append(f"{file}:{e.comment_line}: error: expected {e.severity} \"{e.text}\" "
                            f"was not produced (on line {e.line})")
    return problems
