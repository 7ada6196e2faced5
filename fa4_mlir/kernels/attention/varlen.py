"""Packed variable-length sequences (``AttentionConfig.varlen``) in the sm_100a FA4 kernel: the pieces
the prologue, the load, MMA, softmax and correction roles add to the dense kernel, built through
``fa4_mlir.dsl`` (imported when a kernel is built: this module imports without MLIR).

A CTA works on a query tile of sequence b, which every thread finds before anything else by the compacted
schedule (``varlen_schedule``, ``scheduled``: the grid's x a slot over every sequence's tiles): its queries
are the packed rows [q0, q0 + Sq_b) and its keys [k0, k0 + Sk_b), from ``cu_seqlens_q`` / ``cu_seqlens_k``.
A slot past the sequences' tiles exits at once (before TMEM is allocated or a barrier initialised: nothing
waits on it). Every role takes the same trip count from the sequence's key
limit (bottom-right causal: query i sees keys j <= i + Sk_b - Sq_b), which can be 0 (Sk_b = 0, or
causal rows that see no key): the load, MMA and correction roles then skip their work, the softmax
loop runs no iteration, and the epilogue does not wait for an O that no MMA writes. A row that sees no
key (row sum 0, or NaN from the 1Q merge of two empty halves) stores O = 0 and LSE = +inf, selected
rather than multiplied, so neither TMEM garbage nor 0 * inf reaches memory.

O goes out by TMA where the store box's rows lie inside the sequence; a box that would cross Sq_b
would overwrite the next sequence's rows (another CTA's), so there each softmax thread stores its own
row (one TMEM lane) through ``o_rows`` with 16-byte ``st.global``, only rows < Sq_b and only the head
dim's columns (head dim 96: the padded block's last 32 columns are not the tensor's).

A paged K/V cache (``page_size``, module ``paged``) reuses all of it (``config.serving``) with Sk_b =
seqused_k[b]: with a packed Q (``varlen``) Sq_b comes from ``cu_seqlens_q`` as above; with a dense Q
every sequence has seq_q rows, no CTA exits, O goes out by the dense TMA store (clipped at seq_q) and
the LSE is (B, H, Sq).
"""

from __future__ import annotations

import contextlib
import types


def sequence(k, arg, c) -> types.SimpleNamespace:
    """The CTA's sequence (``q0``, ``sq``, ``k0``, ``sk``: packed row offsets and lengths, i32). A packed Q
    takes the compacted schedule (``scheduled``: exits the CTA, all threads alike, for a slot past every
    sequence's tiles). A paged dense Q (``c.page_size``, sequence b = ctaid.z): ``sk`` = seqused_k[b], ``sq``
    = seq_q, no ``q0`` or ``k0`` (the block table places the keys; the grid's query tiles cover seq_q: no CTA
    starts past it)."""
    from fa4_mlir import dsl

    if c.varlen:
        return scheduled(k, arg, c)
    i32 = dsl.i32()
    b = dsl.ctaid("z")
    s = types.SimpleNamespace(q0=None, k0=None, sq=arg.seq_q)
    s.sk = dsl.Value(dsl.llvm.load(i32, dsl.element_ptr(arg.seqused_k, b, i32), invariant=True))  # ld.global.nc
    return s


def scheduled(k, arg, c) -> types.SimpleNamespace:
    """A packed Q's sequence and tile by the compacted schedule (``varlen_schedule``, the sm_90a kernel's:
    ``hopper_varlen.place_slot``): the grid's x a slot over every sequence's tiles of ``cta_positions``
    positions, y the K/V head group (causal: the linear index x + X y with those minor, and each sequence's
    last rows first). Every thread scans in the prologue; a slot past the tiles exits the CTA, all threads
    alike, before TMEM or a barrier. Sets ``b`` (the sequence: the paged block table's row), ``q_start`` (the
    tile's first position) and ``hy`` (the grid's y it stands for) besides the sequence's rows and keys."""
    from fa4_mlir import dsl
    from fa4_mlir.kernels.attention import varlen_schedule as vs

    a, V = dsl.arith, dsl.Value
    if c.causal:  # the heads minor: the CTAs start heavy-to-light within a sequence across every head
        ny = V(dsl.nvvm.read_ptx_sreg_nctaid_y(dsl.i32()))
        linear = dsl.ctaid("x") + V(dsl.nvvm.read_ptx_sreg_nctaid_x(dsl.i32())) * dsl.ctaid("y")
        slot, hy = linear // ny, linear % ny
    else:
        slot, hy = dsl.ctaid("x"), dsl.ctaid("y")

    per_lane, width = vs.sequence_values(arg, bool(c.page_size))
    tile = vs.locate(slot, arg.batch, c.cta_positions, per_lane, width, c.causal, arg.seq_q, arg.total_q)
    s = types.SimpleNamespace(b=tile.seq, q_start=tile.q_start, hy=hy, q0=tile.values[0], sq=tile.values[1])
    if c.page_size:
        s.k0, s.sk = None, tile.values[2]
    else:
        s.k0, s.sk = tile.values[2], tile.values[3]
    with k.if_(V(a.xori(tile.found.value, a.constant(tile.found.value.type, 1))).named("no_tile")):
        dsl.nvvm.exit()
    return s


def key_end(x, c):
    """Keys the CTA's rows may see: Sk_b, or (causal, bottom-right) min(Sk_b, q_end + Sk_b - Sq_b) for its
    last position q_end - 1, at least 0 (its rows past Sq_b see no more than the last real row)."""
    from fa4_mlir import dsl

    a, V, s = dsl.arith, dsl.Value, x.seq
    if not c.causal:
        return s.sk
    q_end = x.q_start + c.cta_positions
    end = V(a.minsi(s.sk.value, (q_end + s.sk - s.sq).value))
    return V(a.maxsi(end.value, V(0).value))


def row_limit(x, c, pos):
    """The first key row ``pos`` (position in the sequence) may not see: Sk_b, or (causal, bottom-right)
    min(Sk_b, pos + 1 + Sk_b - Sq_b), which is <= 0 for the rows that see no key."""
    from fa4_mlir import dsl

    s = x.seq
    if not c.causal:
        return s.sk
    return dsl.Value(dsl.arith.minsi(s.sk.value, (pos + 1 + s.sk - s.sq).value))


def trips(k, x, c):
    """``with`` block of a role's work that needs at least one K/V tile (``if n_iter > 0``); dense kernels
    always have one and build the block unconditionally."""
    if not c.serving:
        return contextlib.nullcontext()
    from fa4_mlir import dsl

    a = dsl.arith
    return k.if_(dsl.Value(a.cmpi(a.CmpIPredicate.sgt, x.n_iter.value, dsl.Value(0).value)))


class Epilogue:
    """The varlen and paged parts of a softmax warpgroup's epilogue (``Softmax._epilogue``), for the
    thread's ``row``: rows that see no key, the store's origin, the LSE (the row stores past the
    sequence's end are the packed Q's only: a dense Q's TMA store clips the rows past seq_q)."""

    def __init__(self, soft, x, row):
        from fa4_mlir import dsl

        self.soft, self.x, self.row, self.dsl = soft, x, row, dsl
        a, s = dsl.arith, x.seq
        self.row_in = dsl.Value(a.cmpi(a.CmpIPredicate.slt, row.pos.value, s.sq.value))
        self.seen = None

    def saw_keys(self, total) -> None:
        """Whether the row saw a key: its row sum (1Q: both halves' merged sum) is > 0; false for NaN."""
        a, f32 = self.dsl.arith, self.soft.t["f32"]
        self.seen = a.cmpf(a.CmpFPredicate.OGT, total, self.soft.s.const(f32, 0.0))

    def output(self, acc):
        """A normalised O vector, or zeros for a row that saw no key."""
        zero = self.soft.s.const(acc.type, 0.0)
        return self.dsl.arith.select(self.seen, acc, zero)

    def lse(self, value):
        """The row's LSE, or +inf (FlashAttention's convention) for a row that saw no key."""
        return self.dsl.arith.select(self.seen, value, self.soft._f(float("inf")))

    def tile_inside(self, positions: int):
        """i1: the store box of positions [pos0, pos0 + positions) lies inside the sequence."""
        a, V = self.dsl.arith, self.dsl.Value
        end = self.row.pos0 + positions
        return V(a.cmpi(a.CmpIPredicate.sle, end.value, self.x.seq.sq.value))

    def origin(self):
        """The TMA store's row and batch coordinates of the tile's first position: the packed row, batch 0;
        with a dense Q (paged) the dense kernel's."""
        if not self.soft.c.varlen:
            return self.row.pos0, self.x.bz
        return self.x.seq.q0 + self.row.pos0, self.dsl.Value(0)

    def store_row(self, narrow, column: int) -> None:
        """The thread's 32 output elements from ``column`` (16-byte pieces), to O's packed row through
        ``o_rows``, if the row is inside the sequence; element (row, head, column) of O[total_q, H, D]
        at ((q0 + pos) * H + head) * D + column, in i64 (O may exceed 2^31 elements; the row index
        (q0 + pos) * H + head is i32, as the LSE's head * total_q + row is)."""
        from fa4_mlir._mlir import ir

        dsl, soft, x, row = self.dsl, self.soft, self.x, self.row
        a, c = dsl.arith, soft.c
        i64 = ir.IntegerType.get_signless(64)
        elem = soft.t["elem"]
        with soft.k.if_(self.row_in):
            line = (x.seq.q0 + row.pos) * x.arg.num_heads + row.head
            first = a.muli(a.extui(i64, line.value), a.constant(i64, c.head_dim))
            for q in range(4):
                part = dsl.vector.extract_strided_slice(soft._vec(8, elem), narrow, [8 * q], [8], [1])
                at = a.addi(first, a.constant(i64, column + 8 * q))
                dsl.llvm.store(part, dsl.element_ptr(x.arg.o_rows, at, elem), alignment=16)

    def store_lse(self, lse) -> None:
        """lse[head * total_q + q0 + pos] for rows inside the sequence (when write_lse != 0); with a dense Q
        (paged) the dense kernel's lse[(b * H + head) * seq_q + pos]."""
        dsl, x, row = self.dsl, self.x, self.row
        a, V = dsl.arith, dsl.Value
        with self.soft.k.if_(V(a.andi(self.row_in.value, (x.arg.write_lse != 0).value))):
            if self.soft.c.varlen:
                at = row.head * x.arg.total_q + x.seq.q0 + row.pos
            else:
                at = ((x.bz * x.arg.num_heads + row.head) * x.arg.seq_q) + row.pos
            dsl.llvm.store(self.lse(lse), dsl.element_ptr(x.arg.lse, at, self.soft.t["f32"]))
