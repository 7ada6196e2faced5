"""The sm_90a attention consumer's epilogue (``hopper_consumer.Consumer`` derives from it): O normalised by the
row sums, written over the warpgroup's dead Q rows (or its O region) and TMA-stored, and the log-sum-exps.
``hopper_varlen`` and ``hopper_split`` override parts of it (stores per thread, fp32 partials)."""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir.dsl import math as fm
from fa4_mlir.kernels.attention import hopper_fp8 as fp8
from fa4_mlir.kernels.attention.dims import BLOCK
from fa4_mlir.kernels.attention.dims import ROW_BYTES as ROW

WG_THREADS = 128


class ConsumerEpilogue:
    """The epilogue's methods; ``Consumer`` sets what they read (``g``, ``w``, the thread's rows, ``_own``)."""

    def _epilogue(self, o, sums: list, maxima: list) -> None:
        """1 / row sum, O over the warpgroup's dead Q rows (128B swizzle), TMA store, LSE."""
        g, w = self.g, self.w
        inv, lse = self._normalizers(sums, maxima)
        self._store_tile(o, inv, self.row0)
        if not g.split_o or w == 0:  # split O: the warpgroups' rows (and LSE) are the same
            self._write_lse(lse)

    def _normalizers(self, sums: list, maxima: list) -> tuple[list, list]:
        """Rows r0's and r0 + 8's factors of O (1 / row sum; fp8: times V's scale) and log-sum-exps."""
        g = self.g
        scale = g.arg.scale_log2e
        one, ln2 = fm.constant(1.0), fm.constant(fm.LN2)
        inv, lse = [], []
        for r in (0, 1):
            # tensor-core row sums: every thread of the quad holds the row's whole sum
            total = sums[r] if self.row_sums else self._quad(dsl.arith.addf, sums[r])
            if self.row_scale is not None:
                scale = self.row_scale[r]
            if g.t.fp8:  # O times V's scale; the sum holds the exp2 bias, which the LSE takes out
                inv.append(dsl.arith.divf(g.arg.v_scale, total))
                log2_sum = dsl.arith.addf(fm.fma(maxima[r], scale, fm.constant(-fp8.P_BIAS)), fm.log2(total))
            else:
                inv.append(dsl.arith.divf(one, total))
                log2_sum = dsl.arith.addf(dsl.arith.mulf(maxima[r], scale), fm.log2(total))
            lse.append(dsl.arith.mulf(log2_sum, ln2))
        return inv, lse

    def _store_tile(self, o, inv: list, row) -> None:
        """O times ``inv`` over the warpgroup's dead Q rows (128B swizzle), TMA-stored at row ``row``
        (the store clips rows past the tensor's end); persistent: in O's region, handed to the store warp
        (``hopper._store``) through the warpgroup's O ring."""
        g, w = self.g, self.w
        # row r0 (and r0 + 8, same swizzle phase) of block b: b * 64 * 128 + r * 128 bytes of the
        # warpgroup's O; the 16-byte chunk c of a row sits at chunk c ^ (r % 8)
        sw = dsl.Value(dsl.arith.andi(self.r0.value, dsl.Value(7).value))
        rb0 = self.r0 * ROW
        rb = [rb0, rb0 + 8 * ROW]
        q4 = self.qq * 4
        o_tile = self._own(g.o, lambda: g.o_region)
        oa = dsl.fa4.smem_address(o_tile)
        if g.split_o:  # O goes over Q's blocks: the other warpgroup's last S = Q K' must have retired
            dsl.fa4.named_barrier(sym_name="q_dead", threads=2 * WG_THREADS)
        if g.persistent:  # the store warp's store of the last tile's O must have read the region
            self.os.producer_acquire()
        for i in range(g.o_cols // 8):
            blk, ch = divmod(i, 8)
            cx = dsl.arith.xori(sw.value, dsl.Value(ch).value)
            cb = dsl.Value(dsl.arith.shli(cx, dsl.Value(4).value))
            cc = cb + q4 + blk * g.wg_rows * ROW
            for r in (0, 1):
                a, b = (dsl.llvm.extractvalue(self.f32, o, [4 * i + 2 * r + h]) for h in (0, 1))
                a, b = dsl.arith.mulf(a, inv[r]), dsl.arith.mulf(b, inv[r])
                pair = dsl.arith.truncf(self.pair16, dsl.vector.from_elements(self.pair, [a, b]))
                dsl.llvm.store(pair, dsl.byte_offset(oa, rb[r] + cc), alignment=4)
        dsl.nvvm.fence_proxy(dsl.nvvm.ProxyKind.async_shared, space=dsl.nvvm.SharedSpace.shared_cta)
        if g.persistent:  # the store warp stores it (``hopper._store``)
            self.os.producer_commit()
            self.os.step()
            return
        if self.shared:
            dsl.fa4.named_barrier([w.value], sym_name="epilogue", threads=WG_THREADS, count=g.consumers)
        else:
            dsl.fa4.named_barrier(sym_name=f"epilogue{w}", threads=WG_THREADS)
        blocks = g.o_cols // BLOCK  # the warpgroup's 64-column blocks of O, from block ``w * blocks`` if split
        first = w * blocks if g.split_o else 0
        with self.k.if_(self.t == 0):
            for blk in range(blocks):
                coords = [dsl.Value((first + blk) * BLOCK).value, g.head.value, row.value, g.bz.value]
                dsl.fa4.tma_store(g.arg.o, o_tile, coords, bytes=g.wg_rows * ROW,
                                  src_offset=blk * g.wg_rows * ROW)
            dsl.fa4.tma_store_wait(pending=0)

    def _write_lse(self, lse: list) -> None:
        """Lane q = 0 of each quad writes its two rows' log-sum-exp, for rows below ``seq_q``."""
        g = self.g
        arg = g.arg
        q0 = self.qq == 0
        wanted = arg.write_lse != 0
        if self.tile_heads == 1:
            lse_rows = [(g.bz * arg.num_heads + g.head) * arg.seq_q] * 2
        else:  # packed heads: each row its own head
            lse_rows = [(g.bz * arg.num_heads + h) * arg.seq_q for h in self.heads]
        for r in (0, 1):
            inside = dsl.arith.cmpi(dsl.arith.CmpIPredicate.slt, self.pos[r].value, arg.seq_q.value)
            write = dsl.arith.andi(dsl.arith.andi(inside, wanted.value), q0.value)
            with self.k.if_(write):
                index = lse_rows[r] + self.pos[r]
                pointer = dsl.element_ptr(arg.lse, index, self.f32)
                dsl.llvm.store(lse[r], pointer)
