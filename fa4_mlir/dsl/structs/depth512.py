"""Depth512AttentionSMem and Depth512MBars: the depth-256/512 pair-CTA attention's shared memory and
barriers (spec 2.2, 3.4; seed page 000), declared from ``fa4_mlir.layouts.depth512_layout``.

The reference wraps one mbarrier base pointer and hands out ``RolePipeline``s over fixed offsets; here
each barrier kind is a named ``fa4.mbarrier_alloc`` array (the offsets are the same: the arrays are
placed contiguously in the reference's order, ``Depth512MBars.PO_lo_offset`` ...) and each accessor
returns the side of a ``dsl.Pipeline`` the reference's ``RolePipeline`` is, with its state. The KV
ring is the ``kv_producer`` array then the ``kv_consumer`` array (``KV_offset`` and
``KV_offset + nkv``), as the reference's ``StagedPipeline`` indexes them (spec 3.2: the seed's
docstring says "{producer, consumer} pairs", its code puts every producer barrier first).
"""

from __future__ import annotations

from fa4_mlir._mlir import ir
from fa4_mlir.configs.depth512 import Depth512Config
from fa4_mlir.dsl import arith, fa4
from fa4_mlir.dsl.pipelines import Pipeline, PipelineState
from fa4_mlir.dsl.structs.base import DeclaredLayout
from fa4_mlir.dsl.values import i32
from fa4_mlir.layouts import depth512_layout


class Depth512AttentionSMem:
    """The kernel's shared memory: Q (reused as O), P, the KV ring, correction, the barriers and the
    TMEM address slot, at the offsets fa4-allocate-smem gives them (``offset``, ``smem_size``).
    Building it declares every region, barrier array and TMEM region (O or O_lo/O_hi, S_even, S_odd)."""

    def __init__(self, config: Depth512Config):
        if not isinstance(config, Depth512Config):
            raise TypeError(f"config must be a Depth512Config, got {type(config).__name__}")
        self.config = config
        self.declared = DeclaredLayout(depth512_layout(config))
        self._mbars = None

    # the reference's accessors
    def q_smem(self) -> ir.Value:
        """Q, BM x qk_depth (absorbed MLA: then BM x rope_depth), 128B swizzle (reused as the output O
        once the last Q@K' is done)."""
        return self.declared.value("q")

    def o_smem(self) -> ir.Value:
        """The output tile: the Q region under another name (``fa4.smem_alias``)."""
        return self.declared.value("o")

    def p_smem(self) -> ir.Value:
        """P, the softmax output (the A operand of the SS P@V MMA), BM x BN."""
        return self.declared.value("p")

    def kv_smem_base(self) -> ir.Value:
        """The KV ring: ``num_kv_stages`` slots, each a K sub-tile or a V sub-tile."""
        return self.declared.value("kv")

    def correction_smem(self) -> ir.Value:
        return self.declared.value("correction")

    def tmem_addr_ptr(self) -> ir.Value:
        """The 4-byte slot ``tcgen05.alloc`` writes the TMEM base to."""
        return self.declared.value("tmem_addr")

    def tmem(self, name: str) -> ir.Value:
        """A TMEM region: ``O`` (d256) or ``O_lo``/``O_hi`` (d512), ``S_even``, ``S_odd``."""
        return self.declared.value(name)

    def misc_mbars(self) -> Depth512MBars:
        """The barriers (the reference's ``Depth512MBars(smem.mbar_base())``)."""
        if self._mbars is None:
            self._mbars = Depth512MBars(self)
        return self._mbars

    @property
    def smem_size(self) -> int:
        return self.declared.smem_size

    def offset(self, region: str) -> int:
        return self.declared.offset(region)


class Depth512MBars:
    """The barriers of ``smem`` (a ``Depth512AttentionSMem``) and the pipelines over them. Offsets are
    the reference's comptime members; the accessors return fresh pipeline states (as the reference
    returns a fresh ``RolePipeline``), to be carried through loops with ``Kernel.range(carry=...)``."""

    def __init__(self, smem: Depth512AttentionSMem):
        d, c = smem.declared, smem.config
        self._d, self.split_o, self.num_kv_stages = d, c.split_o, c.num_kv_stages
        bar = d.value
        self._s = {s: Pipeline(f"s_{s}", 1, bar(f"S_{s}_producer"), bar(f"S_{s}_consumer")) for s in ("even", "odd")}
        self._c = Pipeline("c", 1, bar("C_producer"), bar("C_consumer"))
        self._o = {"lo": Pipeline("o_lo", 1, bar("O_mma_lo"), bar("PO_lo"))}
        if self.split_o:
            self._o["hi"] = Pipeline("o_hi", 1, bar("O_mma_hi"), bar("PO_hi"))
        self._kv = Pipeline("kv", c.num_kv_stages, bar("kv_producer"), bar("kv_consumer"))

    def init(self) -> None:
        """Initialise every barrier with its arrival count (the reference's per-lane ``init``)."""
        for b in self._d.layout.barriers:
            fa4.mbarrier_init(self._d.value(b.name))

    # offsets (indices into the kernel's barrier region), the reference's comptime members
    @property
    def PO_lo_offset(self) -> int: return self._d.barrier_index("PO_lo")  # noqa: N802 - the reference's name

    @property
    def PO_hi_offset(self) -> int: return self._hi("PO_hi")  # noqa: N802

    @property
    def S_even_consumer_offset(self) -> int: return self._d.barrier_index("S_even_consumer")  # noqa: N802

    @property
    def S_odd_consumer_offset(self) -> int: return self._d.barrier_index("S_odd_consumer")  # noqa: N802

    @property
    def C_producer_offset(self) -> int: return self._d.barrier_index("C_producer")  # noqa: N802

    @property
    def C_consumer_offset(self) -> int: return self._d.barrier_index("C_consumer")  # noqa: N802

    @property
    def S_even_producer_offset(self) -> int: return self._d.barrier_index("S_even_producer")  # noqa: N802

    @property
    def S_odd_producer_offset(self) -> int: return self._d.barrier_index("S_odd_producer")  # noqa: N802

    @property
    def O_mma_lo_offset(self) -> int: return self._d.barrier_index("O_mma_lo")  # noqa: N802

    @property
    def O_mma_hi_offset(self) -> int: return self._hi("O_mma_hi")  # noqa: N802

    @property
    def KV_offset(self) -> int: return self._d.barrier_index("kv_producer")  # noqa: N802

    @property
    def num_fixed(self) -> int:
        return self.KV_offset

    @property
    def size(self) -> int:
        return self._d.num_mbars

    def _hi(self, name: str) -> int:
        if not self.split_o:
            raise AttributeError(f"{name} exists only with split_o (ov_depth 512), got ov_depth 256")
        return self._d.barrier_index(name)

    # the pipelines
    def producer_s_even(self) -> PipelineState:
        """MMA: acquire waits on S_even consumer (buffer free), commit arrives at S_even producer."""
        return self._s["even"].producer()

    def producer_s_odd(self) -> PipelineState:
        return self._s["odd"].producer()

    def consumer_s_even(self) -> PipelineState:
        """Softmax: wait on S_even producer (S in TMEM), release arrives at S_even consumer."""
        return self._s["even"].consumer()

    def consumer_s_odd(self) -> PipelineState:
        return self._s["odd"].consumer()

    def producer_c(self) -> PipelineState:
        """Softmax: acquire waits on C consumer, commit arrives at C producer (correction written)."""
        return self._c.producer()

    def consumer_c(self) -> PipelineState:
        """Correction: wait on C producer, release arrives at C consumer."""
        return self._c.consumer()

    def producer_o_lo(self) -> PipelineState:
        """MMA P@V_lo: acquire waits on PO_lo (P written and O_lo rescaled), commit arrives at O_mma_lo.
        Starts at phase 0, the reference's explicit override: the first P@V blocks until PO_lo completes."""
        return _at_phase_zero(self._o["lo"].producer())

    def producer_o_hi(self) -> PipelineState:
        """MMA P@V_hi (split_o): acquire waits on PO_hi, commit arrives at O_mma_hi; phase 0 first."""
        self._hi("PO_hi")
        return _at_phase_zero(self._o["hi"].producer())

    def consumer_o_lo(self) -> PipelineState:
        """Correction: wait on O_mma_lo (O_lo safe to read), release arrives at PO_lo (rescaled)."""
        return self._o["lo"].consumer()

    def consumer_o_hi(self) -> PipelineState:
        self._hi("PO_hi")
        return self._o["hi"].consumer()

    def po_lo_mbar(self) -> ir.Value:
        """The PO_lo barrier array (softmax arrives here directly after writing P)."""
        return self._d.value("PO_lo")

    def po_hi_mbar(self) -> ir.Value:
        self._hi("PO_hi")
        return self._d.value("PO_hi")

    def get_kv_mbars(self) -> Pipeline:
        """The KV ring (``num_kv_stages`` stages): ``.producer()`` for the load warps, ``.consumer()``
        for the MMA warp."""
        return self._kv


def _at_phase_zero(state: PipelineState) -> PipelineState:
    state.phase = arith.constant(i32(), 0)
    return state
