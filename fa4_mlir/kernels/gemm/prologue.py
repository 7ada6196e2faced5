"""The GEMM's prologue and what every role shares: shared memory, barriers, the persistent tile walk.

``Gemm`` declares (in this order, which the PTX depends on) the constants the roles reuse, the shared
memory and TMEM (``GemmSMem``), the TMEM allocation by warp 0 (sm_100a), the barrier arrays and
pipelines (``GemmMBars``), then the tile walk's values: this CTA's first tile and stride (a cluster,
a CTA pair or a B-multicast pair, counts as one), the number of tiles, the raster band, whether C is
read, and the rows and B columns a CTA of a cluster owns. ``tile_origin(t)`` places tile ``t`` of the
grouped raster.
"""

from __future__ import annotations

from fa4_mlir.configs.gemm import MMA_K_BYTES, GemmConfig
from fa4_mlir.kernels.gemm import SM90_PRODUCER_REGISTERS


class Gemm:
    """The built prologue: ``smem``, ``mbars``, the parameters (``arg``) and the shared values."""

    def __init__(self, dsl, k, c: GemmConfig, arg):
        from fa4_mlir._mlir import ir
        from fa4_mlir.dsl.structs.gemm import GemmMBars, GemmSMem

        self.dsl, self.k, self.c, self.arg = dsl, k, c, arg
        self.pair = c.cta_group == 2
        i1 = ir.IntegerType.get_signless(1)
        self.c0 = dsl.Value(dsl.arith.constant(dsl.i32(), 0)).named("c0")
        self.c1 = dsl.Value(dsl.arith.constant(dsl.i32(), 1)).named("c1")
        self.true = dsl.arith.constant(i1, 1)
        self.false = dsl.arith.constant(i1, 0)
        self.smem = GemmSMem(c)
        if c.has_tmem:
            warp = dsl.tid_x() // 32
            with k.if_(warp == self.c0):  # one warp allocates (and later frees) the TMEM
                dsl.fa4.tmem_alloc(self.smem.tmem_addr(), cta_group=c.cta_group)
        self.mbars = GemmMBars(c)
        block = dsl.Value(dsl.nvvm.read_ptx_sreg_ctaid_x(dsl.i32()))
        blocks = dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_x(dsl.i32()))
        self.total = arg.num_m * arg.num_n
        self.cluster_rows = dsl.Value(dsl.arith.constant(dsl.i32(), c.cluster_rows))
        self.tile_n = dsl.Value(dsl.arith.constant(dsl.i32(), c.tile_n))
        self.tile_k = dsl.Value(dsl.arith.constant(dsl.i32(), c.tile_k))
        self.group_m = dsl.Value(dsl.arith.constant(dsl.i32(), c.group_m))
        self.band = self.group_m * arg.num_n
        self.load_c = arg.has_c != self.c0
        self.rank = self.leader = None
        if c.cluster_size > 1:  # the cluster is one worker: CTA rank r owns rows r * rows_per_cta.. of its tile
            self.rank = dsl.Value(dsl.nvvm.read_ptx_sreg_cluster_ctarank(dsl.i32())).named("rank")
            self.first = dsl.shrui(block, self.c1)
            self.stride = dsl.shrui(blocks, self.c1)
            if self.pair:  # the leader issues the pair's MMAs
                self.leader = (self.rank == self.c0).named("leader")
            self.cta_row = self.rank * c.rows_per_cta
            # a pair's CTA holds half of B's columns; with cluster_m 2 each holds all (and loads half: loads)
            self.cta_col = self.rank * c.b_tile_rows if self.pair else self.c0
        else:
            self.first, self.stride = block, blocks
            self.cta_row = self.cta_col = self.c0

    def tile_origin(self, t):
        """(row, col, bcol) of tile ``t``: the first row this CTA owns (a cluster splits the tile's
        rows), the tile's first column, and the first N column of B this CTA holds (a pair's CTA: its
        half). Tiles go in bands of ``group_m`` tile rows of the cluster's height (the last band may be
        narrower), column-major in a band."""
        g = t // self.band
        first_m = g * self.group_m
        band_m = (self.arg.num_m - first_m).min(self.group_m)
        r = t % self.band
        m_block = first_m + r % band_m
        n_block = r // band_m
        row_base = m_block * self.cluster_rows
        col = n_block * self.tile_n
        row = row_base + self.cta_row
        return row, col, col + self.cta_col

    def tiles(self, carry, share: int = 0, sharers: int = 1):
        """The persistent loop over this CTA's tiles (``scf.for`` first to total by stride), or over
        every ``sharers``-th of them from the ``share``-th (a pingpong consumer warpgroup's)."""
        if sharers == 1:
            return self.k.range(self.first, self.total, self.stride, carry=carry)
        return self.k.range(self.first + self.stride * share, self.total, self.stride * sharers, carry=carry)

    # -- warps ------------------------------------------------------------------------------------------
    @property
    def main_load_warp(self) -> int:
        return 4 if self.c.has_tmem else 4 * self.c.consumers

    @property
    def producer_registers(self) -> int | None:
        return None if self.c.has_tmem else SM90_PRODUCER_REGISTERS


def k_steps(c: GemmConfig):
    """(kk, B operand keywords) of each MMA K step of a K block, shared by tcgen05 and wgmma: a K-major
    B steps ``MMA_K_BYTES`` along its rows; an MN-major B steps 16 rows of 128-byte blocks, which sit
    ``tile_k * 128`` bytes apart."""
    for kk in range(c.tile_k * c.elem.bytes // MMA_K_BYTES):
        yield kk, (dict(b_offset=kk * MMA_K_BYTES) if c.b_major == "k" else
                   dict(b_offset=kk * 16 * 128, b_major="mn", b_block_stride=c.tile_k * 128))
