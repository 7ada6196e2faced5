"""Checks that stand in for MLIR 22 aborts: on the text before parsing (``check_parsable``) and on
IR before upstream serialization (``check_serializable``; toolchain notes, cases F and G), because
MLIR aborts instead of reporting an error for these inputs."""

from __future__ import annotations

import re

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic

# The oldest PTX ISA that supports each chip (PTX ISA release notes). LLVM aborts with
# "PTX version X does not support target" when a #nvvm.target asks for less.
MIN_PTX = {"sm_90": 78, "sm_90a": 80, "sm_100": 86, "sm_100a": 86, "sm_101a": 86, "sm_103a": 88,
           "sm_120a": 87}
_TARGET = re.compile(r'#nvvm\.target<([^>]*)>')
_FIELD = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
_TMA_CTA_ONLY = "nvvm.cp.async.bulk.tensor.shared.cluster.global"


# Text the parser aborts on, found before parsing. Each rule is (pattern, message of a match); a match
# counts only where its first character is code (not in a comment or a string literal).
_PARSE_RULES = (
    # `array<index: ...>`: the parser asks an index type for its bit width and asserts ("only integers
    # and floats have a bitwidth"); every other non-int/float element type is an error.
    (re.compile(r"\barray\s*<\s*(index)\b"),
     lambda m: "array element type must be an integer or float type, got 'index' (write array<i64: ...>)"),
    # llvm.extractvalue / insertvalue positions: the bounds check reads 32 bits, the lookup all 64, so
    # 2^32 passes the check and indexes past the end ("Invalid index!").
    (re.compile(r"\b(llvm\.(?:extract|insert)value)\b[^\[\n]*\[\s*((?:-?\d+\s*,\s*)*-?\d{10,}[-\d,\s]*)\]"),
     lambda m: f"'{m.group(1)}' position must be < 4294967296, got [{m.group(2).strip()}]"),
    (re.compile(r'"(llvm\.(?:extract|insert)value)"[^\n]*?\bposition\s*=\s*array<i64:\s*((?:-?\d+\s*,\s*)*-?\d{10,}'
                r'[-\d,\s]*)>'),
     lambda m: f"'{m.group(1)}' position must be < 4294967296, got [{m.group(2).strip()}]"),
    # #nvvm.target chips of 1 or 2 characters: the attribute's verifier drops the "sm_" prefix unchecked.
    (re.compile(r'#nvvm\.target<[^>\n]*?\bchip\s*=\s*"([^"]{1,2})"'),
     lambda m: f'#nvvm.target chip must be a name like "sm_100a", got "{m.group(1)}"'),
)
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*')


def _code_only(text: str) -> str:
    """``text`` with comments blanked and string literals blanked after their opening quote (same
    offsets and lines): a match whose first character survives is code."""
    return _STRING_OR_COMMENT.sub(
        lambda m: ('"' + " " * (len(m.group(0)) - 1)) if m.group(0)[0] == '"' else " " * len(m.group(0)), text)


def check_parsable(text: str, name: str) -> list[Diagnostic]:
    """Errors for MLIR text that would abort MLIR 22's parser, located in ``name``."""
    errors, code = [], None
    for pattern, message in _PARSE_RULES:
        for m in pattern.finditer(text):
            code = _code_only(text) if code is None else code
            if code[m.start()] != text[m.start()]:
                continue
            start = m.start(1)
            line = text.count("\n", 0, start) + 1
            col = start - (text.rfind("\n", 0, start) + 1) + 1
            errors.append(Diagnostic("error", message(m), name, line, col))
    return sorted(errors, key=lambda d: (d.line, d.col))


def _ptx_version(features: str) -> int | None:
    """The PTX version the last ``+ptxNN`` flag asks for (LLVM ignores, with a warning, a flag it
    does not know, such as ``+ptx86x``: that is no version at all)."""
    versions = [int(m.group(1)) for f in features.split(",") if (m := re.fullmatch(r"\+ptx(\d+)", f))]
    return versions[-1] if versions else None


def check_serializable(module: ir.Operation) -> list[Diagnostic]:
    """Errors for gpu.modules whose serialization would abort MLIR 22: their targets, and the
    alignments and instructions inside them."""
    errors: list[Diagnostic] = []
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "gpu.module":
            continue
        cta_only_tma = False
        for target in _TARGET.findall(str(op.attributes["targets"])) if "targets" in op.attributes else ():
            fields = dict(_FIELD.findall(target))
            features = fields.get("features", "")
            # LLVM asserts on a feature without its sign ("Feature flags should start with '+' or '-'").
            if any(f and f[0] not in "+-" for f in features.split(",")):
                errors.append(Diagnostic.at(op.location, "error", (
                    f"#nvvm.target features must be comma-separated flags that each start with '+' or '-' "
                    f"(e.g. \"+ptx86\"), got \"{features}\"")))
                continue
            chip, ptx = fields.get("chip", "sm_50"), _ptx_version(features)
            if ptx is not None and chip in MIN_PTX and ptx < MIN_PTX[chip]:
                errors.append(Diagnostic.at(op.location, "error", (
                    f"#nvvm.target features must be +ptx{MIN_PTX[chip]} or newer for chip '{chip}', "
                    f"got +ptx{ptx}")))
            elif chip == "sm_90a" and (ptx or MIN_PTX[chip]) < 86:
                cta_only_tma = True
        errors += _check_ops(op, cta_only_tma)
    return errors


# LLVM keeps alignments as a power-of-two exponent of at most 32 and asserts on anything else
# ("Alignment is not a power of 2"); 0 means "unspecified" where LLVM accepts it (loads, stores).
MAX_ALIGNMENT = 1 << 32
_FUNCTION_ATTRS = ("arg_attrs", "res_attrs")


def _bad_alignment(value: int) -> bool:
    return value < 0 or value > MAX_ALIGNMENT or value & (value - 1) != 0


def _check_ops(gpu_module: ir.Operation, cta_only_tma: bool) -> list[Diagnostic]:
    """Alignments LLVM cannot represent, cluster shapes NVPTX cannot print, and (``cta_only_tma``:
    sm_90a below PTX 8.6, which has no shared::cta TMA destination) CTA-only TMA, which LLVM cannot
    select."""
    found: list[Diagnostic] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        attrs = op.attributes
        if "alignment" in attrs and isinstance(attrs["alignment"], ir.IntegerAttr) and \
                _bad_alignment(ir.IntegerAttr(attrs["alignment"]).value):
            found.append(Diagnostic.at(op.location, "error", (
                f"'{op.name}' alignment must be 0 or a power of two <= {MAX_ALIGNMENT}, got "
                f"{ir.IntegerAttr(attrs['alignment']).value}")))
        for list_name in _FUNCTION_ATTRS:
            if list_name in attrs and isinstance(attrs[list_name], ir.ArrayAttr):
                for i, entry in enumerate(ir.ArrayAttr(attrs[list_name])):
                    if isinstance(entry, ir.DictAttr) and "llvm.align" in entry and \
                            isinstance(entry["llvm.align"], ir.IntegerAttr) and \
                            _bad_alignment(ir.IntegerAttr(entry["llvm.align"]).value):
                        what = "argument" if list_name == "arg_attrs" else "result"
                        found.append(Diagnostic.at(op.location, "error", (
                            f"'{op.name}' {what} {i} llvm.align must be a power of two <= {MAX_ALIGNMENT}, "
                            f"got {ir.IntegerAttr(entry['llvm.align']).value}")))
        if "nvvm.cluster_dim" in attrs and isinstance(attrs["nvvm.cluster_dim"], ir.DenseI32ArrayAttr):
            dims = list(ir.DenseI32ArrayAttr(attrs["nvvm.cluster_dim"]))
            if 0 in dims and any(dims):  # NVPTX asserts: a 0 dimension means "no cluster" for all three
                found.append(Diagnostic.at(op.location, "error", (
                    f"'{op.name}' nvvm.cluster_dim must have every dimension >= 1 (or all 0: no cluster), "
                    f"got {dims}")))
        if cta_only_tma and op.name == _TMA_CTA_ONLY and "isCTAOnly" in attrs and \
                str(attrs["isCTAOnly"]) == "true":
            found.append(Diagnostic.at(op.location, "error", (
                f"'{_TMA_CTA_ONLY}' with isCTAOnly needs PTX 8.6 on sm_90a: set "
                f"features = \"+ptx86\" on the #nvvm.target, or use an !llvm.ptr<7> destination")))
        return ir.WalkResult.ADVANCE

    gpu_module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
