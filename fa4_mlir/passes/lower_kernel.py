"""fa4-lower-kernel: the last fa4 lowering; declarations go, the kernel signature becomes LLVM's."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lowering import KernelLowering, LoweringFailure, lower_kernels, replace_op

GRID_CONSTANT_ARGS = "fa4.grid_constant_args"
DECLARATIONS = ("fa4.smem_stage", "fa4.smem_alias", "fa4.smem_region", "fa4.tmem_stage", "fa4.tmem_region",
                "fa4.pipeline_create", "fa4.mbarrier_alloc")
# Which pass lowers each op, for the message when one is left.
LOWERED_BY = {
    "fa4-lower-pipelines": ("pipeline_initial_state", "pipeline_advance", "pipeline_producer_acquire",
                            "pipeline_producer_commit", "pipeline_consumer_wait", "pipeline_consumer_release"),
    "fa4-lower-warp-roles": ("warp_specialize", "warp_role", "named_barrier", "elect_one"),
    "fa4-lower-tma": ("tma_load", "tma_store", "tma_store_wait"),
    "fa4-lower-tmem": ("tmem_alloc", "tmem_dealloc", "tmem_load", "tmem_store", "tcgen05_mma"),
    "fa4-lower-wgmma": ("wgmma", "wgmma_commit", "wgmma_wait", "wgmma_fence_acc"),
    "fa4-lower-barriers": ("mbarrier_init", "mbarrier_arrive", "mbarrier_arrive_expect_tx",
                           "mbarrier_try_wait_parity", "mma_commit", "debug_check"),
}


@dataclasses.dataclass(frozen=True)
class LowerKernelPass(Fa4Pass):
    """No fa4 op or type is left in a kernel: the IR is NVVM, LLVM, arith, scf and gpu only.

    ``fa4.smem_address`` becomes ``fa4_smem + offset``; the declarations (regions, aliases, stages,
    TMEM regions and stages, barrier arrays, pipelines) are erased once unused. Kernel arguments of type
    ``!fa4.tensormap`` become ``!llvm.ptr``; their positions go to the function attribute
    ``fa4.grid_constant_args``, from which ``fa4-attach-kernel-abi`` makes them 128-byte
    ``__grid_constant__`` parameters after ``convert-gpu-to-nvvm``. Fails, naming the pass to run,
    if an fa4 op that another lowering pass owns is still there.
    """

    name = "fa4-lower-kernel"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        return lower_kernels(module, "sm_100a", _lower)


def _lower(k: KernelLowering):
    owner = {f"fa4.{name}": pass_name for pass_name, names in LOWERED_BY.items() for name in names}
    left = k.ops(*owner)
    if left:
        op = left[0]
        raise LoweringFailure(op, f"'{op.OPERATION_NAME}' is not lowered yet: run {owner[op.OPERATION_NAME]} "
                                  f"before fa4-lower-kernel")
    for op in k.ops("fa4.smem_address"):
        with k.at(op):
            address = k.smem_address(op.region, user=op)
        replace_op(op, [address])
    for op in reversed(k.ops(*DECLARATIONS)):
        users = list(op.result.uses)
        if users:
            named = f" '{op.sym_name}'" if hasattr(op, "sym_name") else ""
            raise LoweringFailure(users[0].owner, (
                f"'{users[0].owner.name}' uses '{op.OPERATION_NAME}'{named} and cannot be lowered: only "
                f"fa4 ops and fa4.smem_address may use fa4 values"))
        op.operation.erase()
    _lower_signature(k)
    return []


def _lower_signature(k: KernelLowering) -> None:
    scope = k.scope
    if not scope.regions or not list(scope.regions[0].blocks):
        return
    ptr = ir.Type.parse("!llvm.ptr")
    entry = scope.regions[0].blocks[0]
    grid_constant = []
    for arg in entry.arguments:
        if str(arg.type) == "!fa4.tensormap":
            arg.set_type(ptr)
            grid_constant.append(arg.arg_number)
        elif str(arg.type).startswith("!fa4."):
            raise LoweringFailure(scope, (
                f"kernel argument {arg.arg_number} must be !fa4.tensormap or a non-fa4 type, got {arg.type}"))
    if not grid_constant:
        return
    signature = ir.FunctionType(ir.TypeAttr(scope.attributes["function_type"]).value)
    inputs = [a.type for a in entry.arguments]
    scope.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, signature.results))
    scope.attributes[GRID_CONSTANT_ARGS] = ir.DenseI32ArrayAttr.get(grid_constant)
