"""fa4-lower-pipelines: pipeline ops become mbarrier ops on explicit (stage, phase)."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import arith, ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.core.ir_utils import defining_op
from fa4_mlir.dialects import fa4
from fa4_mlir.passes.base import Fa4Pass
from fa4_mlir.passes.lowering import KernelLowering, LoweringFailure, lower_kernels, replace_op

_STEPS = ("fa4.pipeline_initial_state", "fa4.pipeline_advance", "fa4.pipeline_producer_acquire",
          "fa4.pipeline_producer_commit", "fa4.pipeline_consumer_wait", "fa4.pipeline_consumer_release")


@dataclasses.dataclass(frozen=True)
class LowerPipelinesPass(Fa4Pass):
    """No fa4 pipeline op is left: each step is an mbarrier op on its stage's barrier.

    Stage ``s``, sub-stage ``q`` uses ``full[s * producer_sub_stages + q]`` and
    ``empty[s * consumer_sub_stages + q]`` (sub-stages share the stage index):

    * ``initial_state``: (0, 1) for the producer, (0, 0) for the consumer, so the producer's first
      ``num_stages`` acquires pass on fresh barriers and the consumer's first wait blocks;
    * ``advance``: ``stage + 1``, wrapping to 0 with the phase flipped (``phase ^ 1``);
    * ``producer_acquire`` / ``consumer_wait``: ``fa4.mbarrier_try_wait_parity`` on empty / full;
    * ``producer_commit`` / ``consumer_release``: an arrival on full / empty by the array's kind:
      ``mbarrier_arrive`` (threads), ``mbarrier_arrive_expect_tx`` (tx), ``mma_commit`` (commit).

    The (stage, phase) values stay SSA, so loops carry them as ``scf.for`` iter_args. A
    ``fa4.pipeline_create`` is erased once nothing uses it.
    """

    name = "fa4-lower-pipelines"

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        return lower_kernels(module, "sm_100a", _lower)


def _lower(k: KernelLowering):
    for op in k.ops(*_STEPS):
        create = defining_op(op.pipeline)
        if not isinstance(create, fa4.PipelineCreateOp):
            raise LoweringFailure(op, (
                f"'{op.OPERATION_NAME}' pipeline must come from fa4.pipeline_create in the same kernel"))
        with k.at(op):
            _LOWER[op.OPERATION_NAME](k, op, create)
    for create in k.ops("fa4.pipeline_create"):
        if not list(create.result.uses):
            create.operation.erase()
    return []


def _initial_state(k, op, create):
    replace_op(op, [k.const(0), k.const(1 if op.side == "producer" else 0)])


def _advance(k, op, create):
    one = k.const(1)
    incremented = arith.addi(op.stage, one)
    wrapped = arith.cmpi(arith.CmpIPredicate.eq, incremented, k.const(create.num_stages))
    stage = arith.select(wrapped, k.const(0), incremented)
    phase = arith.select(wrapped, arith.xori(op.phase, one), op.phase)
    replace_op(op, [stage, phase])


def _index(k, stage: ir.Value, sub_stages: int, sub_stage: int) -> ir.Value:
    """``stage * sub_stages + sub_stage`` (just ``stage`` without sub-stages)."""
    if sub_stages == 1:
        return stage
    index = arith.muli(stage, k.const(sub_stages))
    return arith.addi(index, k.const(sub_stage)) if sub_stage else index


def _wait(k, op, barriers, sub_stages):
    fa4.MbarrierTryWaitParityOp(barriers, _index(k, op.stage, sub_stages, op.sub_stage), op.phase)
    op.operation.erase()


def _arrive(k, op, barriers, sub_stages, tx_bytes=None):
    index = _index(k, op.stage, sub_stages, op.sub_stage)
    arrival = defining_op(barriers).arrival
    if arrival == "tx":
        fa4.MbarrierArriveExpectTxOp(barriers, index, tx_bytes=tx_bytes)
    elif arrival == "commit":
        fa4.MmaCommitOp(barriers, index)
    else:
        fa4.MbarrierArriveOp(barriers, index)
    op.operation.erase()


_LOWER = {
    "fa4.pipeline_initial_state": _initial_state,
    "fa4.pipeline_advance": _advance,
    "fa4.pipeline_producer_acquire": lambda k, op, c: _wait(k, op, c.empty, c.consumer_sub_stages),
    "fa4.pipeline_consumer_wait": lambda k, op, c: _wait(k, op, c.full, c.producer_sub_stages),
    "fa4.pipeline_producer_commit": lambda k, op, c: _arrive(k, op, c.full, c.producer_sub_stages, op.tx_bytes),
    "fa4.pipeline_consumer_release": lambda k, op, c: _arrive(k, op, c.empty, c.consumer_sub_stages),
}
