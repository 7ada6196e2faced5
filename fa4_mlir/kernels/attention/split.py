"""Split KV (``AttentionConfig.split_kv``) in the sm_100a FA4 paged kernel: the CTA's key range and the fp32
partial epilogue, built through ``fa4_mlir.dsl`` (imported when a kernel is built: this module imports without
MLIR). The host side (grid, ``split_keys``, launch arguments) is ``splitkv``.

CTA (x, y, z) of a split grid works on query tile x / num_splits of sequence b = z and on key range s = x %
num_splits, keys [kv_begin, kv_begin + split_keys) with kv_begin = s * split_keys (a multiple of the K/V tile's
keys, ``splitkv.split_geometry``). Every role counts its tiles over the keys of that range its rows may see,
min(kv_begin + split_keys, key end) - kv_begin (bottom-right causal as the paged kernel: ``varlen.key_end``),
which is 0 for a range at or past Sk_b or wholly masked: the roles skip their tiles, as for a sequence of no
key. Tile t of the CTA holds keys kv_begin + t * bn.., so the load warp's page walk (``paged.Pages``) starts at
kv_begin, and the softmax masks, relative to kv_begin, the keys at or past the row's limit (``row_limit``: its
causal / sequence limit, and the range's end, which a 1Q kernel's pair of tiles may cross).

Instead of the TMA store of O, each softmax thread stores its row (one TMEM lane: a position of a head, as the
dense paged epilogue maps fused GQA rows) normalised over the range's keys, in fp32 and the head dim's columns
only, with 16-byte ``st.global`` at o[b, pos, head, s, :] of O partials [B, Sq, H, S, D], and its LSE (natural
log) at lse[b, head, pos, s] of [B, H, Sq, S], for rows below seq_q (always: ``write_lse`` is ignored). A row
that saw no key of the range stores O 0 and LSE -inf (selected, never multiplied: no NaN), so the combine
weights the range 0.
"""

from __future__ import annotations

from fa4_mlir.kernels.attention import varlen


def query_tile(x):
    """The CTA's query tile (ctaid.x / num_splits); sets ``x.split`` (ctaid.x % num_splits, the key range) and
    ``x.kv_begin`` (its first key, split * split_keys)."""
    from fa4_mlir import dsl

    a, V, arg = dsl.arith, dsl.Value, x.arg
    cx = dsl.ctaid("x")
    x.split = V(a.remui(cx.value, arg.num_splits.value)).named("split")
    x.kv_begin = (x.split * arg.split_keys).named("kv_begin")
    return V(a.divui(cx.value, arg.num_splits.value))


def span(x, kv_end):
    """Keys of the CTA's range its rows may see, counted from ``x.kv_begin``: min(kv_begin + split_keys,
    ``kv_end``) - kv_begin, at least 0 (a range at or past the rows' last key: no tile)."""
    from fa4_mlir import dsl

    a, V = dsl.arith, dsl.Value
    x.range_end = x.kv_begin + x.arg.split_keys
    end = V(a.minsi(x.range_end.value, kv_end.value)) - x.kv_begin
    return V(a.maxsi(end.value, V(0).value))


def row_limit(x, lim):
    """The row's first masked key counted from ``x.kv_begin``: min(``lim`` (absolute: the sequence's end or
    the causal limit), the range's end) - kv_begin; <= 0 for a row that sees no key of the range."""
    from fa4_mlir import dsl

    return dsl.Value(dsl.arith.minsi(lim.value, x.range_end.value)) - x.kv_begin


class Partials(varlen.Epilogue):
    """The split epilogue of a softmax thread's ``row``: its fp32 O pieces and its LSE (-inf where the row saw
    no key of the range), rows below seq_q only."""

    def __init__(self, soft, x, row):
        super().__init__(soft, x, row)
        self.first = None  # the row's first element in O's partials (i64), made by the first ``store_o``

    def lse(self, value):
        """The row's LSE over the range, or -inf for a row that saw none of its keys (the combine's weight 0)."""
        return self.dsl.arith.select(self.seen, value, self.soft._f(float("-inf")))

    def store_o(self, column: int, acc) -> None:
        """32 fp32 values of the row from ``column`` (normalised, zeros for a row without a key) at o[line * D +
        column ..] (line: the row's (b, pos, head, s)), as eight 16-byte ``st.global`` if the row is below seq_q
        (``acc`` is read from TMEM outside the branch: tcgen05.ld is warp-wide). The offset is i64 (partials of
        O may exceed 2^31 elements; the line index is i32, as the LSE's)."""
        from fa4_mlir._mlir import ir

        dsl, soft, x, row = self.dsl, self.soft, self.x, self.row
        a, f32, arg = dsl.arith, soft.t["f32"], x.arg
        i64 = ir.IntegerType.get_signless(64)
        if self.first is None:  # (((b * Sq + pos) * H + head) * S + s) * D, once per row
            line = ((x.bz * arg.seq_q + row.pos) * arg.num_heads + row.head) * arg.num_splits + x.split
            self.first = a.muli(a.extui(i64, line.value), a.constant(i64, soft.c.head_dim))
        with soft.k.if_(self.row_in):
            for q in range(8):
                part = dsl.vector.extract_strided_slice(soft._vec(4, f32), acc, [4 * q], [4], [1])
                at = a.addi(self.first, a.constant(i64, column + 4 * q))
                dsl.llvm.store(part, dsl.element_ptr(arg.o, at, f32), alignment=16)

    def store_lse(self, lse) -> None:
        """lse[((b * H + head) * Sq + pos) * S + s] for rows below seq_q, whatever ``write_lse`` says."""
        dsl, x, row = self.dsl, self.x, self.row
        arg = x.arg
        at = ((x.bz * arg.num_heads + row.head) * arg.seq_q + row.pos) * arg.num_splits + x.split
        with self.soft.k.if_(self.row_in):
            dsl.llvm.store(self.lse(lse), dsl.element_ptr(arg.lse, at, self.soft.t["f32"]))
