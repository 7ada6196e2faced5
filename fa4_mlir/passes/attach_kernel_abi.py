"""fa4-attach-kernel-abi: tensor-map parameters become 128-byte __grid_constant__ parameters."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lower_kernel import GRID_CONSTANT_ARGS
from fa4_mlir.passes.scope import ops_named

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64


@dataclasses.dataclass(frozen=True)
class AttachKernelAbiPass(Fa4Pass):
    """Every ``llvm.func`` argument listed in ``fa4.grid_constant_args`` is a by-value CUtensorMap.

    Runs after ``convert-gpu-to-nvvm`` (which drops ``llvm.byval`` and ``nvvm.grid_constant`` from
    ``gpu.func`` arguments): sets ``llvm.byval = !llvm.array<128 x i8>``, ``llvm.align = 64`` and
    ``nvvm.grid_constant`` on each, so PTX gets ``.param .align 64 .b8 name[128]`` read in place
    (without grid_constant the parameter is copied to local memory and TMA would get a local
    address). Removes ``fa4.grid_constant_args``.
    """

    name = "fa4-attach-kernel-abi"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        errors: list[Diagnostic] = []
        for func in ops_named(module, "llvm.func", "gpu.func"):
            attrs = func.operation.attributes
            if GRID_CONSTANT_ARGS not in attrs:
                continue
            if func.operation.name != "llvm.func":
                errors.append(Diagnostic.at(func.location, "error", (
                    "fa4-attach-kernel-abi must run after convert-gpu-to-nvvm (it annotates llvm.func "
                    "arguments), got a gpu.func")))
                continue
            indices = set(ir.DenseI32ArrayAttr(attrs[GRID_CONSTANT_ARGS]))
            n = len(func.operation.regions[0].blocks[0].arguments)
            old = list(ir.ArrayAttr(attrs["arg_attrs"])) if "arg_attrs" in attrs else [ir.DictAttr.get({})] * n
            new = []
            for i in range(n):
                entries = {a.name: a.attr for a in ir.DictAttr(old[i])}
                if i in indices:
                    entries["llvm.byval"] = ir.TypeAttr.get(ir.Type.parse(f"!llvm.array<{TENSOR_MAP_BYTES} x i8>"))
                    entries["llvm.align"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), TENSOR_MAP_ALIGN)
                    entries["nvvm.grid_constant"] = ir.UnitAttr.get()
                new.append(ir.DictAttr.get(entries))
            attrs["arg_attrs"] = ir.ArrayAttr.get(new)
            del attrs[GRID_CONSTANT_ARGS]
        return errors
