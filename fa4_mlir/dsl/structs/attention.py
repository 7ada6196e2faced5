"""The FA4 attention kernel's reference structs: ``SM100AttentionSMem``, ``FA4MiscMBars`` and the TMEM map.

Spec sections 2.1 (SM100AttentionSMem), 2.3 (TMEM) and 3.3 (FA4MiscMBars). What is declared, in which
order, with which sizes, alignments and arrival counts comes from ``fa4_mlir.layouts.fa4_layout``; the
static offsets and barrier indices come from ``fa4_mlir.placement`` (the rules the allocation passes
apply), so these objects, the passes and ``fa4-layout`` agree by construction.

Built inside ``Kernel.body()``, each struct declares its part of the kernel (``fa4.smem_region`` /
``fa4.smem_alias``, ``fa4.mbarrier_alloc``, ``fa4.tmem_region``) and its accessors return the declared
values::

    smem = SM100AttentionSMem(config)      # q, o (over q), kv | k + v, correction, the barriers, tmem_addr
    mbars = smem.misc_mbars()              # FA4MiscMBars: the barrier arrays, in layout order
    tmem = FA4Tmem(config)                 # S0, S1, O0, O1
    mbars.declare_pipelines()              # the rings over the barriers (fa4.pipeline_create)
    mbars.init()                           # fa4.mbarrier_init of every array
    state = mbars.consumer_s(0)            # a PipelineState (stage, phase) of S0's ring, consumer side

Accessors for regions a config does not have (rope, q_scale, k_scale: MLA and fp8 only; Q1_sync in
1Q; Q0_sync unless ``page_gather``; the order barriers unless ``use_order_barriers``) raise
``ValueError`` naming the missing region and why, rather than returning None: a kernel that asks for
one is built for another config.

Where the reference returns a pointer, these return the fa4 value the lowering turns into one: a
``!fa4.smem`` region (``tmem_addr_ptr`` is the 4-byte slot ``fa4.tmem_alloc`` writes), an
``!fa4.mbarriers`` array, or a ``PipelineState`` over a ``Pipeline``.
"""

from __future__ import annotations

from fa4_mlir.configs import FA4Config
from fa4_mlir.configs.fa4 import MBAR_BYTES
from fa4_mlir.dsl.location import here
from fa4_mlir.dsl.pipelines import Pipeline, PipelineState
from fa4_mlir.dsl.values import Value
from fa4_mlir.dialects import fa4
from fa4_mlir.layouts import BarrierArray, Layout, fa4_layout
from fa4_mlir.placement import place_contiguous, place_smem


def _fa4_config(config) -> FA4Config:
    """An ``FA4Config``, or the one an sm_100a ``AttentionConfig`` uses (``.fa4``)."""
    if isinstance(config, FA4Config):
        return config
    if hasattr(config, "fa4"):
        return config.fa4
    raise TypeError(f"config must be an FA4Config or an sm_100a AttentionConfig, got {type(config).__name__}")


def _layout(config: FA4Config) -> Layout:
    return fa4_layout(config)


class SM100AttentionSMem:
    """The kernel's shared memory (spec 2.1), low to high: Q (O over it), the K/V ring(s), correction,
    the mbarriers (``FA4MiscMBars``), the TMEM address slot.

    ``offset(name)`` and ``size`` are the static byte offsets and total (``placement.place_smem`` over
    ``fa4_layout``); ``kv_offset``, ``correction_offset`` and ``mbar_offset`` are the reference's
    element offsets (in the Q/K/V dtype, fp32 and mbarrier units)."""

    def __init__(self, config):
        self.config = _fa4_config(config)
        self.layout = _layout(self.config)
        regions = self.layout.regions
        keys = {r.name: r.name for r in regions}
        placed = place_smem([(r.name, r.bytes, r.align, keys[r.alias_of] if r.alias_of else None, 0)
                             for r in regions])
        self._offsets, self.size = placed.offsets, placed.total
        self._bytes = {r.name: r.bytes for r in regions}
        self._values: dict[str, object] = {}
        self._mbars = None
        for r in regions:  # declared in layout order: fa4-allocate-smem places them the same way
            if r.name == "mbarriers":  # fa4-allocate-mbarriers adds this region before the first array
                self._mbars = FA4MiscMBars(self.config)
            elif r.alias_of:
                self._values[r.name] = fa4.smem_alias(self._values[r.alias_of], sym_name=r.name, bytes=r.bytes,
                                                      loc=here())
            else:
                swizzle = {"swizzle": r.swizzle} if r.swizzle != "none" else {}
                self._values[r.name] = fa4.smem_region(sym_name=r.name, bytes=r.bytes, align=r.align, loc=here(),
                                                       **swizzle)

    # -- static facts ----------------------------------------------------------------------------------
    def offset(self, name: str) -> int:
        """Byte offset of region ``name`` in the kernel's dynamic shared memory."""
        if name not in self._offsets:
            raise ValueError(f"SM100AttentionSMem region must be one of {', '.join(self._offsets)}, got {name!r}")
        return self._offsets[name]

    def bytes(self, name: str) -> int:
        self.offset(name)
        return self._bytes[name]

    @property
    def kv_offset(self) -> int:
        """The K/V region's offset in Q/K/V elements (the reference's ``kv_offset``)."""
        return self.offset("kv" if self.config.fused_kv else "k") // self.config.qkv.bytes

    @property
    def correction_offset(self) -> int:
        """The correction region's offset in fp32 elements."""
        return self.offset("correction") // 4

    @property
    def mbar_offset(self) -> int:
        """The first mbarrier's offset in mbarriers (8 bytes each)."""
        return self.offset("mbarriers") // MBAR_BYTES

    # -- the reference's accessors -----------------------------------------------------------------------
    def _get(self, name: str, why: str):
        if name not in self._values:
            raise ValueError(f"SM100AttentionSMem has no {name} region: {why}")
        return self._values[name]

    def q_smem(self):
        return self._values["q"]

    def o_smem(self):
        """The output tile: the Q region reused once the last Q@K' read it (an ``fa4.smem_alias``)."""
        return self._values["o"]

    def k_smem_base(self):
        """The K stages (the fused K/V ring when KV is fused)."""
        return self._values["kv" if self.config.fused_kv else "k"]

    def v_smem_base(self):
        """The V stages; the same region as ``k_smem_base`` when KV is fused."""
        return self._values["kv" if self.config.fused_kv else "v"]

    def rope_smem_base(self):
        why = (f"rope_depth is {self.config.rope_depth} in this config" if not self.config.rope_depth
               else "only fused KV keeps rope buffers (split KV holds rope in the K stages)")
        return self._get("rope", why)

    def q_rope_smem(self):
        return self._get("q_rope", f"rope_depth is {self.config.rope_depth} in this config")

    def correction_smem(self):
        return self._values["correction"]

    def q_scale_smem(self):
        return self._get("q_scale", f"scale_dtype is {self.config.scale_dtype} in this config (fp8 only)")

    def k_scale_smem(self):
        return self._get("k_scale", f"scale_dtype is {self.config.scale_dtype} in this config (fp8 only)")

    def tmem_addr_ptr(self):
        """The 4-byte slot ``fa4.tmem_alloc`` writes the TMEM base address into."""
        return self._values["tmem_addr"]

    def misc_mbars(self) -> FA4MiscMBars:
        return self._mbars


# The pipelines the kernel runs over FA4MiscMBars, in declaration order: (name, full array, empty array).
_RINGS = (("s0", "S0_producer", "S0_consumer"), ("s1", "S1_producer", "S1_consumer"),
          ("cq0", "C0_producer", "C0_consumer"), ("cq1", "C1_producer", "C1_consumer"))


class FA4MiscMBars:
    """Every barrier of the FA4 kernel (spec 3.3), declared in ``fa4_barriers`` order with its counts.

    ``index(name)`` is an array's first barrier (``placement.place_contiguous``, as
    fa4-allocate-mbarriers assigns it) and ``num_mbars()`` the total. After ``declare_pipelines()``
    the role accessors return ``PipelineState``s (each call is a fresh ``fa4.pipeline_initial_state``
    at the caller's line)."""

    def __init__(self, config):
        self.config = _fa4_config(config)
        self.barriers: tuple[BarrierArray, ...] = _layout(self.config).barriers
        placed = place_contiguous([(b.name, len(b.counts)) for b in self.barriers])
        self._index, self._total = placed.offsets, placed.total
        self._values = {}
        for b in self.barriers:
            counts = ({"arrive_count": b.counts[0]} if len(set(b.counts)) == 1
                      else {"arrive_counts": list(b.counts)})
            self._values[b.name] = fa4.mbarrier_alloc(sym_name=b.name, num_barriers=len(b.counts),
                                                      arrival=b.arrival, loc=here(), **counts)
        self._pipelines: dict[str, Pipeline] | None = None

    # -- static facts ----------------------------------------------------------------------------------
    def num_mbars(self) -> int:
        return self._total

    def index(self, name: str) -> int:
        """Index of array ``name``'s first barrier among the kernel's mbarriers."""
        self._array(name)
        return self._index[name]

    def _array(self, name: str):
        if name not in self._values:
            raise ValueError(f"FA4MiscMBars has no '{name}' barriers in this config, got a request for it "
                             f"(it declares {', '.join(self._values)})")
        return self._values[name]

    @property
    def _ring(self) -> str:
        return "kv" if self.config.fused_kv else "k"

    # -- declarations ------------------------------------------------------------------------------------
    def array(self, name: str):
        """The ``!fa4.mbarriers`` value of array ``name`` (a ``fa4_barriers`` name, e.g. ``S0_consumer``)."""
        return self._array(name)

    def declare_pipelines(self) -> None:
        """The rings the roles run: S0, S1 (MMA -> softmax, the consumer side in ``num_pv_stages`` P
        stages), C0, C1 (softmax -> correction), the K (or fused K/V) ring in ``num_qk_stages`` depth
        sub-stages and, split, the V ring."""
        c = self.config
        if self._pipelines is not None:
            raise RuntimeError("FA4MiscMBars.declare_pipelines must be called once, got a second call")
        p = {}
        for name, full, empty in _RINGS:
            subs = c.num_pv_stages if name in ("s0", "s1") else 1
            p[name] = Pipeline(name, 1, self._values[full], self._values[empty], consumer_sub_stages=subs)
            Value(p[name].value).named(name)
        p["k"] = Pipeline("k", c.num_kv_stages, self._values[f"{self._ring}_producer"],
                          self._values[f"{self._ring}_consumer"], producer_sub_stages=c.qk_stages,
                          consumer_sub_stages=c.qk_stages)
        Value(p["k"].value).named("k")
        if not c.fused_kv:
            p["v"] = Pipeline("v", c.num_kv_stages, self._values["v_producer"], self._values["v_consumer"])
            Value(p["v"].value).named("v")
        self._pipelines = p

    def init(self) -> None:
        """``fa4.mbarrier_init`` of every array, in declaration order."""
        for b in self.barriers:
            fa4.mbarrier_init(self._values[b.name], loc=here())

    def pipeline(self, name: str) -> Pipeline:
        if self._pipelines is None:
            raise RuntimeError("FA4MiscMBars pipelines must be declared first (declare_pipelines()), got none")
        if name not in self._pipelines:
            raise ValueError(f"FA4MiscMBars pipeline must be one of {', '.join(self._pipelines)}, got {name!r}")
        return self._pipelines[name]

    # -- the reference's accessors -------------------------------------------------------------------------
    def producer_s0(self) -> PipelineState:
        """The MMA's side of S0: commit after Q0@K', acquire P0's stages before P0@V."""
        return self.pipeline("s0").producer()

    def producer_s1(self) -> PipelineState:
        return self.pipeline("s1").producer()

    def consumer_s(self, wg: int) -> PipelineState:
        """Softmax warpgroup ``wg``'s side of S_wg: wait for S, release each P stage written."""
        return self.pipeline(f"s{_wg(wg)}").consumer()

    def producer_c(self, wg: int) -> PipelineState:
        """Softmax warpgroup ``wg`` hands its rescale factor to the correction warpgroup."""
        return self.pipeline(f"cq{_wg(wg)}").producer()

    def consumer_c0(self) -> PipelineState:
        return self.pipeline("cq0").consumer()

    def consumer_c1(self) -> PipelineState:
        return self.pipeline("cq1").consumer()

    def k_pipeline(self) -> Pipeline:
        """The K ring (the fused K/V ring when KV is fused), ``num_qk_stages`` depth sub-stages."""
        return self.pipeline("k")

    def v_pipeline(self) -> Pipeline:
        """The V ring; the K ring when KV is fused."""
        return self.pipeline("k" if self.config.fused_kv else "v")

    def get_k_mbars(self):
        """(full, empty) arrays of the K ring."""
        return self._values[f"{self._ring}_producer"], self._values[f"{self._ring}_consumer"]

    def get_v_mbars(self):
        """(full, empty) arrays of the V ring; the K ring's when KV is fused."""
        if self.config.fused_kv:
            return self.get_k_mbars()
        return self._values["v_producer"], self._values["v_consumer"]

    def q0_wait_mbar(self):
        """Q0's load barriers (one per depth sub-stage) of a gathered paged cache (``page_gather``: K_0's barriers
        count the gathering lanes, so Q0 does not ride on them), waited once by the MMA before Q0@K'."""
        if "Q0_sync" not in self._values:
            raise ValueError("FA4MiscMBars has no Q0_sync barriers: page_gather is False in this config (Q0 rides on "
                             "the first K tile's barriers)")
        return self._values["Q0_sync"]

    def q1_wait_mbar(self):
        """Q1's load barriers (one per depth sub-stage), waited once by the MMA before Q1@K'."""
        if "Q1_sync" not in self._values:
            raise ValueError(f"FA4MiscMBars has no Q1_sync barriers: num_q is {self.config.num_q} in this config")
        return self._values["Q1_sync"]

    def producer_o0(self):
        """O0's producer barrier: the MMA commits after P0@V; correction and the epilogue wait it."""
        return self._values["O0_producer"]

    def producer_o1(self):
        return self._values["O1_producer"]

    def combined_p_o_consumer(self, wg: int):
        """S_wg's consumer array: barrier 0 counts P stage 0 written and O_wg rescaled (256 arrivals)."""
        return self._values[f"S{_wg(wg)}_consumer"]

    def pipeline_order_wait(self, wg: int):
        """(array, index) that softmax warpgroup ``wg`` waits before loading S (ordering barriers)."""
        return self._order(), _wg(wg)

    def pipeline_order_arrive(self, wg: int):
        return self._order(), 1 - _wg(wg)

    def _order(self):
        if "order" not in self._values:
            raise ValueError("FA4MiscMBars has no order barriers: use_order_barriers is False in this config")
        return self._values["order"]


class FA4Tmem:
    """The TMEM columns (spec 2.3): S0, S1 (BN each; P_i written over S_i), O0, O1 (padded depth each),
    declared in ``fa4_layout`` order; ``column(name)`` is the static first column."""

    def __init__(self, config):
        self.config = _fa4_config(config)
        tmem = _layout(self.config).tmem
        placed = place_contiguous([(t.name, t.columns) for t in tmem])
        self._column, self.columns = placed.offsets, placed.total
        self._values = {t.name: fa4.tmem_region(sym_name=t.name, columns=t.columns, loc=here()) for t in tmem}

    def column(self, name: str) -> int:
        if name not in self._column:
            raise ValueError(f"FA4Tmem region must be one of {', '.join(self._column)}, got {name!r}")
        return self._column[name]

    def s(self, i: int):
        return self._values[f"S{_wg(i)}"]

    def o(self, i: int):
        return self._values[f"O{_wg(i)}"]


def _wg(wg: int) -> int:
    if wg not in (0, 1):
        raise ValueError(f"a softmax warpgroup / Q half must be 0 or 1, got {wg!r}")
    return wg
