"""What a kernel's shared memory, mbarriers and tensor memory hold, in the reference system's order.

A ``Layout`` lists regions, barrier arrays and TMEM regions with sizes, alignment and counts, but no
offsets or indices: placing them is the job of the allocation passes (fa4-allocate-smem,
fa4-allocate-mbarriers, fa4-allocate-tmem), so there is one implementation of placement. Builders
for the reference structs (spec sections 2.1-2.3, 3.3, 3.4, 5.1) live here; no MLIR import.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.configs import Depth512Config, FA4Config, GemmConfig
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.fa4 import MBAR_BYTES, TMEM_ADDR_BYTES

TILE_ALIGN = 1024  # a 128B-swizzled TMA/UMMA tile starts on a swizzle-atom boundary
TMA_ALIGN = 128  # any other TMA destination (the per-token scale buffers)


@dataclasses.dataclass(frozen=True)
class SmemRegion:
    name: str
    bytes: int
    align: int
    swizzle: str = "none"
    alias_of: str | None = None  # shares the storage of that region (adds nothing to the total)


@dataclasses.dataclass(frozen=True)
class BarrierArray:
    name: str
    counts: tuple[int, ...]
    arrival: str  # threads | tx | commit
    arrivers: str
    waiters: str
    cta_group: int = 1
    multicast_mask: int = 0  # a thread arrival goes to the barrier at this index in every CTA of the mask


@dataclasses.dataclass(frozen=True)
class TmemRegion:
    name: str
    columns: int


@dataclasses.dataclass(frozen=True)
class Layout:
    kernel: str
    config: dict
    regions: tuple[SmemRegion, ...]
    barriers: tuple[BarrierArray, ...]
    tmem: tuple[TmemRegion, ...] = ()

    @property
    def num_mbarriers(self) -> int:
        return sum(len(b.counts) for b in self.barriers)


def _swizzle(nbytes: int) -> str:
    return f"{nbytes}B"


def _tail(barriers: list[BarrierArray]) -> list[SmemRegion]:
    n = sum(len(b.counts) for b in barriers)
    return [SmemRegion("mbarriers", n * MBAR_BYTES, MBAR_BYTES), SmemRegion("tmem_addr", TMEM_ADDR_BYTES, 4)]


# ===================================================================================================
# FA4 (SM100AttentionSMem + FA4MiscMBars + the TMEM map)
# ===================================================================================================


def fa4_barriers(c: FA4Config) -> list[BarrierArray]:
    """FA4MiscMBars (spec 3.3), high-count barriers first. ``m`` = CTAs whose threads arrive. A gathered
    paged cache (``page_gather``: the load warp's lanes copy the K/V rows) adds ``Q0_sync`` (Q0's TMA, which
    cannot ride on K_0's lane-counted barriers) and counts 32 lanes on the K/V full barriers."""
    m = c.cta_group
    npv, nqk, nkv = c.num_pv_stages, c.qk_stages, c.num_kv_stages
    s_consumer = tuple([256 * m] + [128 * m] * (npv - 1))
    out = []
    for i in (0, 1):
        out.append(BarrierArray(f"S{i}_consumer", s_consumer, "threads",
                                f"softmax WG{i} after P stage j (+ correction WG after rescaling O{i}, j = 0)",
                                f"MMA before P{i}@V stage j", m))
    for i in (0, 1):
        out.append(BarrierArray(f"C{i}_producer", (128,), "threads", f"softmax WG{i} after writing correction",
                                "correction WG"))
        out.append(BarrierArray(f"C{i}_consumer", (128,), "threads", "correction WG after reading it",
                                f"softmax WG{i} (acquire)"))
    if c.use_order_barriers:
        out.append(BarrierArray("order", (128, 128), "threads", "softmax WG 1-i late in its exp phase",
                                "softmax WG i before loading S"))
    for i in (0, 1):
        out.append(BarrierArray(f"S{i}_producer", (1,), "commit", f"MMA commit after Q{i}@K'",
                                f"softmax WG{i}", m))
    if c.page_gather:  # Q0 cannot ride on K_0's barriers, which count the gathering lanes: its own, as Q1's
        out.append(BarrierArray("Q0_sync", (1,) * nqk, "tx", "load warp expect_tx + Q0 TMA", "MMA before Q0@K'", m))
    if c.num_q == 2:
        out.append(BarrierArray("Q1_sync", (1,) * nqk, "tx", "load warp expect_tx + Q1 TMA", "MMA before Q1@K'", m))
    ring = "kv" if c.fused_kv else "k"
    # a gathered paged cache: each of the load warp's 32 lanes arrives once its cp.async rows landed
    full = ((32,), "threads", "every lane of the load warp once its cp.async rows landed") if c.page_gather \
        else ((1,), "tx", "load warp expect_tx + TMA")
    out.append(BarrierArray(f"{ring}_producer", full[0] * (nqk * nkv), full[1], full[2], "MMA", m))
    out.append(BarrierArray(f"{ring}_consumer", (1,) * (nqk * nkv), "commit", "MMA commit", "load warp", m))
    if not c.fused_kv:
        out.append(BarrierArray("v_producer", full[0] * nkv, full[1], full[2], "MMA", m))
        out.append(BarrierArray("v_consumer", (1,) * nkv, "commit", "MMA commit", "load warp", m))
    for i in (0, 1):
        out.append(BarrierArray(f"O{i}_producer", (1,), "commit", f"MMA commit after P{i}@V",
                                "correction WG (each tile), softmax WG (final)"))
    return out


def fa4_regions(c: FA4Config) -> list[SmemRegion]:
    """SM100AttentionSMem (spec 2.1): regions low to high, no padding beyond alignment."""
    dsz, sw = c.qkv.bytes, _swizzle(c.swizzle_bytes)
    q_rope = c.bm * c.rope_depth * c.rope_bytes if c.rope_dtype else 0
    regions = [SmemRegion("q", c.q_bytes - q_rope, TILE_ALIGN, sw)]
    if q_rope:
        regions.append(SmemRegion("q_rope", q_rope, TILE_ALIGN, sw))
    # O is written over Q once the last Q@K' has read it.
    regions.append(SmemRegion("o", c.q_bytes - q_rope, TILE_ALIGN, sw, alias_of="q"))
    nkv, bn, v_cols, k_rows = c.num_kv_stages, c.bn, c.v_cols_per_cta, c.k_rows_per_cta
    if c.fused_kv:
        regions.append(SmemRegion("kv", nkv * v_cols * bn * dsz, TILE_ALIGN, sw))
        rope_buffers = -(-nkv // 2) if c.rope_depth else 0
        if rope_buffers and c.rope_bytes:
            regions.append(SmemRegion("rope", rope_buffers * bn * c.rope_depth * c.rope_bytes, TILE_ALIGN, sw))
    else:
        k_stage = v_cols * bn * dsz + c.rope_depth * k_rows * c.rope_bytes
        regions.append(SmemRegion("k", nkv * k_stage, TILE_ALIGN, sw))
        regions.append(SmemRegion("v", nkv * v_cols * bn * dsz, TILE_ALIGN, sw))
    regions.append(SmemRegion("correction", c.correction_bytes, 4))
    if c.scale_bytes:
        # TMA destinations (128-byte aligned). No padding results: the regions before them are
        # multiples of 1024 bytes and q_scale (BM scales) of 128, as the reference's packing assumes.
        regions.append(SmemRegion("q_scale", c.q_scale_bytes, TMA_ALIGN))
        regions.append(SmemRegion("k_scale", c.num_k_scale_bufs * bn * c.scale_bytes, TMA_ALIGN))
    return regions


def fa4_layout(c: FA4Config) -> Layout:
    c.validate()
    barriers = fa4_barriers(c)
    config = {"BM": c.bm, "BN": c.bn, "MMA_M": c.mma_m, "BK0": c.bk0, "BK1": c.bk1,
              "num_qk_stages": c.qk_stages, "num_pv_stages": c.num_pv_stages, "num_kv_stages": c.num_kv_stages,
              "fused_kv": c.fused_kv, "cta_group": c.cta_group, "padded_qk_depth": c.padded_qk_depth,
              "padded_ov_depth": c.padded_ov_depth, "swizzle_bytes": c.swizzle_bytes, "smem_budget": c.smem_used,
              "tmem_used": c.tmem_used}
    tmem = tuple(TmemRegion(name, cols) for name, (_, cols) in c.tmem_columns.items())
    return Layout("fa4", config, tuple(fa4_regions(c) + _tail(barriers)), tuple(barriers), tmem)


# ===================================================================================================
# Depth 256/512 (Depth512AttentionSMem + Depth512MBars)
# ===================================================================================================


def depth512_barriers(c: Depth512Config) -> list[BarrierArray]:
    """Depth512MBars (spec 3.4); all pair barriers collect arrivals of both CTAs at the leader."""
    out = [BarrierArray("PO_lo", (512,), "threads", "softmax (P written) + correction (O_lo rescaled), both CTAs",
                        "MMA before P@V_lo", 2)]
    if c.split_o:
        out.append(BarrierArray("PO_hi", (256,), "threads", "correction (O_hi rescaled), both CTAs",
                                "MMA before P@V_hi", 2))
    for s in ("even", "odd"):
        out.append(BarrierArray(f"S_{s}_consumer", (256,), "threads", f"softmax after loading S_{s}, both CTAs",
                                f"MMA before Q@K' into S_{s}", 2))
    out.append(BarrierArray("C_producer", (128,), "threads", "softmax after writing correction", "correction"))
    out.append(BarrierArray("C_consumer", (128,), "threads", "correction after reading it", "softmax"))
    for s in ("even", "odd"):
        out.append(BarrierArray(f"S_{s}_producer", (1,), "commit", "MMA multicast commit after Q@K'",
                                "softmax, both CTAs", 2))
    out.append(BarrierArray("O_mma_lo", (1,), "commit", "MMA multicast commit after P@V_lo", "correction", 2))
    if c.split_o:
        out.append(BarrierArray("O_mma_hi", (1,), "commit", "MMA multicast commit after P@V_hi", "correction", 2))
    nkv = c.num_kv_stages
    out.append(BarrierArray("kv_producer", (1,) * nkv, "tx", "leader expect_tx (both CTAs' bytes) + TMA",
                            "MMA", 2))
    out.append(BarrierArray("kv_consumer", (1,) * nkv, "commit", "MMA multicast commit", "load warps", 2))
    return out


def depth512_layout(c: Depth512Config) -> Layout:
    c.validate()
    sw = _swizzle(c.swizzle_bytes)
    barriers = depth512_barriers(c)
    # O is 16-bit (fp8: bf16), 128B swizzle; fp8 stores it through Q's bytes in column chunks
    regions = [SmemRegion("q", c.q_bytes, TILE_ALIGN, sw), SmemRegion("o", c.q_bytes, TILE_ALIGN, "128B", alias_of="q"),
               SmemRegion("p", c.p_bytes, TILE_ALIGN, sw),
               SmemRegion("kv", c.num_kv_stages * c.kv_slot_bytes, TILE_ALIGN, sw),
               SmemRegion("correction", c.correction_bytes, 4)]
    config = {"BM": c.bm, "BN": c.bn, "MMA_M": c.mma_m, "BK0": c.bk0, "BK1": c.bk1, "split_o": c.split_o,
              "num_qk_stages": c.num_qk_stages, "num_pv_stages": c.num_pv_stages,
              "num_kv_stages": c.num_kv_stages, "fused_kv": True, "cta_group": c.cta_group,
              "v_cols_per_cta": c.v_cols_per_cta, "smem_budget": c.smem_used, "tmem_used": c.tmem_used}
    if c.rope_depth:  # absorbed MLA: Q is BM x (qk + rope); K's rope chunk is one more slot per tile
        config.update(rope_depth=c.rope_depth, num_k_chunks=c.num_k_chunks)
        if c.rope_dtype is not None:  # fp8 latent: Q's rope columns and K's rope chunk in the rope dtype
            config.update(rope_dtype=c.rope_dtype)
    tmem = tuple(TmemRegion(name, cols) for name, (_, cols) in c.tmem_columns.items())
    return Layout("depth512", config, tuple(regions + _tail(barriers)), tuple(barriers), tmem)


# ===================================================================================================
# GEMM with residual epilogue (EpiLoadPipeline, spec 5.1-5.2)
# ===================================================================================================


def gemm_barriers(c: GemmConfig) -> list[BarrierArray]:
    """The barriers of ``fa4_mlir.kernels.gemm``, in its declaration order (a test holds the two
    equal). sm_90a has no MMA warp: the consumer warpgroups release A/B stages themselves, lane 0 of
    each warp arriving once its wgmma group retired, and hold the accumulator in registers."""
    g = c.cta_group
    mma = "MMA warp" if c.has_tmem else "consumer warpgroups"
    epilogue = "epilogue warps" if c.has_tmem else "consumer warpgroups"
    out = [BarrierArray("ab_producer", (1,) * c.stages, "tx", "load warp expect_tx (A+B bytes) + TMA", mma, g)]
    if c.has_tmem:
        out += [BarrierArray("ab_consumer", (1,) * c.stages, "commit", "MMA commit", "load warp", g),
                BarrierArray("accum_producer", (1,) * c.accum_stages, "commit", "MMA commit after the K loop",
                             "epilogue warps", g),
                BarrierArray("accum_consumer", (c.epilogue_threads * g,) * c.accum_stages, "threads",
                             "epilogue threads after reading the accumulator", "MMA", g)]
    else:  # cluster_m 2: a stage holds B halves both CTAs loaded, so each release goes to both CTAs' barriers
        out.append(BarrierArray("ab_consumer", (4 * c.tile_consumers * c.cluster_m,) * c.stages, "threads",
                                "lane 0 of each consumer warp of the stage's tile once its wgmma group retired"
                                + (" (of both CTAs of the cluster)" if c.cluster_m > 1 else ""), "load warp",
                                multicast_mask=(1 << c.cluster_m) - 1 if c.cluster_m > 1 else 0))
    out += [BarrierArray("epi_load_full", (1,) * c.epi_load_stages, "tx",
                         "epilogue-load warp expect_tx (C sub-tile bytes) + TMA", epilogue),
            BarrierArray("epi_load_empty", (c.epilogue_threads,) * c.epi_load_stages, "threads",
                         "every epilogue thread after reading C", "epilogue-load warp"),
            BarrierArray("load_order_full", (1,), "threads", "main load warp after a tile's first A/B load",
                         "epilogue-load warp before loading C"),
            BarrierArray("load_order_empty", (1,), "threads", "epilogue-load warp once it passed load_order_full",
                         "main load warp before signalling the next tile")]
    if c.pingpong:  # whose turn it is to wait on the A/B ring (MMA) and on the C ring (epilogue)
        for turn, what in (("mma", "its K loop's last A/B wait"), ("epilogue", "its last C sub-tile")):
            out += [BarrierArray(f"{turn}_turn_full", (4,), "threads", f"lane 0 of each warp of consumer "
                                 f"warpgroup 0 after {what}", "consumer warpgroup 1"),
                    BarrierArray(f"{turn}_turn_empty", (4,), "threads", f"lane 0 of each warp of consumer "
                                 f"warpgroup 1 after {what}", "consumer warpgroup 0")]
    return out


def gemm_layout(c: GemmConfig) -> Layout:
    c.validate()
    barriers = gemm_barriers(c)
    regions = [SmemRegion("a", c.stages * c.a_stage_bytes, TILE_ALIGN, "128B"),
               SmemRegion("b", c.stages * c.b_stage_bytes, TILE_ALIGN, "128B"),
               SmemRegion("c", c.epi_load_stages * c.epi_tile_bytes, TILE_ALIGN, c.epi_swizzle)]
    if c.has_tmem:
        regions.append(SmemRegion("d", 2 * c.epi_tile_bytes, TILE_ALIGN, c.epi_swizzle))
    else:  # one double-buffered D staging tile per consumer warpgroup (its rows: 64, or the tile's with pingpong)
        regions += [SmemRegion(f"d{i}", 2 * c.wg_rows * c.epi_row_bytes, TILE_ALIGN, c.epi_swizzle)
                    for i in range(c.consumers)]
    config = {"BM": c.tile_m, "BN": c.tile_n, "BK": c.tile_k, "num_stages": c.stages, "pingpong": c.pingpong,
              "epi_load_stages": c.epi_load_stages, "epi_tile_n": c.epi_tile_n, "accum_stages": c.accum_stages,
              "cta_group": c.cta_group, "cluster_m": c.cluster_m, "b_major": c.b_major, "target": c.target,
              "smem_budget": c.smem_used, "tmem_used": c.tmem_used}
    tail = _tail(barriers) if c.has_tmem else _tail(barriers)[:1]
    tmem = (TmemRegion("accum", c.accum_stages * c.tile_n),) if c.has_tmem else ()
    return Layout("gemm", config, tuple(regions + tail), tuple(barriers), tmem)


# ===================================================================================================
# Attention on sm_90a (FA3's structure: Q resident, K and V rings, consumer warpgroups release)
# ===================================================================================================


def hopper_attention_barriers(c: AttentionConfig) -> list[BarrierArray]:
    """The barriers of the sm_90a attention kernel, in its declaration order (the kernel reads them
    from here). The consumer barriers count the consumer warps (4 a warpgroup): lane 0 of each arrives
    once the wgmma group that read the stage retired."""
    n = c.hopper.stages
    warps = 4 * c.hopper.consumers
    # persistent: every consumer thread releases Q, and O goes out through the store warp (``o_full{w}`` /
    # ``o_empty{w}``): a lane-0 Q release and a TMA store in the consumers' tile loop made ptxas compute the
    # wgmma descriptors of the K/V loop in vector registers (docs/PERF.md)
    q_stages = c.hopper.q_stages
    persistent = [BarrierArray("q_empty", (32 * warps,) * q_stages, "threads", "every consumer thread once its "
                               "tile's last S = Q K' retired (a later tile's Q may load)", "load warp")] \
        + [b for w in range(c.hopper.consumers) for b in (
            BarrierArray(f"o_full{w}", (128,), "threads", f"every thread of consumer warpgroup {w} once its O rows "
                         "are in shared memory (fenced for the async proxy)", "store warp"),
            BarrierArray(f"o_empty{w}", (1,), "threads", f"the store warp's elected lane once the TMA store of "
                         f"warpgroup {w}'s O read it", f"consumer warpgroup {w}"))] if c.hopper.persistent else []
    # a gathered paged cache (``page_gather``): the load warp's 32 lanes arrive once their cp.async rows landed
    full = ((32,) * n, "threads", "every lane of the load warp once its cp.async rows of the {} tile landed") \
        if c.page_gather else ((1,) * n, "tx", "load warp expect_tx ({} tile bytes) + TMA")
    return [BarrierArray("q_full", (1,) * q_stages, "tx", "load warp expect_tx (Q bytes) + TMA",
                         "consumer warpgroups"),
            *persistent[:1],
            BarrierArray("k_full", full[0], full[1], full[2].format("K"), "consumer warpgroups"),
            BarrierArray("k_empty", (warps,) * n, "threads", "lane 0 of each consumer warp once S = Q K' retired",
                         "load warp"),
            BarrierArray("v_full", full[0], full[1], full[2].format("V"), "consumer warpgroups"),
            BarrierArray("v_empty", (warps,) * n, "threads", "lane 0 of each consumer warp once O += P V retired",
                         "load warp"),
            *persistent[1:]]


def hopper_attention_layout(c: AttentionConfig) -> Layout:
    c.validate()
    t = c.hopper
    barriers = hopper_attention_barriers(c)
    # fp8: rows of min(128, D) bytes, V^T blocks of 64 or 128 keys (and the rows of ones), scale buffers; O its own
    if t.fp8 or t.persistent:
        row, vrow = t.row_bytes, t.v_row_bytes
        regions = [SmemRegion("q", t.q_stages * t.q_bytes, TILE_ALIGN, f"{row}B"),
                   SmemRegion("o", t.o_bytes, TILE_ALIGN, "128B"),
                   SmemRegion("k", t.stages * t.kv_stage_bytes, TILE_ALIGN, f"{row}B"),
                   SmemRegion("v", t.stages * t.v_stage_bytes, TILE_ALIGN, f"{vrow}B")]
        if t.token_scales:
            regions += [SmemRegion("q_scale", t.q_scale_bytes, 128), SmemRegion("k_scale", t.stages * t.k_scale_bytes, 128)]
    else:
        regions = [SmemRegion("q", t.q_bytes, TILE_ALIGN, "128B"),
                   SmemRegion("o", t.q_bytes, TILE_ALIGN, "128B", alias_of="q"),
                   SmemRegion("k", t.stages * t.kv_stage_bytes, TILE_ALIGN, "128B"),
                   SmemRegion("v", t.stages * t.kv_stage_bytes, TILE_ALIGN, "128B")]
    config = {"BM": t.bm, "BN": t.bn, "num_kv_stages": t.stages, "consumers": t.consumers, "target": c.target,
              "smem_budget": t.smem_bytes}
    return Layout("attention", config, tuple(regions + _tail(barriers)[:1]), tuple(barriers))


def kernel_layout(config) -> Layout | None:
    """The layout a built-in kernel's config declares (None for kernels without a layout table)."""
    if isinstance(config, AttentionConfig):
        if config.is_depth512:
            return depth512_layout(config.depth512)
        return fa4_layout(config.fa4) if config.target == "sm_100a" else hopper_attention_layout(config)
    if isinstance(config, GemmConfig):
        return gemm_layout(config)
    return None
