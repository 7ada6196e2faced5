"""Pipelines with the reference's methods; the state (stage, phase) is carried for you.

``Pipeline`` is one ``fa4.pipeline_create`` over a full and an empty mbarrier array (the reference's
``StagedPipeline``/``RolePipeline``). Each side of it keeps a ``PipelineState``: ``producer()`` starts
at (stage 0, phase 1), ``consumer()`` at (0, 0), as ``fa4.pipeline_initial_state`` defines. The state's
methods are the reference's names (``producer_acquire``, ``producer_commit``, ``consumer_wait``,
``consumer_release``, ``step``); a state passed in ``carry=`` of ``Kernel.range``/``if_`` becomes the
loop's or branch's carried values and is rebound inside and after, so a kernel never names a phase.
"""

from __future__ import annotations

from fa4_mlir._mlir import ir
from fa4_mlir.dsl.location import here
from fa4_mlir.dsl.values import Value
from fa4_mlir.dialects import fa4


class Carried:
    """Something ``Kernel.range``/``if_`` thread through ``scf`` ops: its SSA values, rebound in place."""

    def carried(self) -> list[ir.Value]:
        raise NotImplementedError

    def rebind(self, values: list[ir.Value]) -> None:
        raise NotImplementedError


class Var(Carried):
    """A mutable SSA variable (an index, a running maximum, an accumulator) for loops and branches:
    read ``var.value``, assign ``var.value = ...`` inside the body; after the loop it holds the result."""

    def __init__(self, value):
        self._value = value.value if isinstance(value, Value) else value

    @property
    def value(self):
        return Value(self._value) if isinstance(self._value.type, ir.IntegerType) else self._value

    @value.setter
    def value(self, new) -> None:
        new = new.value if isinstance(new, Value) else new
        if new.type != self._value.type:
            raise TypeError(f"a Var keeps its type: must be {self._value.type}, got {new.type}")
        self._value = new

    def carried(self) -> list[ir.Value]:
        return [self._value]

    def rebind(self, values: list[ir.Value]) -> None:
        (self._value,) = values


class PipelineState(Carried):
    """One side's (stage, phase) of a pipeline, with the reference's methods."""

    def __init__(self, pipeline: Pipeline, side: str):
        self.pipeline, self.side = pipeline, side
        self.stage, self.phase = fa4.pipeline_initial_state(pipeline.value, side=side, loc=here())

    def carried(self) -> list[ir.Value]:
        return [self.stage, self.phase]

    def rebind(self, values: list[ir.Value]) -> None:
        self.stage, self.phase = values

    @property
    def index(self) -> Value:
        """The current stage as an index Value."""
        return Value(self.stage)

    def producer_acquire(self, sub_stage: int = 0) -> None:
        """Wait until the stage's buffer is free (its empty barrier reaches the phase)."""
        fa4.pipeline_producer_acquire(self.pipeline.value, self.stage, self.phase, sub_stage=sub_stage, loc=here())

    def producer_commit(self, tx_bytes: int | None = None, sub_stage: int = 0) -> None:
        """Signal the stage full; on a TMA pipeline, expect ``tx_bytes`` to land on its full barrier."""
        fa4.pipeline_producer_commit(self.pipeline.value, self.stage, sub_stage=sub_stage, tx_bytes=tx_bytes,
                                     loc=here())

    def consumer_wait(self, sub_stage: int = 0) -> None:
        """Wait until the stage's data is ready (its full barrier reaches the phase)."""
        fa4.pipeline_consumer_wait(self.pipeline.value, self.stage, self.phase, sub_stage=sub_stage, loc=here())

    def consumer_release(self, sub_stage: int = 0) -> None:
        """Hand the stage's buffer back to the producer (arrive on its empty barrier)."""
        fa4.pipeline_consumer_release(self.pipeline.value, self.stage, sub_stage=sub_stage, loc=here())

    def step(self) -> None:
        """Move to the next stage (wrapping to 0 flips the phase)."""
        self.stage, self.phase = fa4.pipeline_advance(self.pipeline.value, self.stage, self.phase, loc=here())


class Pipeline:
    """A ``num_stages``-stage ring over ``full`` and ``empty`` (``Kernel.mbarriers`` arrays)."""

    def __init__(self, name: str, stages: int, full, empty, producer_sub_stages: int = 1,
                 consumer_sub_stages: int = 1):
        self.name, self.stages = name, stages
        # a default is left out, as a hand-written op would (FileCheck tests read the printed op)
        self.value = fa4.pipeline_create(full, empty, sym_name=name, num_stages=stages,
                                         producer_sub_stages=None if producer_sub_stages == 1 else producer_sub_stages,
                                         consumer_sub_stages=None if consumer_sub_stages == 1 else consumer_sub_stages,
                                         loc=here())

    def producer(self) -> PipelineState:
        return PipelineState(self, "producer")

    def consumer(self) -> PipelineState:
        return PipelineState(self, "consumer")
