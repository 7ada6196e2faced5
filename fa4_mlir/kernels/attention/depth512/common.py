"""What the depth-256/512 kernel's roles share: sizes derived once from the config (``Dims``) and the
prologue (``prologue``: shared memory, barriers, TMEM allocation, the pair's tile). The prologue
imports ``fa4_mlir.dsl`` when called, so this module imports without MLIR."""

from __future__ import annotations

import dataclasses
import types
from functools import cached_property

from fa4_mlir.configs.attention import AttentionConfig

BLOCK = 64  # elements of one swizzle row: TMA boxes and operand tiles are [rows, 64] blocks
ROW_BYTES = 128  # bytes of one swizzle row of a 16-bit tile (128B swizzle; fp8 tiles use 64B: Dims.row_bytes)
MMA_K = 16  # bf16/fp16 elements per tcgen05 instruction (32 bytes of a row)
K_STEP_BYTES = 32  # bytes of a row one tcgen05 MMA consumes (16 bf16/fp16 elements, 32 e4m3)
WG = 128  # threads of a warpgroup = TMEM lanes
ELEM = {"bf16": "bf16", "fp16": "f16", "fp8_e4m3": "e4m3"}  # config dtype -> MMA ab_type


@dataclasses.dataclass(frozen=True)
class Chunk:
    """One depth chunk of Q@K': Q's and K's tensor maps (parameter names), the first column in them
    and the columns (a multiple of BLOCK), with the MMA element type and its bytes (MLA's rope chunk
    may be bf16 under an fp8 latent)."""

    q_map: str
    k_map: str
    col: int
    depth: int
    elem: str = "bf16"
    elem_bytes: int = 2

    @property
    def steps(self) -> int:
        """tcgen05 MMAs (K steps of 32 bytes) over the chunk's depth."""
        return self.depth * self.elem_bytes // K_STEP_BYTES


@dataclasses.dataclass(frozen=True)
class Dims:
    """Sizes of the kernel for ``c`` (an sm_100a AttentionConfig with head dim 256 or 512, or the MLA
    kernel's ``mla.Spec``)."""

    c: AttentionConfig

    @cached_property
    def f(self):
        return self.c.depth512.validate()

    @property
    def elem(self) -> str:
        """The MMA element type of Q, K, V and P: bf16, f16 or e4m3."""
        return ELEM[self.c.dtype]

    @property
    def fp8(self) -> bool:
        return self.elem == "e4m3"

    @property
    def eb(self) -> int:
        """Bytes of one Q/K/V/P element."""
        return self.f.qkv.bytes

    @property
    def row_bytes(self) -> int:
        """Bytes of one swizzle row (BLOCK elements) of the Q, K, V and P tiles: 128, 64 for fp8."""
        return self.f.swizzle_bytes

    @property
    def swizzle(self) -> str:
        return f"{self.row_bytes}B"

    @property
    def mma_k(self) -> int:
        """Elements of a row one MMA consumes: 16, 32 for fp8."""
        return K_STEP_BYTES // self.eb

    def __getattr__(self, name):  # bm, bn, bk0, bk1, mma_m, split_o, num_kv_stages, ... of Depth512Config
        if name in ("bm", "bn", "bk0", "bk1", "mma_m", "split_o", "num_kv_stages", "num_qk_stages",
                    "num_pv_stages", "v_cols_per_cta", "kv_slot_bytes"):
            return getattr(self.f, name)
        raise AttributeError(name)

    @property
    def ov(self) -> int:
        return self.f.ov

    @property
    def g(self) -> int:
        """Query heads sharing a CTA's rows (fused GQA), else 1: the fused group, or BM when the group
        fills the pair's MMA_M rows (``split_heads``)."""
        return min(self.c.fused_group, self.bm)

    @property
    def split_heads(self) -> bool:
        """The fused group has MMA_M heads (MLA, 128 heads at d512): the pair's rows are one position,
        the leader holds heads [0, BM) of the group and the peer [BM, 2 BM)."""
        return self.c.fused_group > self.bm

    @property
    def positions(self) -> int:
        """Sequence positions of one CTA's BM rows."""
        return self.bm // self.g

    @property
    def pair_positions(self) -> int:
        """Sequence positions of the pair's tile (one CTA's with ``split_heads``, else both CTAs')."""
        return self.positions if self.split_heads else 2 * self.positions

    @property
    def rope(self) -> int:
        """Rope columns of Q and K (absorbed MLA: 64), else 0."""
        return self.f.rope_depth

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        """Q@K''s depth chunks in order, one KV slot each: ``num_qk_stages`` of BK0 columns from the q and
        k maps (MLA: q_nope and kv), then MLA's rope chunk from q_rope and k_rope."""
        q, k = ("q_nope", "kv") if self.rope else ("q", "k")
        out = tuple(Chunk(q, k, s * self.bk0, self.bk0, self.elem, self.eb) for s in range(self.num_qk_stages))
        rope = self.f.rope
        return out + ((Chunk("q_rope", "k_rope", 0, self.rope, ELEM[rope.name], rope.bytes),) if self.rope else ())

    @property
    def v_map(self) -> str:
        """The tensor map V is loaded through (MLA: ``kv_v``, a second map of the latent)."""
        return "kv_v" if self.rope else "v"

    @property
    def halves(self) -> tuple[str, ...]:
        """The O accumulators: ("lo", "hi") with split_o (d512), ("lo",) otherwise (O is O_lo)."""
        return ("lo", "hi") if self.split_o else ("lo",)

    @property
    def k_rows(self) -> int:
        """K rows one CTA loads per tile (the pair MMA's B is split along N): BN / 2."""
        return self.bn // 2

    @property
    def q_chunk(self) -> int:
        """Bytes of one Q depth sub-stage of the CTA's BM rows."""
        return self.bm * self.bk0 * self.eb

    @property
    def k_chunk(self) -> int:
        """Bytes of one K depth sub-stage of the CTA's BN / 2 rows (one KV slot)."""
        return self.k_rows * self.bk0 * self.eb

    @property
    def v_chunk(self) -> int:
        """Bytes of one V sub-tile: BK1 keys x v_cols_per_cta columns (one KV slot)."""
        return self.bk1 * self.v_cols_per_cta * self.eb

    @property
    def o_cols(self) -> int:
        """Output columns of one O accumulator (N of its P@V MMA): ov / 2 (d512) or ov (d256)."""
        return self.ov // len(self.halves)

    @property
    def s_cols(self) -> int:
        """Score columns one thread holds per tile: BN / 2 with split_o (a thread pair shares a row), BN."""
        return self.bn // 2 if self.split_o else self.bn

    @property
    def o_tmem_cols(self) -> int:
        """TMEM columns of one O accumulator per CTA (pair rule MMA_M * N / 256)."""
        return self.mma_m * self.o_cols // 256


def registers(d: Dims) -> dict[str, int]:
    """``setmaxnreg`` budgets of the softmax and correction warpgroups and of warps 8-11 (MMA, load,
    idle: one warpgroup, one budget); 128 threads each, 64512 registers in all: the 384 threads' launch
    pool (168 each), which a ``setmaxnreg.inc`` cannot pass (it would wait forever; fa4.warp_specialize
    checks it).

    d256: the reference's 256 / 184 / 64, zero spills (fp8: 256 / 168 / 80, as warps 8-11 spilled at 64 and
    72 in the causal fp8 kernels; the 256 / 176 / 80 before summed to 512, past the pool). d512: the MMA
    thread (64 MMAs per tile, whose loop-invariant Q and P
    descriptors stay in registers) spills below 168, so warps 8-11 need 168;
    the 44032 registers left give the other two warpgroups 172 each, so every warpgroup keeps the entry
    budget of 168 (65536 / 384; no ``setmaxnreg`` is emitted), which ptxas fits with zero spills.
    """
    if d.split_o:
        return {"softmax": 168, "correction": 168, "producers": 168}
    if d.fp8:  # the budgets sum to 504 (x 128 threads = 64512, the pool)
        return {"softmax": 256, "correction": 168, "producers": 80}
    return {"softmax": 256, "correction": 184, "producers": 64}


def prologue(k, c: AttentionConfig, arg) -> types.SimpleNamespace:
    """Declare the shared memory, barriers and TMEM (``Depth512AttentionSMem``), allocate TMEM (warp 1,
    both CTAs of the pair), initialise the barriers and derive the pair's tile. Returns the namespace
    the roles share."""
    from fa4_mlir import dsl
    from fa4_mlir.dsl.structs.depth512 import Depth512AttentionSMem

    d = Dims(c)
    V, arith = dsl.Value, dsl.arith
    smem = Depth512AttentionSMem(d.f)
    mbars = smem.misc_mbars()
    warp = dsl.tid_x() // 32
    with k.if_((warp == 1).named("alloc_warp")):  # warp 1 allocates; softmax warp 1 frees
        dsl.fa4.tmem_alloc(smem.tmem_addr_ptr(), cta_group=2)
    mbars.init()
    x = types.SimpleNamespace(k=k, arg=arg, d=d, c=c, smem=smem, mbars=mbars, slot=smem.tmem_addr_ptr(),
                              registers=registers(d))
    q = smem.q_smem()
    x.q = [dsl.fa4.smem_alias(q, sym_name=f"q_{s}", bytes=d.bm * ch.depth * ch.elem_bytes, offset=s * d.q_chunk)
           for s, ch in enumerate(d.chunks)]  # MLA: the rope chunk (BM x 64) follows the latent ones
    x.o, x.p, x.kv = smem.o_smem(), smem.p_smem(), smem.kv_smem_base()
    x.kv_full, x.kv_empty = smem.declared.value("kv_producer"), smem.declared.value("kv_consumer")
    x.o_tmem = {"lo": smem.tmem("O_lo" if d.split_o else "O")}
    if d.split_o:
        x.o_tmem["hi"] = smem.tmem("O_hi")
    x.s_tmem = {"even": smem.tmem("S_even"), "odd": smem.tmem("S_odd")}
    # the pair's tile: both CTAs take block_idx.x >> 1 (rank 0, the even CTA, leads the pair)
    x.rank = V(dsl.nvvm.read_ptx_sreg_cluster_ctarank(dsl.i32())).named("rank")
    x.leader = (x.rank == 0).named("leader")
    tile, hy, x.bz = dsl.shrui(dsl.ctaid("x"), V(1)), dsl.ctaid("y"), dsl.ctaid("z")
    x.pair_start = tile * d.pair_positions
    # first position of this CTA's rows (split heads: both CTAs hold the same position)
    x.q_start = x.pair_start if d.split_heads else x.pair_start + x.rank * d.positions
    if c.causal:  # tiles past the pair's last row are skipped by every role alike
        pair_end = x.pair_start + d.pair_positions
        kv_end = V(arith.minsi(arg.seq_k.value, pair_end.value))
    else:
        kv_end = arg.seq_k
    x.n_tiles = V(arith.divsi((kv_end + (d.bn - 1)).value, V(d.bn).value)).named("n_tiles")
    if d.split_heads:  # the peer holds the group's second BM heads
        x.kvh, x.head0 = hy, hy * c.group + x.rank * d.bm
    elif d.g > 1:
        x.kvh, x.head0 = hy, hy * c.group
    else:
        x.kvh, x.head0 = V(arith.divsi(hy.value, V(c.group).value)), hy
    return x


def raw(v):
    """The ``ir.Value`` of an index (a ``Value``, or an int as an i32 constant made here)."""
    from fa4_mlir.dsl.values import raw as _raw

    return _raw(v)


def coords(*xs) -> list:
    """TMA box coordinates (innermost first)."""
    return [raw(v) for v in xs]
