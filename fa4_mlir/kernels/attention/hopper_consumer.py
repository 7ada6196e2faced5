"""The sm_90a attention's consumer warpgroups (``hopper.py`` builds the parameters, the prologue and
the load warp, and passes what they made as ``g``: the config, the tile, the parameters, regions,
barriers, rings and the CTA's coordinates).

Warpgroup ``w`` owns query rows ``[64 w, 64 w + 64)`` of the CTA's 128 (or 192). Its accumulators live in
registers as ``!llvm.struct<(f32, ...)>`` (what ``fa4.wgmma`` takes and returns): S with ``BN / 2``
values a thread, O with ``D / 2``. Thread ``t`` of the warpgroup holds rows ``r0 = 16 (t / 32) +
(t % 32) / 4`` and ``r0 + 8``; of every 4 consecutive values, the first two are row r0's and the last
two row r0 + 8's, at keys (or O columns) ``8 i + 2 (t % 4)`` and the next (the wgmma accumulator
layout). A row's values are spread over the 4 threads of a quad, so its maximum and sum end in two
butterfly shuffles.

With ``AttentionConfig.one_consumer_role`` every consumer warpgroup runs one copy of this code (one
``fa4.warp_role`` over their warps, FlashAttention-4's): ``w`` is then the warpgroup's index at run time (the thread
index / 128), and with it its first row, its stage of Q's (and O's) region (``fa4.smem_stage``), and its members of
the named-barrier families ``sched`` and ``epilogue`` (``bar.sync`` takes the id in a register); without it each
warpgroup is a role of its own with ``w`` compiled in, two or three copies of the code.

Per K/V tile the warpgroup waits for its turn (named barrier ``sched{w}``), issues S = Q K_j' and
O += P_{j-1} V_{j-1}, hands the turn to the next warpgroup (round robin over ``g.consumers``: two, or
three with a 192-row tile), and while the P@V runs takes the softmax of S_j; then it
waits for the P@V, rescales O by ``exp2((m_old - m_new) * scale_log2e)`` and packs P_j to 16 bits
as the next RS wgmma's A fragments. The K/V tiles after the first run in two loops: first those no row
of the warpgroup masks (``_unmasked_end``), with no test of the mask, then the rest (``g.peel_unmasked``;
off where ptxas spilled peeled: the MLA kernel, per-token fp8 over three warpgroups; and with
``AttentionConfig.single_kv_loop``: one loop is a third less code, which the causal walk's short rows run
faster, their consumers waiting less for instructions). With
``g.lazy_rescale`` (``AttentionConfig.lazy_rescale``) a warp skips the rescale of a tile where none of its
rows' maxima grew (a warp vote; the same numbers). With ``g.rescale_before_pv``
(``AttentionConfig.rescale_before_pv``) O is rescaled by tile j-1's factors after S = Q K_j' is issued,
while it runs, and before the O += P_{j-1} V_{j-1} that reads O (the factors carried through the loop; the
last P V's after the loop), not after the softmax.

At head dim 512 (``g.split_o``, see ``hopper.py``) both warpgroups own the CTA's 64 rows and take the
same S and softmax; warpgroup ``w``'s O is columns ``[256 w, 256 w + 256)`` (``g.o_cols / 2`` values a
thread), read from V's column blocks ``4 w ..`` and written over Q's, once both warpgroups' last
S = Q K' retired (named barrier ``q_dead``); warpgroup 0 writes the LSE.

fp8 (``g.t.fp8``): k32 wgmmas, P packed to e4m3 fragments of 32 keys, O += P V^T, S scaled by the keys'
k scales and each row's softmax scale by its q scale (per-token scales), the exp2 bias, O times
``v_scale`` and written as bf16 to its own region: ``hopper_fp8``; ``exp2_emulation`` of the
exponentials by polynomial on the FMA pipe (``exp2.py``; it pays at head dim 64, docs/PERF.md), in f32 or,
with ``exp2_f16x2``, two at a time in packed f16 (``hopper_fp8.exponentials``). At head dims 64 and 128
(``g.row_sums``) the P V wgmmas sum P's rows over V^T's rows of ones instead of the softmax's FADDs, one tile at
a time, the row's sum ``l`` across tiles in fp32 (``_column_sums``, ``_wgmma_sums``).

The MLA kernel (``hopper_mla``) builds the same consumers over its own prologue, whose ``g`` adds
``shared_kv`` (V is the first columns of the K stage: a K stage is released once the P @ V that read
it retired, not after S = Q K'), ``tile_heads`` (the 64 rows are ``tile_heads`` heads x ``64 /
tile_heads`` positions: row r is position ``r / tile_heads`` of head ``head + r % tile_heads``) and
``t.v_stage_bytes`` (V stages narrower than K's: the prefill form's V is 128 columns, K 192); with
split KV, ``kv_begin`` and ``kv_limit`` (the CTA's keys: tile j holds keys ``kv_begin + j BN ..``,
masked from ``kv_limit`` on), and its own epilogue.

The paged kernel with ``pack_gqa`` (``hopper``) sets ``tile_heads`` as well (its G heads of a K/V head): a
warpgroup's first position is then ``q_start + w * 64 / tile_heads``.

Packed sequences (``hopper_varlen.VarlenConsumer``) override the hooks ``_key_limit`` (bottom-right
causal), ``_finite`` (rows that see no key) and the epilogue (``_normalizers``, ``_store_tile`` and
stores per thread).
"""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir._mlir import ir
from fa4_mlir.dsl import math as fm
from fa4_mlir.dsl.names import name, name_all
from fa4_mlir.kernels.attention import hopper_fp8 as fp8
from fa4_mlir.kernels.attention.dims import BLOCK
from fa4_mlir.kernels.attention.dims import ROW_BYTES as ROW
from fa4_mlir.kernels.attention.exp2 import emulated, exp2_poly_fma
from fa4_mlir.kernels.attention.hopper_epilogue import WG_THREADS, ConsumerEpilogue



class Consumer(ConsumerEpilogue):
    """Builds consumer warpgroup ``w``'s role body into the open ``fa4.warp_role``; ``w`` a ``dsl.Value``
    (``AttentionConfig.one_consumer_role``): the role of every consumer warpgroup, ``w`` its warpgroup's index
    at run time (its rows, its Q and O buffers, its turn barriers: members of the families ``sched`` and
    ``epilogue``)."""

    def __init__(self, k, g, w):
        self.k, self.g, self.w = k, g, w
        self.shared = not isinstance(w, int)
        self.p = "c_" if self.shared else f"c{w}_"  # the warpgroup's prefix of value names in the printed IR
        f32 = self.f32 = fm.f32()
        self.i32 = dsl.i32()
        self.sacc = dsl.llvm.StructType.get_literal([f32] * (g.bn // 2))
        # fp8 row sums on the tensor core (``hopper_fp8``): "columns" widens O's accumulator by the sum columns,
        # "wgmma" adds the n8 one of the tile's sums
        self.row_sums = g.row_sums
        self.o_values = (g.o_cols + (g.t.sum_rows if g.row_sums == "columns" else 0)) // 2  # O's values a thread
        self.oacc = self.sacc if 2 * self.o_values == g.bn else dsl.llvm.StructType.get_literal([f32] * self.o_values)
        self.sum_acc = dsl.llvm.StructType.get_literal([f32] * (g.t.sum_rows // 2)) if g.row_sums == "wgmma" \
            else None
        # split O: this warpgroup's V columns start at 64-column block 4 w of the stage
        self.v_base = w * (g.o_cols // BLOCK) * g.bn * ROW if g.split_o else 0
        elem = ir.F16Type.get() if g.elem == "f16" else ir.BF16Type.get()  # fp8: O is bf16
        self.pair = ir.VectorType.get([2], f32)
        self.pair16 = ir.VectorType.get([2], elem)
        self.fragment = ir.VectorType.get([4], self.i32)
        self.shared_kv, self.tile_heads = g.shared_kv, g.tile_heads

    # -- the role ------------------------------------------------------------------------------------
    def build(self) -> None:
        """The role: one tile (the CTA's), or with ``g.persistent`` each tile of the CTA's walk, the K
        and V rings and Q's ring going on from tile to tile."""
        g, k, p = self.g, self.k, self.p
        self._setup_thread()
        if not g.persistent:
            self._setup_tile(None)
            ks, vs = g.kp.consumer(), g.vp.consumer()
            name(ks.stage, f"{p}ki")
            name(vs.stage, f"{p}vi")
            self._tile(ks, vs, None)
            return
        g.walk(dsl, g)
        # O's ring to the store warp: this warpgroup is its producer
        qs, ks, vs, self.os = g.qp.consumer(), g.kp.consumer(), g.vp.consumer(), g.op[self.w].producer()
        with k.range(g.first, g.total, g.stride, carry=[qs, ks, vs, self.os]) as tile:
            name(tile, f"{p}tile")
            g.place(dsl, g, tile)
            self._setup_tile(qs)
            self._tile(ks, vs, qs)

    def _tile(self, ks, vs, qs) -> None:
        """One tile's S, softmax and O over its K/V tiles, then its epilogue; ``qs`` (persistent): Q's
        ring state, released once the tile's last S = Q K' retired."""
        g, k, p = self.g, self.k, self.p
        o_zero = name(dsl.llvm.mlir_zero(self.oacc), f"{p}o_zero")
        self._arrive_if(self.w == g.consumers - 1)  # warpgroup 0 takes the first turn

        # tile 0: S = Q K_0', softmax, P
        self._sched("sync")
        ks.consumer_wait()
        s = self._qk(ks)
        self._sched("arrive")
        dsl.fa4.wgmma_wait(pending=0)
        vals = self._mask(self._scores(s, ks), dsl.Value(0))
        m, _, probs, sums = self._softmax(vals, None)
        frags = self._pack(probs)

        # tiles 1 .. n-1: S_j = Q K_j' and O += P_{j-1} V_{j-1} in flight, then the softmax of S_j. Peeled, two
        # loops as FlashAttention-4's: the tiles no row of the warpgroup masks, then the rest with the mask's test.
        # A branch inside the first loop would end ptxas's scheduling region there: it then waits for the P @ V
        # at the region's start, before the softmax it should overlap (docs/PERF.md).
        mv, lv = [dsl.Var(x) for x in m], [dsl.Var(x) for x in sums]
        ov, fv = dsl.Var(o_zero), [dsl.Var(f) for f in frags]
        # rescale_before_pv: tile j-1's rescale factors, applied to O in tile j's step (exp2(0) = 1 before tile 1)
        self.pending = [dsl.Var(fm.constant(1.0)) for _ in (0, 1)] if g.rescale_before_pv else []
        carry = [*mv, *lv, ov, ks, vs, *fv, *self.pending]
        loops = [(1, g.n_tiles, True)]  # g.peel_unmasked off: one loop, each tile tested
        if g.peel_unmasked:
            unmasked = self._unmasked_end()
            loops = [(1, unmasked, False), (unmasked, g.n_tiles, True)]
        for lo, hi, masked in loops:
            with k.range(lo, hi, carry=carry) as j:
                suffix = "m" if masked and g.peel_unmasked else ""
                q = f"{p}i{suffix}_"
                name(j, f"{p}j{suffix}")
                name_all([*(v.value for v in mv + lv), ov.value, ks.stage, ks.phase, vs.stage, vs.phase,
                          *(f.value for f in fv)],
                         [f"{q}{n}" for n in ("m0", "m1", "l0", "l1", "o", "ks", "kph", "vs", "vph")]
                         + [f"{q}fr{i}" for i in range(len(fv))])
                self._kv_step(j, masked, mv, lv, ov, ks, vs, fv)
        name(ov.value, f"{p}lp")
        if qs is not None:  # every S = Q K' of the tile retired: a later tile's Q may load (every thread arrives:
            qs.consumer_release()  # a lane-0 release in the tile loop cost the K/V loop its uniform descriptors)
            qs.step()

        # the last P@V, then the epilogue
        self._sched("sync")
        o_last = self._rescale(ov.value, [f.value for f in self.pending]) if self.pending else ov.value
        vs.consumer_wait()
        o, sums_acc = self._pv(vs, o_last, [f.value for f in fv])
        self._arrive_if(self.w != g.consumers - 1)  # the last warpgroup's last turn hands nothing over: each
        # sched0 sync has its arrival
        dsl.fa4.wgmma_wait(pending=0)
        o = dsl.fa4.wgmma_fence_acc(o)
        tile_sums = self._column_sums(o, zero=False)[1] if self.row_sums == "columns" else self._wgmma_sums(sums_acc)
        if tile_sums is not None:  # the last tiles' sums (relative to the final maxima)
            for r in (0, 1):
                lv[r].value = dsl.arith.addf(lv[r].value, tile_sums[r])
        self._release(vs)
        if qs is not None:  # the V ring goes on with the next tile
            vs.step()
        self._epilogue(o, [v.value for v in lv], [v.value for v in mv])

    def _kv_step(self, j, masked: bool, mv, lv, ov, ks, vs, fv) -> None:
        """K/V tile ``j`` >= 1 of the loop: S_j = Q K_j' and O += P_{j-1} V_{j-1}, the softmax of S_j (with the
        mask's test where ``masked``), O rescaled, P_j packed; the loop's states (``mv`` .. ``fv``) updated."""
        k = self.k
        o_in = ov.value
        if self.row_sums == "columns":  # the sums of P_{j-2} (relative to m_{j-1}) before P_{j-1}'s are added
            o_in, taken = self._column_sums(o_in, zero=True)
            for r in (0, 1):
                lv[r].value = dsl.arith.addf(lv[r].value, taken[r])
        self._sched("sync")
        ks.consumer_wait()
        s = self._qk(ks)
        if self.pending:  # O to m_{j-1} while S = Q K_j' runs, before the P V that adds P_{j-1} (relative to it)
            o_in = self._rescale(o_in, [f.value for f in self.pending])
        vs.consumer_wait()
        o, sums_acc = self._pv(vs, o_in, [f.value for f in fv])
        self._sched("arrive")
        dsl.fa4.wgmma_wait(pending=1)
        vals = self._scores(s, ks)
        if masked:
            vals = self._mask(vals, j)
        m, (factors, grew), probs, sums = self._softmax(vals, [mv[0].value, mv[1].value])
        dsl.fa4.wgmma_wait(pending=0)
        o = dsl.fa4.wgmma_fence_acc(o)
        tile_sums = self._wgmma_sums(sums_acc)  # "wgmma": P_{j-1}'s sums (relative to m_{j-1})
        self._release(vs)
        vs.step()
        if self.pending:  # the next step's (or the last P V's)
            for var, factor in zip(self.pending, factors):
                var.value = factor
        elif grew is None:
            o = self._rescale(o, factors)
        else:
            ov.value = o
            with k.if_(grew, carry=[ov]):  # only when some row of the warp adopted a larger maximum
                ov.value = self._rescale(ov.value, factors)
            o = ov.value
        if not self.row_sums:
            sums = [fm.fma(lv[r].value, factors[r], sums[r]) for r in (0, 1)]
        elif self.row_sums == "wgmma":  # l + P_{j-1}'s sums, then to m_j
            sums = [dsl.arith.mulf(dsl.arith.addf(lv[r].value, tile_sums[r]), factors[r]) for r in (0, 1)]
        else:  # "columns": l to m_j (O's sum columns are rescaled with O)
            sums = [dsl.arith.mulf(lv[r].value, factors[r]) for r in (0, 1)]
        frags = self._pack(probs)
        for var, new in zip([*mv, *lv, ov, *fv], [*m, *sums, o, *frags]):
            var.value = new

    def _setup_thread(self) -> None:
        """The thread's place in the warpgroup."""
        g, p = self.g, self.p
        self.full, self.clamp = dsl.Value(-1).value, dsl.Value(31).value  # shuffle: all lanes, whole warp
        self.offsets = {1: dsl.Value(1).value, 2: dsl.Value(2).value}
        tid = dsl.tid_x()
        self.t = (tid % WG_THREADS).named(f"{p}t")
        lane = tid % 32
        self.lane0 = (lane == 0).named(f"{p}lane0")
        wi = self.t // 32
        lq = lane // 4
        self.qq = (lane % 4).named(f"{p}qq")
        self.q2 = self.qq * 2
        self.r0 = (wi * 16 + lq).named(f"{p}r0")  # the thread's rows in the warpgroup: r0, r0 + 8
        if self.shared:  # the next warpgroup's turn barrier, round robin
            last = (self.w == g.consumers - 1).value
            self.following = name(dsl.Value(dsl.arith.select(last, dsl.Value(0).value, (self.w + 1).value)),
                                  f"{p}next")

    def _setup_tile(self, qs) -> None:
        """The rows' positions and key limits in the tile; wait for Q (``qs``, persistent: on its ring)."""
        g = self.g
        self._rows()
        self.ninf = fm.constant(fm.NEG_INF)
        self.neg_scale = dsl.arith.negf(g.arg.scale_log2e)
        self.lim = self._key_limits(g.kv_limit)
        # the warpgroup's Q: its rows of the Q ring's stage (persistent, ``q_stages`` 2), else its own region
        self.q_tile, self.q_base = self._own(g.q, lambda: (g.q_region, g.q_part)), 0
        if qs is None:
            zero = dsl.Value(0).value
            dsl.fa4.mbarrier_try_wait_parity(g.qbar, zero, zero)
        else:
            qs.consumer_wait()
            if g.t.q_stages > 1:
                self.q_tile = dsl.fa4.smem_stage(g.q_region, qs.stage, bytes=g.t.q_bytes)
                self.q_base = self.w * g.q_part
        # per-token scales: each row's softmax scale (else scale_log2e for all)
        self.row_scale = fp8.row_scales(self) if g.qscale is not None else None
        self.neg_row_scale = [dsl.arith.negf(x) for x in self.row_scale] if self.row_scale else None

    def _rows(self) -> None:
        """The warpgroup's first position (``row0``) and the thread's rows' positions (``pos``); packed heads
        (MLA, pack_gqa): row r is position r / tile_heads of head head + r % tile_heads (``heads``), a
        warpgroup's 64 rows 64 / tile_heads positions."""
        g, p = self.g, self.p
        # split O: both warpgroups own the CTA's 64 rows
        self.row0 = g.q_start if g.split_o else \
            (g.q_start + self.w * (g.wg_rows // self.tile_heads)).named(f"{p}row0")
        if self.tile_heads == 1:
            pos0 = (self.row0 + self.r0).named(f"{p}pos0")
            self.pos = [pos0, (pos0 + 8).named(f"{p}pos1")]
        else:
            rows = [self.r0, self.r0 + 8]
            self.pos = [(self.row0 + r // self.tile_heads).named(f"{p}pos{i}") for i, r in enumerate(rows)]
            self.heads = [(g.head + r % self.tile_heads).named(f"{p}head{i}") for i, r in enumerate(rows)]

    def _key_limits(self, seq_k) -> list:
        """Rows r0's and r0 + 8's key limits (keys at or past one are masked)."""
        return [self._key_limit(seq_k, pos) for pos in self.pos]

    def _key_limit(self, seq_k, pos):
        """The key limit of the row at position ``pos``: ``seq_k`` (``g.kv_limit``: seq_k, or with split KV
        (MLA) the end of the CTA's keys); causal, top-left: ``pos`` + 1 (``hopper_varlen`` aligns it
        bottom-right). Never decreasing in ``pos``, so the warpgroup's first row has its lowest."""
        if self.g.c.causal:
            return dsl.Value(dsl.arith.minsi(seq_k.value, (pos + 1).value))
        return seq_k

    def _unmasked_end(self) -> dsl.Value:
        """The first K/V tile, from 1 to ``n_tiles``, that a row of the warpgroup masks: the warpgroup's
        first position has the lowest key limit, and tile j holds keys ``kv_begin + j BN ..``. Uniform over
        the warpgroup, as its wgmmas (``.aligned``) need."""
        g = self.g
        span = self._key_limit(g.kv_limit, self.row0)
        if g.kv_begin is not None:
            span = span - g.kv_begin
        whole = dsl.Value(dsl.arith.divsi(dsl.Value(span).value, dsl.Value(g.bn).value))
        within = dsl.arith.minsi(whole.value, dsl.Value(g.n_tiles).value)
        return name(dsl.Value(dsl.arith.maxsi(within, dsl.Value(1).value)), f"{self.p}unmasked")

    # -- MMAs and turns ------------------------------------------------------------------------------
    def _qk(self, state):
        """S = Q K' from the state's K stage, one committed wgmma group; returns the accumulator."""
        g = self.g
        kb = dsl.fa4.smem_stage(g.kring, state.stage, bytes=g.t.kv_stage_bytes)
        acc = dsl.llvm.mlir_undef(self.sacc)
        for kk in range(g.d * g.t.elem_bytes // fp8.K_STEP_BYTES):  # K steps of 32 bytes (k16; fp8: k32)
            blk, sub = divmod(kk * fp8.K_STEP_BYTES, g.row)
            acc = dsl.fa4.wgmma(self.q_tile, kb, acc, n=g.bn, ab_type=g.elem, accumulate=int(kk > 0),
                                a_offset=self.q_base + blk * g.wg_rows * g.row + sub,
                                b_offset=blk * g.bn * g.row + sub)
        dsl.fa4.wgmma_commit()
        return acc

    def _pv(self, state, o, frags):
        """O += P V from the state's V stage with P's fragments (one vector<4xi32> per 16 keys), one committed
        group; returns (O, the accumulator of the tile's row sums: fp8 "wgmma" row sums, else None)."""
        g = self.g
        vb = dsl.fa4.smem_stage(g.vring, state.stage, bytes=g.t.v_stage_bytes)
        if g.t.fp8:  # V^T, one k32 step per fragment of 32 keys
            o, sums = fp8.pv(self, vb, o, frags)
            dsl.fa4.wgmma_commit()
            return o, sums
        for j, frag in enumerate(frags):
            o = dsl.fa4.wgmma(frag, vb, o, n=g.o_cols, ab_type=g.elem, accumulate=1,
                              b_offset=self.v_base + j * 16 * ROW, b_major="mn", b_block_stride=g.bn * ROW)
        dsl.fa4.wgmma_commit()
        return o, None

    def _column_sums(self, o, zero: bool):
        """"columns" row sums: (O with its sum columns zeroed if ``zero``, rows r0's and r0 + 8's sums). The 8
        sum columns follow O's: values ``o_cols / 2 ..`` of the thread, rows r0, r0, r0 + 8, r0 + 8, each the
        row's sum over the keys since they were last zeroed (every column holds it, so no quad reduction)."""
        first = self.g.o_cols // 2
        sums = [dsl.llvm.extractvalue(self.f32, o, [first + 2 * r]) for r in (0, 1)]
        if zero:  # times 0 rather than a 0 moved in: an FMUL as O's rescale, which ptxas pipelines with the wgmmas
            nil = fm.constant(0.0)
            for i in range(first, self.o_values):
                o = dsl.llvm.insertvalue(o, dsl.arith.mulf(dsl.llvm.extractvalue(self.f32, o, [i]), nil), [i])
        return o, sums

    def _wgmma_sums(self, acc):
        """"wgmma" row sums: rows r0's and r0 + 8's sums of the last P V's P, from its retired n8 accumulator
        ``acc``; None without it."""
        if acc is None:
            return None
        acc = dsl.fa4.wgmma_fence_acc(acc)
        return [dsl.llvm.extractvalue(self.f32, acc, [2 * r]) for r in (0, 1)]

    def _sched(self, kind: str) -> None:
        """Wait for this warpgroup's turn to issue MMAs (sync) or hand the turn to the next one, round
        robin (arrive): ``sched{w}`` counts warpgroup w's sync and its predecessor's arrival."""
        n = self.g.consumers
        if self.shared:  # members w and w + 1 (mod n) of the family
            index = self.w if kind == "sync" else self.following
            dsl.fa4.named_barrier([index.value], sym_name="sched", threads=2 * WG_THREADS, kind=kind, count=n)
        elif kind == "sync":
            dsl.fa4.named_barrier(sym_name=f"sched{self.w}", threads=2 * WG_THREADS)
        else:
            following = (self.w + 1) % n
            dsl.fa4.named_barrier(sym_name=f"sched{following}", threads=2 * WG_THREADS, kind="arrive")

    def _arrive_if(self, condition) -> None:
        """Hand the turn on where ``condition`` holds: a bool in a warpgroup's own code, an i1 Value (a
        branch) in the code of every warpgroup."""
        if self.shared:
            with self.k.if_(condition):
                self._sched("arrive")
        elif condition:
            self._sched("arrive")

    def _own(self, regions: list, stages):
        """This warpgroup's buffer: ``regions[w]``, or in the code of every warpgroup stage w of the
        ``(region, bytes)`` that ``stages()`` gives (``regions[w]`` lies at ``w * bytes`` of it)."""
        if not self.shared:
            return regions[self.w]
        region, nbytes = stages()
        return dsl.fa4.smem_stage(region, self.w.value, bytes=nbytes)

    def _scores(self, s, ks) -> list:
        """The retired S's values (per-token: times the keys' k scales), its K stage released (shared K/V: the
        stage is V too, released after its P @ V) and K's ring stepped."""
        s = dsl.fa4.wgmma_fence_acc(s)
        vals = self._key_scaled(s, ks)
        if not self.shared_kv:
            self._release(ks)
        ks.step()
        return vals or self._values(s)

    def _release(self, state) -> None:
        """Lane 0 of each warp frees the state's stage (its wgmma group retired)."""
        with self.k.if_(self.lane0):
            state.consumer_release()

    # -- softmax -------------------------------------------------------------------------------------
    def _values(self, s) -> list:
        return [dsl.llvm.extractvalue(self.f32, s, [i]) for i in range(self.g.bn // 2)]

    def _key_scaled(self, s, state) -> list | None:
        """Per-token scales: S's values times their keys' k scales, read before the K stage is released
        (its scale buffer goes with it); else None."""
        g = self.g
        if g.kscale is None:
            return None
        buf = dsl.fa4.smem_stage(g.kscale, state.stage, bytes=g.t.k_scale_bytes)
        return fp8.key_scaled(self, self._values(s), buf)

    def _mask(self, vals: list, tile) -> list:
        """``vals`` with keys at or past each row's limit set to -inf, inside an scf.if on whether
        tile ``tile`` reaches the first row's limit (rows r and r + 8: r's limit is the lower)."""
        g = self.g
        key0 = tile * g.bn
        if g.kv_begin is not None:  # split KV (MLA, the paged kernel's): the CTA's keys start there
            key0 = g.kv_begin + key0
        need = _sgt(key0 + g.bn, self.lim[0])
        out = [dsl.Var(v) for v in vals]
        with self.k.if_(need, carry=out):
            k0q = key0 + self.q2
            rel = [self.lim[0] - k0q, self.lim[1] - k0q]
            for i, v in enumerate(vals):
                chunk, r = divmod(i, 4)
                col = 8 * chunk + (r & 1)  # key of value i relative to key0 + 2q
                out[i].value = dsl.arith.select(_sgt(rel[r >> 1], col).value, v, self.ninf)
        return [v.value for v in out]

    def _tree(self, op, vals: list):
        """``vals`` combined pairwise, level by level (the text kernel's order)."""
        level = list(vals)
        while len(level) > 1:
            nxt = [op(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return level[0]

    def _quad(self, op, x):
        """``x`` combined over the 4 threads of a quad (which hold one row)."""
        for off in (1, 2):
            other = dsl.nvvm.shfl_sync(self.f32, self.full, x, self.offsets[off], self.clamp,
                                       dsl.nvvm.ShflKind.bfly)
            x = op(x, other)
        return x

    def _softmax(self, vals: list, m_old: list | None):
        """Row maxima (new), (rescale factors, whether the warp rescales) (None on the first tile),
        probabilities and row sums of this thread's values: ``p = exp2(s * scale_log2e - m *
        scale_log2e)``, one FMA and ex2 each (``exp2_emulation`` of every 32 of a row's values by
        polynomial, ``exp2.py``). With ``g.lazy_rescale`` the warp votes whether any of its rows' maxima
        grew (``grew``; else None: every tile rescales): where none did, every factor is exp2(0) = 1 and
        the caller skips O's rescale, the same numbers for fewer instructions. (Unlike the sm_100a
        softmax, no row keeps a stale maximum: P's largest element stays exactly 1, which the GPU tests'
        error bound assumes; a threshold of 8 failed it at head dim 256 by 2-4% of max abs error.)"""
        if not self.g.lazy_rescale:
            return self._probabilities(vals, None, m_old, None)
        maxima = [self._row_max(vals, row, m_old) for row in (0, 1)]
        grew = None
        if m_old is not None:
            growth = [dsl.arith.cmpf(dsl.arith.CmpFPredicate.OGT, maxima[r], m_old[r]) for r in (0, 1)]
            grew = dsl.nvvm.vote_sync(fm.i1(), self.full, dsl.arith.ori(*growth), dsl.nvvm.VoteSyncKind.any)
        return self._probabilities(vals, maxima, m_old, grew)

    def _row_max(self, vals: list, row: int, m_old: list | None):
        """Row ``row``'s maximum over the tile (the quad's) and ``m_old``."""
        idx = [i for i in range(len(vals)) if (i % 4) >> 1 == row]
        tile_max = self._quad(dsl.arith.maximumf, self._tree(dsl.arith.maximumf, [vals[i] for i in idx]))
        return tile_max if m_old is None else dsl.arith.maximumf(m_old[row], tile_max)

    def _probabilities(self, vals: list, m_new: list | None, m_old: list | None, grew):
        """``_softmax`` with the tile's maxima chosen (``m_new``; None: each row's, taken here): the
        maxima, factors, P and the row sums."""
        maxima = []
        scale, neg_scale = self.g.arg.scale_log2e, self.neg_scale
        factors, sums = [], []
        probs = [None] * len(vals)
        for row in (0, 1):
            if self.row_scale is not None:  # per-token: the row's q scale times scale_log2e
                scale, neg_scale = self.row_scale[row], self.neg_row_scale[row]
            idx = [i for i in range(len(vals)) if (i % 4) >> 1 == row]
            m = self._row_max(vals, row, m_old) if m_new is None else m_new[row]
            maxima.append(m)
            m = self._finite(m)  # what the exponents subtract (varlen causal: 0 for a row without keys)
            if self.g.t.fp8:  # P scaled by 2^P_BIAS out of e4m3's subnormals (cancels in O / sum)
                nms = fm.fma(m, neg_scale, fm.constant(fp8.P_BIAS))
            else:
                nms = dsl.arith.mulf(m, neg_scale)
            if m_old is not None:  # 1 where the maximum was kept (exp2(0))
                factors.append(fm.exp2(dsl.arith.mulf(dsl.arith.subf(m_old[row], m), scale)))
            if self.g.exp2_f16x2:  # fp8: pairs of the row by the packed f16 polynomial
                fp8.exponentials(self, [vals[i] for i in idx], scale, nms, idx, probs)
            else:  # fp8 only (AttentionConfig): on the FMA pipe
                poly = emulated(len(idx), self.g.exp2_emulation)
                for n, i in enumerate(idx):
                    y = fm.fma(vals[i], scale, nms)
                    probs[i] = exp2_poly_fma(y) if n in poly else fm.exp2(y)
            # fp8 row sums on the tensor core: the P V wgmmas sum the rows (l starts from 0)
            sums.append(fm.constant(0.0) if self.row_sums else
                        self._tree(dsl.arith.addf, [fp8.as_f32(probs[i]) for i in idx]))
        return maxima, ((factors, grew) if m_old is not None else None), probs, sums

    def _finite(self, m):
        """A row maximum as the exponents subtract it: as is (every row of these kernels sees a key;
        ``hopper_varlen``'s rows may not, and subtract 0 instead of -inf)."""
        return m

    def _pack(self, probs: list) -> list:
        """P as RS fragments: per 16 keys, (row r, keys 2q..), (r + 8, 2q..), (r, 8 + 2q..), (r + 8, 8 + 2q..)
        (fp8: e4m3 fragments of 32 keys, ``hopper_fp8.pack``)."""
        if self.g.t.fp8:
            return fp8.pack(self, probs)
        frags = []
        for j in range(len(probs) // 8):
            words = []
            for h in range(4):
                pair = dsl.vector.from_elements(self.pair, [probs[8 * j + 2 * h], probs[8 * j + 2 * h + 1]])
                words.append(dsl.llvm.bitcast(self.i32, dsl.arith.truncf(self.pair16, pair)))
            frags.append(dsl.vector.from_elements(self.fragment, words))
        return frags

    def _rescale(self, o, factors: list):
        """O's rows (values 4i, 4i+1: row r; 4i+2, 4i+3: row r + 8) times their factors ("columns" row sums:
        the sum columns too)."""
        cur = o
        for i in range(self.o_values):
            scaled = dsl.arith.mulf(dsl.llvm.extractvalue(self.f32, o, [i]), factors[(i % 4) >> 1])
            cur = dsl.llvm.insertvalue(cur, scaled, [i])
        return cur


def _sgt(a, b) -> dsl.Value:
    """``a > b``, signed (an i1 Value); ``b`` may be an int."""
    a = dsl.Value(a)
    return dsl.Value(dsl.arith.cmpi(dsl.arith.CmpIPredicate.sgt, a.value, dsl.Value(b).value))
