"""The sm_90a attention over packed variable-length sequences (``AttentionConfig.varlen``): the CTA's
slot (``place_slot``), sequence and tile (``set_tile``) and its consumer warpgroups
(``VarlenConsumer``). The contract is the issue 26 one (``abi.params(varlen=True)``).

The grid is the compacted tile schedule's (``varlen_schedule``): x a slot over every sequence's query tiles
(at most ceil(total_q / BM) + B - 1 of them, ``varlen_slots``), y the head (causal: the linear index with the
heads minor, ``place_slot``); each role finds its slot's sequence b and query tile t with a warp scan over the
sequences' tile counts (``set_tile``; causal, each sequence's longest rows first). Sequence b's queries are
packed rows [q0, q0 + Sq_b) (``cu_seqlens_q[b]``, ``[b + 1]``), its keys rows [k0, k0 + Sk_b). Q/K/V are
TMA-loaded from those rows (batch coordinate 0): rows past the sequence come from the next one (or TMA zero
fill) and are masked (keys: the key limit is Sk_b) or never stored (queries). Causal is bottom-right: row i
sees keys j <= i + Sk_b - Sq_b, so a row may see no key (Sk_b = 0, or Sq_b > Sk_b).

Why the branches: every role branches on ``g.work`` (the slot holds a tile with a K/V tile; paged dense Q:
the CTA's first row is inside the sequence, with a K/V tile), a condition the same in every thread (the
protocol verifier proves the scan's results so, ``fa4_mlir.protocol.uniformity``, and takes the read-only
seqused_k loads as such): a slot past the sequences' tiles does nothing (no barrier waits, nothing is
written), and one with rows but no K/V tile (``g.n_tiles`` = 0) cannot run the roles' loops, which assume a
first tile (the load warp loads K_0, the consumers peel tile 0), so both skip them and the
consumers write O = 0 and LSE = +inf for its rows inside the sequence. Causal rows without a visible key
keep the maximum -inf: the exponents subtract 0 instead (no -inf - -inf = NaN), the row sum is 0, and the
epilogue writes O = 0 (factor 0, not 1 / 0) and LSE = +inf (FlashAttention's convention); the dense
kernel has no such rows and no such selects.

O: the dense TMA store where the warpgroup's 64 rows lie inside the sequence; else (the tile ends past
Sq_b, where a TMA store would overwrite the next sequence's rows, which another CTA writes) each thread
stores its rows below Sq_b through ``o_rows`` (st.global of 16-bit pairs, the fragment's columns). LSE:
``lse[head * total_q + q0 + row]``.
"""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir._mlir import ir
from fa4_mlir.dsl import math as fm
from fa4_mlir.dsl.names import name
from fa4_mlir.kernels.attention import varlen_schedule
from fa4_mlir.kernels.attention.hopper_consumer import Consumer

POS_INF = float("inf")  # the LSE of a row that sees no key


def set_tile(g) -> None:
    """The CTA's sequence (``g.seq``: packed Q, the schedule's, ``varlen_schedule.locate`` on the slot
    ``place_slot`` gives; paged dense Q, the prologue's ``bz``) and tile values, built into the open role: ``q_start``
    (packed Q), ``q_base`` / ``k_base`` (the sequence's first packed rows), ``seq_q`` / ``kv_limit`` (Sq_b /
    Sk_b), ``diagonal`` (causal: a row's limit is its position + diagonal), ``n_tiles``, ``live`` (the CTA's
    first row is inside the sequence: packed Q, the slot holds a tile) and ``work`` (live with a K/V tile);
    ``bz`` is the batch coordinate 0 (packed Q). Each role reads its own: computed once in the prologue, these
    values live across the roles' dispatch, and ptxas spilled one of them at head dim 256 causal."""
    c, t, arg = g.c, g.t, g.arg
    i32 = dsl.i32()
    b = None if c.varlen else g.seq

    def at(pointer, index):  # invariant: read-only in the kernel (ld.global.nc), the same in every thread
        return dsl.Value(dsl.llvm.load(i32, dsl.element_ptr(pointer, index, i32), invariant=True))

    found = None
    if c.varlen:  # packed Q: the slot's sequence and tile (varlen_schedule), its rows and keys with it
        place_slot(g)
        per_lane, width = varlen_schedule.sequence_values(arg, bool(c.page_size))
        # causal: a sequence's longest rows first
        # equal lengths find the tile without the scan (head dims <= 128: above, where the registers are full and
        # a tile's work long, the second way spilled: d256 causal 4 stores, d192 gathered, d256 paged)
        equal = (arg.seq_q, arg.total_q) if t.head_dim <= 128 else (None, None)
        tile = varlen_schedule.locate(g.slot, arg.batch, t.bm, per_lane, width, c.causal, *equal)
        g.seq, found, g.q_start = tile.seq, tile.found, tile.q_start
        g.q_base, g.seq_q = tile.values[0], tile.values[1]
        if c.page_size:  # paged: the keys are seqused_k[b] (pages, no packed K/V rows)
            g.kv_limit = tile.values[2]
        else:
            g.k_base, g.kv_limit = tile.values[2], tile.values[3]
        g.bz = dsl.Value(0)
    else:  # paged, dense Q: every sequence has seq_q rows at batch coordinate b
        g.seq_q, g.kv_limit = arg.seq_q, name(at(arg.seqused_k, b), "seq_kb")
    if c.causal:  # bottom-right: row i sees keys j < i + 1 + Sk_b - Sq_b; the CTA's last row bounds its tiles
        g.diagonal = name(g.kv_limit - g.seq_q + 1, "diagonal")
        last = g.q_start + t.bm // g.tile_heads + (g.kv_limit - g.seq_q)  # pack_gqa: bm / heads positions
        kv_end = dsl.Value(dsl.arith.minsi(g.kv_limit.value, last.value))
        kv_end = name(dsl.Value(dsl.arith.maxsi(kv_end.value, dsl.Value(0).value)), "kv_end")
    else:
        kv_end = g.kv_limit
    if c.split_kv:  # the CTA's keys: its range of the sequence's, up to the causal end (``_split_range``)
        kv_end = _split_range(g, kv_end)
    kv_up = name(kv_end + (t.bn - 1), "kv_up")
    g.n_tiles = name(dsl.Value(dsl.arith.divsi(kv_up.value, dsl.Value(t.bn).value)), "n_tiles")
    # the schedule's tiles hold rows (t < ceil(Sq_b / BM)); a slot past them finds none
    g.live = found if c.varlen else name(_slt(g.q_start, g.seq_q), "live")
    tiles = _slt(0, g.n_tiles)
    g.work = name(dsl.Value(dsl.arith.andi(g.live.value, tiles.value)), "work")


def place_slot(g) -> None:
    """The CTA's slot of the compacted schedule (``g.slot``, whose sequence and tile ``set_tile`` finds), its
    head and K/V head, in each role (made in the prologue, the slot and head, a division's quotient and
    remainder, live across the roles' dispatch, and ptxas spilled them). Causal: the grid's linear index
    x + X y with the heads minor (slot = index / H, head = index % H), so CTAs start in slot order over every
    head; with each sequence's longest rows first (``set_tile``), the last CTAs to start are the short tiles
    of the last sequence, of every head (the longest processing time first, as the persistent walk's
    ``_place``), where one head after another would start the last head's longest rows in the final wave
    (``varlen_schedule``'s docstring has the numbers). Else slot x and head y: a head's tiles side by side,
    sharing its K/V in L2 (all tiles of a sequence do the same work)."""
    arg = g.arg
    if g.c.causal:
        nx = dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_x(dsl.i32()))
        linear = name(dsl.ctaid("x") + nx * dsl.ctaid("y"), "linear")
        g.slot, head = name(linear // arg.num_heads, "slot"), name(linear % arg.num_heads, "head")
    else:
        g.slot, head = name(dsl.ctaid("x"), "slot"), name(dsl.ctaid("y"), "head")
    g.head, g.kvh, g.seq = head, name(head // arg.group, "kvh"), None


def _split_range(g, kv_end) -> dsl.Value:
    """Split KV (dense Q): range s = ctaid.x % num_splits holds keys [s split_keys, (s + 1) split_keys) of
    the sequence (split_keys whole tiles); sets ``split``, ``kv_begin`` (the CTA's tile j holds keys kv_begin +
    j BN ..: the consumers' masks add it, the paged load warp starts at tile kv_begin / BN) and ``kv_limit``
    (keys masked from there on: the range's end or Sk_b, whichever is first; the causal diagonal stays Sk_b's),
    and returns the keys the CTA's tiles span, counted from kv_begin (0 when the range starts at or past the
    sequence's or the causal end: no K/V tile, O 0 and LSE -inf, ``hopper_split``)."""
    arg = g.arg
    g.split = name(dsl.ctaid("x") % arg.num_splits, "split")
    g.kv_begin = name(g.split * arg.split_keys, "kv_begin")
    g.kv_limit = name(dsl.Value(dsl.arith.minsi(g.kv_limit.value, (g.kv_begin + arg.split_keys).value)), "kv_limit")
    kv_end = dsl.Value(dsl.arith.minsi(kv_end.value, g.kv_limit.value))
    return name(dsl.Value(dsl.arith.maxsi((kv_end - g.kv_begin).value, dsl.Value(0).value)), "kv_span")


class VarlenConsumer(Consumer):
    """A consumer warpgroup of the packed kernel: the dense one, but for the branch on ``g.work``, the
    bottom-right key limits, rows without a key and the epilogue (the module's docstring)."""

    def build(self) -> None:
        """The tile when the CTA has one (``g.work``); else O = 0 and LSE = +inf for its rows inside
        the sequence (``g.live``: rows, but no K/V tile); nothing past the sequence."""
        g, k, p = self.g, self.k, self.p
        self._setup_thread()
        with dsl.if_else(g.work) as branch:  # two arms: nothing of the second is live across the first's loop
            with branch.then_():
                self._setup_tile(None)
                ks, vs = g.kp.consumer(), g.vp.consumer()
                name(ks.stage, f"{p}ki")
                name(vs.stage, f"{p}vi")
                self._tile(ks, vs, None)
            with branch.else_(), k.if_(g.live):  # rows without a K/V tile; no Q was loaded
                self._keyless()

    def _keyless(self) -> None:
        """O = 0 and LSE = +inf for the rows of a CTA without a K/V tile, inside the sequence."""
        g = self.g
        self._rows()
        zero = fm.constant(0.0)
        if g.c.varlen:
            self._store_rows(lambda i, r, h: zero)
        else:  # dense Q (paged): O = 0 * 0 over the unloaded Q rows, TMA-stored (clipped past seq_q)
            self._store_tile(dsl.llvm.mlir_zero(self.oacc), [zero, zero], self.row0)
        self._write_lse([fm.constant(POS_INF)] * 2)

    def _key_limit(self, seq_k, pos):
        """Causal, bottom-right: min(Sk_b, position + 1 + Sk_b - Sq_b) (<= 0: the row sees no key)."""
        if self.g.c.causal:
            return dsl.Value(dsl.arith.minsi(seq_k.value, (pos + self.g.diagonal).value))
        return seq_k

    def _finite(self, m):
        """Causal: 0 for a row without a visible key (its maximum -inf), so its exponents are exp2(-inf)
        = 0 and its rescale factors exp2(-inf) = 0, not NaN. Non-causal, every row of a CTA with a K/V
        tile sees its first key (key 0; split KV: kv_begin, below Sk_b where the CTA has a tile)."""
        if not self.g.c.causal:
            return m
        none = dsl.arith.cmpf(dsl.arith.CmpFPredicate.OEQ, m, self.ninf)
        return dsl.arith.select(none, fm.constant(0.0), m)

    def _epilogue(self, o, sums: list, maxima: list) -> None:
        """O / row sum (causal rows without a key: O = 0, LSE = +inf), TMA-stored where the warpgroup's
        rows lie inside the sequence, else stored per thread; the LSE."""
        g = self.g
        inv, lse = self._normalizers(sums, maxima)
        if g.c.causal:  # a maximum of -inf: the row saw no key (its sum is 0)
            zero, inf = fm.constant(0.0), fm.constant(POS_INF)
            for r in (0, 1):
                keyless = dsl.arith.cmpf(dsl.arith.CmpFPredicate.OEQ, maxima[r], self.ninf)
                inv[r] = dsl.arith.select(keyless, zero, inv[r])
                lse[r] = dsl.arith.select(keyless, inf, lse[r])
        if not g.c.varlen:  # dense Q (paged): the dense kernel's TMA store, clipped past seq_q
            self._store_tile(o, inv, self.row0)
            self._write_lse(lse)
            return
        end = self.row0 + g.wg_rows
        with self.k.if_(_slt(end - 1, g.seq_q)):  # the warpgroup's rows inside the sequence
            self._store_tile(o, inv, g.q_base + self.row0)
        with self.k.if_(_slt(g.seq_q, end)):
            self._store_rows(lambda i, r, h: dsl.arith.mulf(dsl.llvm.extractvalue(self.f32, o, [4 * i + 2 * r + h]),
                                                            inv[r]))
        self._write_lse(lse)

    def _store_rows(self, value) -> None:
        """Each thread stores its rows below Sq_b through ``o_rows``: ``value(i, r, h)`` (f32) is row r0 +
        8 r's column 8 i + 2 q + h (q: the thread's lane in its quad), for the head dim's columns."""
        g, arg = self.g, self.g.arg
        d = g.c.head_dim  # O's columns (head dim 96: the tile's 128 hold 96)
        row_type = ir.Type.parse(f"!llvm.array<{d} x i16>")  # a row of O: the address in 64 bits
        q4 = self.qq * 4
        for r in (0, 1):
            with self.k.if_(_slt(self.pos[r], g.seq_q)):
                row = (g.q_base + self.pos[r]) * arg.num_heads + g.head
                base = dsl.byte_offset(dsl.element_ptr(arg.o_rows, row, row_type), q4)
                for i in range(d // 8):
                    pair = dsl.vector.from_elements(self.pair, [value(i, r, h) for h in (0, 1)])
                    dsl.llvm.store(dsl.arith.truncf(self.pair16, pair), dsl.byte_offset(base, 16 * i), alignment=4)

    def _write_lse(self, lse: list) -> None:
        """Lane q = 0 of each quad writes its two rows' log-sum-exp to ``lse[head * total_q + q0 + row]``,
        for rows below Sq_b."""
        g, arg = self.g, self.g.arg
        if not g.c.varlen:  # dense Q (paged): lse[(b * H + head) * seq_q + row], the dense kernel's
            super()._write_lse(lse)
            return
        wanted = dsl.arith.andi((arg.write_lse != 0).value, (self.qq == 0).value)
        for r in (0, 1):
            with self.k.if_(dsl.arith.andi(_slt(self.pos[r], g.seq_q).value, wanted)):
                index = g.head * arg.total_q + g.q_base + self.pos[r]
                dsl.llvm.store(lse[r], dsl.element_ptr(arg.lse, index, self.f32))


def _slt(a, b) -> dsl.Value:
    """``a < b``, signed (an i1 Value)."""
    return dsl.Value(dsl.arith.cmpi(dsl.arith.CmpIPredicate.slt, dsl.Value(a).value, dsl.Value(b).value))
