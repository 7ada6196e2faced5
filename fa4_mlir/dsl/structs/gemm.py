"""The GEMM's reference structs (Modular MAX's SM100 structured matmul, spec section 5) as dsl objects.

* ``GemmSMem(config)``: the shared memory, in ``fa4_mlir.layouts.gemm_layout``'s order: the A and B
  stage rings, the C (residual, the epilogue-load ring's ``src_tiles``) and D (output staging)
  tiles, the TMEM address slot and the TMEM accumulator (sm_100a). The mbarrier storage is the
  allocator's (``fa4-allocate-mbarriers``), so it is not declared here.
* ``GemmMBars(config)``: the barrier arrays of ``fa4_mlir.layouts.gemm_barriers`` (names, sizes,
  arrival counts and kinds, in its order), the pipelines over them (A/B input, accumulator,
  epilogue load, load order) and their ``mbarrier_init``.
* ``EpiLoadPipeline``: one side of the epilogue-load ring with the reference's methods
  (``acquire_producer``/``wait_consumer``/``producer_step``/``produce()`` for the epilogue-load
  warp; ``acquire_consumer``/``wait_producer``/``consumer_step``/``consume()``/``consume_explicit()``
  for the epilogue); ``LoadOrderBarrier``: the main load's ``arrive_and_step`` and the epilogue
  load's ``wait_and_step`` (the main load signals after its first A/B load of a tile, so C does not
  compete with it).

Both sides of a ring are ``Carried``: pass them in ``carry=`` of ``Kernel.range``/``if_``. Building a
struct inside ``Kernel.body()`` declares its regions or barriers at the caller's line.
"""

from __future__ import annotations

import contextlib

from fa4_mlir._mlir import ir
from fa4_mlir.dialects import fa4
from fa4_mlir.dsl.location import here
from fa4_mlir.dsl.pipelines import Carried, Pipeline, PipelineState
from fa4_mlir.dsl.values import Value
from fa4_mlir.layouts import gemm_barriers, gemm_layout

# (pipeline symbol, full array, empty array) over gemm_barriers' arrays; a pipeline whose arrays the
# target does not have (the accumulator on sm_90a) is absent
_PIPELINES = (("ab", "ab_producer", "ab_consumer"), ("acc", "accum_producer", "accum_consumer"),
              ("epi", "epi_load_full", "epi_load_empty"), ("order", "load_order_full", "load_order_empty"),
              ("mma_turn", "mma_turn_full", "mma_turn_empty"), ("epilogue_turn", "epilogue_turn_full",
                                                                 "epilogue_turn_empty"))


class GemmSMem:
    """The GEMM's shared-memory regions and TMEM, declared from ``gemm_layout(config)``."""

    def __init__(self, config):
        self.config = config
        layout = gemm_layout(config)
        self._smem = {}
        for r in layout.regions:
            if r.name == "mbarriers":  # placed by fa4-allocate-mbarriers, not a declared region
                continue
            swizzle = None if r.swizzle == "none" else r.swizzle
            self._smem[r.name] = _named(fa4.smem_region(sym_name=r.name, bytes=r.bytes, align=r.align,
                                                        swizzle=swizzle, loc=here()), r.name)
        self._tmem = {t.name: _named(fa4.tmem_region(sym_name=t.name, columns=t.columns, loc=here()), t.name)
                      for t in layout.tmem}

    def _region(self, name: str):
        if name not in self._smem:
            raise KeyError(f"GemmSMem region must be one of {', '.join(self._smem)}, got {name!r}")
        return self._smem[name]

    # -- the regions ----------------------------------------------------------------------------------
    def a_tiles(self):
        """The A ring: ``stages`` tiles of (rows per CTA) x tile_k, 128B-swizzled."""
        return self._region("a")

    def b_tiles(self):
        """The B ring: ``stages`` tiles of B's rows (b_major k) or column blocks (mn) this CTA loads."""
        return self._region("b")

    def src_tiles(self):
        """The C ring of the epilogue load: ``epi_load_stages`` sub-tiles of rows x epi_tile_n."""
        return self._region("c")

    def out_tiles(self, group: int = 0):
        """The D staging buffers (double-buffered) of storing group ``group``: the CTA's epilogue
        warps on sm_100a, consumer warpgroup ``group`` on sm_90a."""
        return self._region("d" if self.config.has_tmem else f"d{group}")

    def tmem_addr(self):
        """The slot tcgen05.alloc writes the TMEM base address to (sm_100a)."""
        return self._region("tmem_addr")

    def accum_tmem(self):
        """The TMEM accumulator: ``accum_stages`` stages of tile_n columns (sm_100a)."""
        if "accum" not in self._tmem:
            raise KeyError(f"the TMEM accumulator must exist on the target, got {self.config.target}")
        return self._tmem["accum"]

    # -- one stage of a ring --------------------------------------------------------------------------
    def a_tile(self, stage):
        return fa4.smem_stage(self.a_tiles(), _raw(stage), bytes=self.config.a_stage_bytes, loc=here())

    def b_tile(self, stage):
        return fa4.smem_stage(self.b_tiles(), _raw(stage), bytes=self.config.b_stage_bytes, loc=here())

    def src_tile(self, stage):
        return fa4.smem_stage(self.src_tiles(), _raw(stage), bytes=self.config.epi_tile_bytes, loc=here())

    @property
    def out_tile_bytes(self) -> int:
        """One D staging buffer: the CTA's rows (sm_100a) or a warpgroup's rows (sm_90a)."""
        c = self.config
        return c.epi_tile_bytes if c.has_tmem else c.wg_rows * c.epi_row_bytes

    def out_tile(self, stage, group: int = 0):
        return fa4.smem_stage(self.out_tiles(group), _raw(stage), bytes=self.out_tile_bytes, loc=here())

    def accum_stage(self, stage):
        """Accumulator stage ``stage`` (tile_n TMEM columns)."""
        return fa4.tmem_stage(self.accum_tmem(), _raw(stage), columns=self.config.tile_n, loc=here())


class GemmMBars:
    """The GEMM's barrier arrays and the pipelines over them, from ``gemm_barriers(config)``."""

    def __init__(self, config):
        self.config = config
        self._arrays, stages = {}, {}
        for b in gemm_barriers(config):
            uniform = len(set(b.counts)) == 1  # as core.layout_ir.declare_layout writes an array's counts
            self._arrays[b.name] = _named(fa4.mbarrier_alloc(
                sym_name=b.name, num_barriers=len(b.counts), arrive_count=b.counts[0] if uniform else None,
                arrive_counts=None if uniform else list(b.counts), arrival=b.arrival,
                cta_group=b.cta_group if b.cta_group != 1 else None, multicast_mask=b.multicast_mask or None,
                loc=here()), b.name)
            stages[b.name] = len(b.counts)
        self._pipelines = {}
        for name, full, empty in _PIPELINES:
            if full in self._arrays:
                self._pipelines[name] = Pipeline(name, stages[full], self._arrays[full], self._arrays[empty])
                _named(self._pipelines[name].value, name)
        for array in self._arrays.values():
            fa4.mbarrier_init(array, loc=here())

    def barriers(self, name: str):
        """The ``fa4.mbarrier_alloc`` of array ``name`` (gemm_barriers' names)."""
        if name not in self._arrays:
            raise KeyError(f"GemmMBars array must be one of {', '.join(self._arrays)}, got {name!r}")
        return self._arrays[name]

    def _pipeline(self, name: str) -> Pipeline:
        if name not in self._pipelines:
            raise KeyError(f"GemmMBars pipeline must be one of {', '.join(self._pipelines)}, got {name!r}")
        return self._pipelines[name]

    def ab_pipeline(self) -> Pipeline:
        """The input ring: A/B stages from the main load to the MMA (sm_100a) or consumers (sm_90a)."""
        return self._pipeline("ab")

    def accum_pipeline(self) -> Pipeline:
        """The accumulator ring: TMEM stages from the MMA warp to the epilogue (sm_100a)."""
        return self._pipeline("acc")

    def epi_load_pipeline(self, side: str) -> EpiLoadPipeline:
        """A fresh ``side`` ("producer" or "consumer") of the epilogue-load ring."""
        return EpiLoadPipeline(self._pipeline("epi"), self.barriers("epi_load_full"), side)

    def turn(self, which: str, warpgroup: int) -> Turn:
        """Consumer warpgroup ``warpgroup``'s side of the pingpong ``which`` ("mma" or "epilogue") turn."""
        return Turn(self._pipeline(f"{which}_turn"), "producer" if warpgroup == 0 else "consumer")

    def load_order(self, side: str) -> LoadOrderBarrier:
        """A fresh ``side`` of the load-order barrier (producer: main load; consumer: epilogue load)."""
        return LoadOrderBarrier(self._pipeline("order"), side)


class _Side(Carried):
    """One side's ``PipelineState`` of a ring, carried through loops and branches."""

    def __init__(self, pipeline: Pipeline, side: str):
        if side not in ("producer", "consumer"):
            raise ValueError(f"side must be 'producer' or 'consumer', got {side!r}")
        self.pipeline, self.side = pipeline, side
        self.state = PipelineState(pipeline, side)

    def carried(self) -> list[ir.Value]:
        return self.state.carried()

    def rebind(self, values: list[ir.Value]) -> None:
        self.state.rebind(values)

    def _need(self, side: str, method: str) -> None:
        if self.side != side:
            raise RuntimeError(f"{type(self).__name__}.{method} must be called on the {side} side, "
                               f"got the {self.side}")


class EpiLoadPipeline(_Side):
    """One side of ``EpiLoadPipeline[num_stages]`` (seed page 003): the epilogue-load warp produces C
    sub-tiles into the ring, the epilogue consumes them."""

    def __init__(self, pipeline: Pipeline, full, side: str):
        super().__init__(pipeline, side)
        self.full = full

    # -- producer: the epilogue-load warp ---------------------------------------------------------------
    def wait_consumer(self) -> None:
        """Wait for the epilogue to free the current producer stage."""
        self._need("producer", "wait_consumer")
        self.state.producer_acquire()

    def producer_stage(self) -> Value:
        return self.state.index

    def producer_mbar(self):
        """(barrier array, index): the current stage's full barrier, where the TMA completes its bytes."""
        return self.full, self.state.stage

    def producer_step(self) -> None:
        self._need("producer", "producer_step")
        self.state.step()

    def acquire_producer(self) -> ProducerStage:
        """Wait for the current stage; the handle's ``release()`` steps to the next."""
        self.wait_consumer()
        return ProducerStage(self)

    @contextlib.contextmanager
    def produce(self):
        """``wait_consumer`` on enter, ``producer_step`` on exit; yields the ``ProducerStage``."""
        stage = self.acquire_producer()
        yield stage
        stage.release()

    # -- consumer: the epilogue ---------------------------------------------------------------------------
    def wait_producer(self) -> None:
        """Wait for the current consumer stage's C sub-tile to land."""
        self._need("consumer", "wait_producer")
        self.state.consumer_wait()

    def consumer_stage(self) -> Value:
        return self.state.index

    def consumer_step(self) -> None:
        self._need("consumer", "consumer_step")
        self.state.step()

    def acquire_consumer(self) -> ConsumerStage:
        """Wait for the current stage; the handle's ``release()`` arrives on its empty barrier and steps."""
        self.wait_producer()
        return ConsumerStage(self)

    @contextlib.contextmanager
    def consume(self):
        """``wait_producer`` on enter; on exit every thread arrives on the stage's empty barrier, then steps."""
        stage = self.acquire_consumer()
        yield stage
        stage.release()

    @contextlib.contextmanager
    def consume_explicit(self):
        """``wait_producer`` on enter, ``consumer_step`` on exit; the caller arrives (``stage.arrive()``)
        where the stage's reads are done."""
        self.wait_producer()
        yield ConsumerStage(self)
        self.consumer_step()


class ProducerStage:
    """The epilogue-load warp's current stage."""

    def __init__(self, pipe: EpiLoadPipeline):
        self.pipe = pipe

    def index(self) -> Value:
        return self.pipe.producer_stage()

    def mbar(self):
        return self.pipe.producer_mbar()

    def expect_bytes(self, nbytes: int) -> None:
        """Arrive on the stage's full barrier expecting ``nbytes`` of TMA transactions."""
        self.pipe.state.producer_commit(tx_bytes=nbytes)

    def release(self) -> None:
        self.pipe.producer_step()


class ConsumerStage:
    """The epilogue's current stage."""

    def __init__(self, pipe: EpiLoadPipeline):
        self.pipe = pipe

    def index(self) -> Value:
        return self.pipe.consumer_stage()

    def arrive(self) -> None:
        """This thread's reads of the stage are done (an arrival on its empty barrier)."""
        self.pipe.state.consumer_release()

    def release(self) -> None:
        self.arrive()
        self.pipe.consumer_step()


class LoadOrderBarrier(_Side):
    """``LoadOrderBarrier``: one barrier pair and its phase, stepping once per output tile."""

    def arrive_and_step(self) -> None:
        """The main load: wait until the epilogue load took the last signal, signal, step."""
        self._need("producer", "arrive_and_step")
        self.state.producer_acquire()
        self.state.producer_commit()
        self.state.step()

    def wait_and_step(self) -> None:
        """The epilogue load: wait for the main load's signal, hand it back, step."""
        self._need("consumer", "wait_and_step")
        self.state.consumer_wait()
        self.state.consumer_release()
        self.state.step()


class Turn(_Side):
    """A pingpong turn between the two sm_90a consumer warpgroups (a one-stage ring: warpgroup 0 the
    producer, 1 the consumer), so that they wait on a shared ring's barriers in tile order: a
    warpgroup that ran ahead would wait two phases early, and a parity wait cannot tell phase n
    from n - 2."""

    def wait(self) -> None:
        """Wait for this warpgroup's turn (warpgroup 0's first passes on the fresh barrier)."""
        if self.side == "producer":
            self.state.producer_acquire()
        else:
            self.state.consumer_wait()

    def arrive(self) -> None:
        """Hand the turn to the other warpgroup (one arrival: lane 0 of each of its warps arrives)."""
        if self.side == "producer":
            self.state.producer_commit()
        else:
            self.state.consumer_release()

    def step(self) -> None:
        """To this warpgroup's next turn."""
        self.state.step()


def _raw(x):
    return x.value if isinstance(x, Value) else x


def _named(value, name: str):
    """``value``, printed as ``%name`` (the struct's names in ``fa4-compile --emit fa4``)."""
    Value(value).named(name)
    return value
