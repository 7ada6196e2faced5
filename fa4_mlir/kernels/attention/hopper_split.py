"""The split-KV epilogue of the sm_90a paged attention (``AttentionConfig.split_kv``, dense Q: decoding). A
decode step's CTAs (query tile x head or K/V head x sequence) leave SMs idle, so grid x also enumerates
``num_splits`` ranges of each sequence's keys (x = query tile * num_splits + split); ``hopper_varlen.set_tile``
gives the CTA its range (``kv_begin``, ``kv_limit``, the trip count) and ``hopper_paged`` loads its tiles from
their absolute key positions. Instead of O's 16-bit TMA store, each consumer thread stores its rows' O
normalised over the range's keys, in fp32, and their natural-log LSE; the "attention-combine" kernel merges
the ranges (``lse = ln sum_s exp(lse_s)``, ``O = sum_s exp(lse_s - lse) O_s``).

Partials: O [B, Sq, H, num_splits, D] and LSE [B, H, Sq, num_splits], fp32 (D the head dim: at 96, the
first 96 of the tile's 128 columns). Thread (r0, quad lane q) holds, per row r0 / r0 + 8, columns ``8 i + 2 q``
and the next: one 8-byte store each, for rows below ``seq_q``; lane q = 0 of the quad stores the row's LSE
(always: ``write_lse`` is ignored). pack_gqa rows map to (position, head) as the consumer's ``_rows`` says.

A row that sees no key of the range (the range starts at or past Sk_b, causal masks all of it, or Sk_b = 0)
gets O = 0 and LSE = -inf (not the +inf of a row without any key: the combine weights the range exp(-inf) =
0); a CTA without a K/V tile in its range (trip count 0) writes that for all its rows below ``seq_q``.
"""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir._mlir import ir
from fa4_mlir.dsl import math as fm
from fa4_mlir.kernels.attention.hopper_varlen import VarlenConsumer, _slt

NEG_INF = float("-inf")  # the LSE of a row that sees no key of the range


class SplitConsumer(VarlenConsumer):
    """The packed kernel's consumer warpgroup (bottom-right causal, rows without keys) with the fp32 partial
    epilogue (the module's docstring)."""

    def _keyless(self) -> None:
        """O = 0 and LSE = -inf for the rows of a CTA without a K/V tile in its range, below ``seq_q``."""
        self._rows()
        zero = fm.constant(0.0)
        self._store_partials(lambda i, r, h: zero, [fm.constant(NEG_INF)] * 2)

    def _epilogue(self, o, sums: list, maxima: list) -> None:
        """O / row sum and the LSE (causal rows without a key of the range: O = 0, LSE = -inf), stored per
        thread."""
        inv, lse = self._normalizers(sums, maxima)
        if self.g.c.causal:  # a maximum of -inf: the row saw no key of the range (its sum is 0)
            zero, ninf = fm.constant(0.0), fm.constant(NEG_INF)
            for r in (0, 1):
                keyless = dsl.arith.cmpf(dsl.arith.CmpFPredicate.OEQ, maxima[r], self.ninf)
                inv[r] = dsl.arith.select(keyless, zero, inv[r])
                lse[r] = dsl.arith.select(keyless, ninf, lse[r])
        self._store_partials(
            lambda i, r, h: dsl.arith.mulf(dsl.llvm.extractvalue(self.f32, o, [4 * i + 2 * r + h]), inv[r]), lse)

    def _store_partials(self, value, lse: list) -> None:
        """For each of the thread's rows below ``seq_q``: O's columns ``8 i + 2 q`` (+1) of the head dim,
        ``value(i, r, h)`` (f32), at o[b, pos, head, split, :] (8-byte stores; the row's address in 64 bits),
        and lane q = 0's LSE at lse[b, head, pos, split]."""
        g, arg = self.g, self.g.arg
        d = g.c.head_dim  # O's columns (head dim 96: the tile's 128 hold 96)
        row_type = ir.Type.parse(f"!llvm.array<{d} x f32>")
        heads = self.heads if self.tile_heads > 1 else [g.head, g.head]
        q8 = self.qq * 8  # bytes: the thread's first column 2 q
        for r in (0, 1):
            with self.k.if_(_slt(self.pos[r], arg.seq_q)):
                row = ((g.bz * arg.seq_q + self.pos[r]) * arg.num_heads + heads[r]) * arg.num_splits + g.split
                base = dsl.byte_offset(dsl.element_ptr(arg.o, row, row_type), q8)
                for i in range(d // 8):
                    pair = dsl.vector.from_elements(self.pair, [value(i, r, h) for h in (0, 1)])
                    dsl.llvm.store(pair, dsl.byte_offset(base, 32 * i), alignment=8)
                with self.k.if_(self.qq == 0):
                    index = ((g.bz * arg.num_heads + heads[r]) * arg.seq_q + self.pos[r]) * arg.num_splits + g.split
                    dsl.llvm.store(lse[r], dsl.element_ptr(arg.lse, index, self.f32))
