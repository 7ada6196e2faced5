"""Checks on IR that must run before upstream serialization, because MLIR 22 aborts instead of
reporting an error for these inputs (toolchain notes, cases F and G)."""

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


def _ptx_version(features: str) -> int | None:
    m = re.search(r"\+ptx(\d+)", features)
    return int(m.group(1)) if m else None


def check_serializable(module: ir.Operation) -> list[Diagnostic]:
    """Errors for gpu.module targets whose serialization would abort MLIR 22."""
    errors: list[Diagnostic] = []
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "gpu.module" or "targets" not in op.attributes:
            continue
        for target in _TARGET.findall(str(op.attributes["targets"])):
            fields = dict(_FIELD.findall(target))
            chip, ptx = fields.get("chip", "sm_50"), _ptx_version(fields.get("features", ""))
            if ptx is not None and chip in MIN_PTX and ptx < MIN_PTX[chip]:
                errors.append(Diagnostic.at(op.location, "error", (
                    f"#nvvm.target features must be +ptx{MIN_PTX[chip]} or newer for chip '{chip}', "
                    f"got +ptx{ptx}")))
            elif chip == "sm_90a" and (ptx or MIN_PTX[chip]) < 86:
                errors += _cta_only_tma(op)
    return errors


def _cta_only_tma(gpu_module: ir.Operation) -> list[Diagnostic]:
    """sm_90a below PTX 8.6 has no shared::cta TMA destination; LLVM aborts in instruction selection."""
    found: list[Diagnostic] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == _TMA_CTA_ONLY and "isCTAOnly" in op.attributes and \
                str(op.attributes["isCTAOnly"]) == "true":
            found.append(Diagnostic.at(op.location, "error", (
                f"'{_TMA_CTA_ONLY}' with isCTAOnly needs PTX 8.6 on sm_90a: set "
                f"features = \"+ptx86\" on the #nvvm.target, or use an !llvm.ptr<7> destination")))
        return ir.WalkResult.ADVANCE

    gpu_module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
