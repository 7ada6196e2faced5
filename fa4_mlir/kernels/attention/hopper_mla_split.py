"""The split-KV epilogue of the MLA kernel (``MLAConfig.split_kv``): a decode step's B x H / 64 CTAs
leave most of the SMs idle, so each CTA takes one range of the keys (``hopper_mla``'s prologue sets
``kv_begin`` / ``kv_limit``) and, instead of the bf16 TMA store of O, writes its rows' O normalised over
its keys in fp32 and their log-sum-exp; the host combines the ranges (``fa4_mlir.torch.mla``):
``lse = log sum_s exp(lse_s)``, ``O = sum_s exp(lse_s - lse) O_s``.

Partials: O [B, Sq, H, num_splits, 512] and LSE [B, H, Sq, num_splits], fp32. Thread (r0, quad lane q)
of warpgroup w holds, per row r0 / r0 + 8, columns ``256 w + 8 i + 2 q`` and the next: one 8-byte store
each, for rows below ``seq_q``; warpgroup 0 writes the LSE (both warpgroups hold the same rows).
"""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir.configs.mla import LATENT
from fa4_mlir.dsl import math as fm
from fa4_mlir.kernels.attention.hopper_consumer import Consumer


class SplitConsumer(Consumer):
    """The consumer warpgroup with the fp32 partial epilogue."""

    def _epilogue(self, o, sums: list, maxima: list) -> None:
        g, w, arg = self.g, self.w, self.g.arg
        one, ln2 = fm.constant(1.0), fm.constant(fm.LN2)
        inv, lse = [], []
        for r in (0, 1):
            total = self._quad(dsl.arith.addf, sums[r])
            inv.append(dsl.arith.divf(one, total))
            log2_sum = dsl.arith.addf(dsl.arith.mulf(maxima[r], arg.scale_log2e), fm.log2(total))
            lse.append(dsl.arith.mulf(log2_sum, ln2))
        heads = self.heads if self.tile_heads > 1 else [g.head, g.head]
        column = self.qq * 2 + w * (LATENT // 2)
        for r in (0, 1):
            inside = dsl.arith.cmpi(dsl.arith.CmpIPredicate.slt, self.pos[r].value, arg.seq_q.value)
            with self.k.if_(inside):
                row = ((g.bz * arg.seq_q + self.pos[r]) * arg.num_heads + heads[r]) * arg.num_splits + g.split
                base = row * LATENT + column
                for i in range(g.o_cols // 8):
                    a, b = (dsl.arith.mulf(dsl.llvm.extractvalue(self.f32, o, [4 * i + 2 * r + h]), inv[r])
                            for h in (0, 1))
                    pair = dsl.vector.from_elements(self.pair, [a, b])
                    dsl.llvm.store(pair, dsl.element_ptr(arg.o, base + 8 * i, self.f32), alignment=8)
                if w == 0:  # the LSE of the row (both warpgroups hold it)
                    lse_index = ((g.bz * arg.num_heads + heads[r]) * arg.seq_q + self.pos[r]) * arg.num_splits + g.split
                    with self.k.if_(self.qq == 0):
                        dsl.llvm.store(lse[r], dsl.element_ptr(arg.lse, lse_index, self.f32))
