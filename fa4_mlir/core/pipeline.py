"""Textual pass pipelines that mix fa4 Python passes with upstream MLIR passes.

MLIR 22 cannot name a Python pass in a pipeline string, so the text is split here: each top-level
element that names an fa4 pass becomes a Python pass; runs of upstream elements stay text and go
to MLIR's own parser (which handles nesting and options). Every element is validated before
anything runs, with the column of the offending element, and option values known to abort MLIR 22
are rejected here (toolchain notes, case E).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile

from fa4_mlir._mlir import ir, passmanager
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.errors import PipelineError
from fa4_mlir.passes import PASSES
from fa4_mlir.passes.base import Fa4Pass

_ANCHOR = "builtin.module"
# gpu-module-to-binary{format=X} / gpu-lower-to-nvvm-pipeline{cubin-format=X}: any other X trips an
# std::optional assertion that aborts the process at run time in MLIR 22.
_BINARY_FORMATS = ("llvm", "offloading", "isa", "assembly", "bin", "binary", "fatbin", "fatbinary")
_FORMAT_OPTION = re.compile(r"(?<![\w-])(cubin-format|format)\s*=\s*([^\s,}]*)")


@dataclasses.dataclass(frozen=True)
class Element:
    """One top-level pipeline element: ``name{options}(nested)`` starting at ``column`` (1-based)."""

    text: str
    name: str
    options: str  # inside the braces, "" if none
    nested: str | None  # inside the parentheses, None if none
    column: int


@dataclasses.dataclass(frozen=True)
class Step:
    """A unit of the pass manager: an upstream pipeline text or an fa4 Python pass."""

    column: int
    text: str | None = None
    fa4_pass: Fa4Pass | None = None

    def describe(self) -> str:
        return self.fa4_pass.name if self.fa4_pass is not None else self.text


def split_elements(text: str, offset: int = 0) -> list[Element]:
    """Split ``a,b{x=1},c(d,e)`` at top-level commas; columns are 1-based in the original text."""
    elements, depth, start, quote = [], [], 0, False
    for i, ch in enumerate(text + ","):
        if quote:
            quote = ch != '"'
        elif ch == '"':
            quote = True
        elif ch in "({":
            depth.append(ch)
        elif ch in ")}":
            if not depth or {"(": ")", "{": "}"}[depth.pop()] != ch:
                raise PipelineError(f"unbalanced '{ch}' in pass pipeline", column=offset + i + 1)
        elif ch == "," and not depth:
            raw = text[start:i]
            lead = len(raw) - len(raw.lstrip())
            if raw.strip():
                elements.append(_element(raw.strip(), offset + start + lead + 1))
            elif i < len(text):
                raise PipelineError("empty element in pass pipeline", column=offset + i + 1)
            start = i + 1
    if depth or quote:
        raise PipelineError("unbalanced brackets or quotes in pass pipeline", column=offset + len(text) + 1)
    return elements


def _element(text: str, column: int) -> Element:
    m = re.match(r"[A-Za-z0-9_.\-]+", text)
    if not m:
        raise PipelineError(f"expected a pass name, got '{text}'", column=column)
    name, rest = m.group(0), text[m.end():].strip()
    options, nested = "", None
    if rest.startswith("{"):
        close = _matching(rest, 0)
        options, rest = rest[1:close], rest[close + 1:].strip()
    if rest.startswith("("):
        close = _matching(rest, 0)
        nested, rest = rest[1:close], rest[close + 1:].strip()
    if rest:
        raise PipelineError(f"unexpected '{rest}' after pass '{name}'", column=column)
    return Element(text, name, options, nested, column)


def _matching(text: str, i: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        depth += text[j] in "({"
        depth -= text[j] in ")}"
        if depth == 0:
            return j
    raise PipelineError(f"unbalanced brackets in '{text}'")  # split_elements already balanced them


def _parse_options(element: Element) -> dict[str, str]:
    options = {}
    for item in element.options.split():
        key, sep, value = item.partition("=")
        if not sep:
            raise PipelineError(f"option '{item}' of pass '{element.name}' must be key=value",
                                column=element.column)
        options[key] = value
    return options


def parse_pipeline(text: str, check_upstream: bool = True) -> list[Step]:
    """Turn a pipeline string into pass-manager steps, or raise PipelineError naming the column.

    Accepts ``builtin.module(a,b)`` (as mlir-opt) or a bare ``a,b`` list. fa4 passes must be at the
    top level: they walk the whole module themselves. ``check_upstream=False`` skips parsing each
    upstream element in a Context of its own (about 10 ms each), for the compiler's own pipelines,
    which test_compiler parses with the check.
    """
    body, offset = text.strip(), len(text) - len(text.lstrip())
    if body.startswith(_ANCHOR):
        (outer,) = split_elements(body, offset) or [None]
        if outer is None or outer.name != _ANCHOR or outer.nested is None or outer.options:
            raise PipelineError(f"expected '{_ANCHOR}(...)' around the pass list", column=offset + 1)
        body, offset = outer.nested, offset + body.index("(") + 1
    steps: list[Step] = []
    for element in split_elements(body, offset):
        if element.name in PASSES:
            if element.nested is not None:
                raise PipelineError(f"fa4 pass '{element.name}' takes no nested pipeline",
                                    column=element.column)
            cls = PASSES[element.name]()
            try:
                steps.append(Step(element.column, fa4_pass=cls.from_options(_parse_options(element))))
            except PipelineError as exc:
                raise PipelineError(str(exc), column=element.column) from None
            continue
        if check_upstream:
            _check_upstream(element)
        if steps and steps[-1].text is not None:
            steps[-1] = Step(steps[-1].column, text=f"{steps[-1].text},{element.text}")
        else:
            steps.append(Step(element.column, text=element.text))
    return steps


def _check_upstream(element: Element) -> None:
    """Reject what MLIR's parser rejects (with its message) and what would abort MLIR at run time."""
    for nested in _fa4_names_inside(element):
        raise PipelineError(
            f"fa4 pass '{nested}' cannot be nested under '{element.name}': fa4 passes run on the "
            f"whole module; put it at the top level of the pipeline", column=element.column)
    for m in _FORMAT_OPTION.finditer(element.text):
        if m.group(2) not in _BINARY_FORMATS:
            raise PipelineError(
                f"option '{m.group(1)}' must be one of {', '.join(_BINARY_FORMATS)}, got '{m.group(2)}'",
                column=element.column)
    with ir.Context() as ctx, _captured_stderr() as err:
        ctx.enable_multithreading(False)
        try:
            passmanager.PassManager.parse(f"{_ANCHOR}({element.text})")
        except ValueError as exc:
            err.seek(0)
            # MLIR's message repeats the pipeline with a caret under it; keep only the sentences.
            lines = [ln.strip() for ln in (str(exc) + "\n" + err.read()).splitlines()]
            lines = [ln for ln in lines if ln and ln not in (element.text, f"{_ANCHOR}({element.text})") and set(ln) != {"^"}]
            detail = " ".join(re.sub(r"MLIR Textual PassPipeline Parser:\d+:\d+: error: ", "", ln) for ln in lines)
            detail = detail.replace(" : for the", ": for the")
            if "does not refer to a registered pass" in detail:
                detail += " (fa4-opt --list-passes lists the fa4 passes)"
            raise PipelineError(detail or f"cannot parse pass '{element.name}'",
                                column=element.column) from None


def _fa4_names_inside(element: Element) -> list[str]:
    if element.nested is None:
        return []
    found = []
    for inner in split_elements(element.nested):
        found += [inner.name] if inner.name in PASSES else _fa4_names_inside(inner)
    return found


@contextlib.contextmanager
def _captured_stderr():
    """Capture what C++ writes to fd 2 (LLVM's option parser reports bad values there)."""
    with tempfile.TemporaryFile(mode="w+") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield tmp
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def build_pass_manager(steps: list[Step], *, report: list[Diagnostic]) -> passmanager.PassManager:
    """A PassManager running ``steps``; fa4 passes append their diagnostics to ``report``."""
    pm = passmanager.PassManager(_ANCHOR)
    for step in steps:
        if step.fa4_pass is None:
            pm.add(step.text)
        else:
            pm.add(_as_callable(step.fa4_pass, report), name=type(step.fa4_pass).__name__,
                   argument=step.fa4_pass.name, description=step.fa4_pass.summary())
    return pm


def _as_callable(fa4_pass: Fa4Pass, report: list[Diagnostic]):
    def run(op: ir.Operation, pass_) -> None:
        diagnostics = fa4_pass.run(op)
        report.extend(diagnostics)
        if any(d.severity == "error" for d in diagnostics):
            pass_.signal_pass_failure()

    return run
