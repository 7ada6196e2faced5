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


# `array<index: ...>`: the parser asks an index type for its bit width and asserts
# ("only integers and floats have a bitwidth"); every other non-int/float element type is an error.
_INDEX_ARRAY = re.compile(r"\barray\s*<\s*(index)\b")


def _code_only(text: str) -> str:
    """``text`` with comments and string literals blanked to spaces (offsets and lines kept)."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " " if text[k] != "\n" else "\n"
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        else:
            i += 1
    return "".join(out)


def check_parsable(text: str, name: str) -> list[Diagnostic]:
    """Errors for MLIR text that would abort MLIR 22's parser, located in ``name``."""
    if not _INDEX_ARRAY.search(text):  # the common case, without the character walk
        return []
    errors = []
    for m in _INDEX_ARRAY.finditer(_code_only(text)):
        line = text.count("\n", 0, m.start(1)) + 1
        col = m.start(1) - (text.rfind("\n", 0, m.start(1)) + 1) + 1
        errors.append(Diagnostic("error", "array element type must be an integer or float type, got 'index' "
                                 "(write array<i64: ...>)", name, line, col))
    return errors


def _ptx_version(features: str) -> int | None:
    m = re.search(r"\+ptx(\d+)", features)
    return int(m.group(1)) if m else None


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
    """Alignments LLVM cannot represent, and (``cta_only_tma``: sm_90a below PTX 8.6, which has no
    shared::cta TMA destination) CTA-only TMA, which LLVM cannot select."""
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
        if cta_only_tma and op.name == _TMA_CTA_ONLY and "isCTAOnly" in attrs and \
                str(attrs["isCTAOnly"]) == "true":
            found.append(Diagnostic.at(op.location, "error", (
                f"'{_TMA_CTA_ONLY}' with isCTAOnly needs PTX 8.6 on sm_90a: set "
                f"features = \"+ptx86\" on the #nvvm.target, or use an !llvm.ptr<7> destination")))
        return ir.WalkResult.ADVANCE

    gpu_module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
