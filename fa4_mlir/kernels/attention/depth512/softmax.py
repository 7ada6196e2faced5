"""The depth-256/512 kernel's softmax warpgroup (warps 0-3, one per CTA of the pair), built through
``fa4_mlir.dsl`` (imported when called: this module imports without MLIR).

Thread ``t`` reads TMEM lane ``t``. d256 (BM 128): lane t is row t, all BN score columns. d512
(BM 64, the pair layout of an M = 128 accumulator): lanes t and t + 64 hold the two column halves
of row t % 64, so the row maximum and sum are combined across the thread pair through
``correction_smem`` and two named barriers (``exchange``). Per tile t (S_t in S_even / S_odd):

1. wait S_t, load this thread's score columns, mask keys at or past the row's limit (end of the
   sequence, causal diagonal), take the row maximum; release S_t at once (the MMA may overwrite it
   with S_{t+2});
2. lazy rescale as in FA4: adopt the new maximum only if some row of the warp grew by more than 8
   (log2 units; fp8: 2), giving the O correction factor (1 otherwise);
3. wait for P_{t-1} @ V (the O_mma barrier of the last O half): P has one buffer in shared memory;
4. P = exp2(s * scale_log2e - m * scale_log2e), written as 16-bit values into the 128B-swizzled
   k-major P tile (fp8: exp2(... + 6) as e4m3 into the 64B-swizzled tile, ``_p_words``),
   ``fence.proxy.async``, arrive on PO_lo (the leader's, count 512);
5. hand the correction factor to the correction warpgroup (C pipeline), update the row sum.

At the end: wait for the last P@V, normalise O by 1 / sum (fp8: v_scale / sum, bf16), write it over the
dead Q tile (Q's last reader, the last Q@K', finished before the last P@V; fp8 in column chunks,
``_o_chunk_blocks``), TMA-store it, write the LSE, free TMEM.
"""

from __future__ import annotations

import types

from fa4_mlir.kernels.attention.depth512.common import BLOCK, ROW_BYTES, WG, raw

RESCALE_THRESHOLD = -8.0  # log2 units (16-bit inputs; fp8: Depth512Config.rescale_threshold, -2)
W = 32  # columns per TMEM load
E4M3X4 = ("{\n.reg .b16 lo, hi;\ncvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;\n"
          "cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3;\nmov.b32 $0, {lo, hi};\n}")  # 4 floats -> 4 e4m3, x0 in byte 0


class Helpers:
    """Types and small builders the softmax and correction warpgroups share."""

    def __init__(self):
        from fa4_mlir import dsl
        from fa4_mlir._mlir import ir
        from fa4_mlir.dsl import math

        self.dsl, self.s, self.ir = dsl, math, ir
        self.f32, self.i32, self.i1 = ir.F32Type.get(), ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(1)
        self._vectors = {}

    def vec(self, n: int, element):
        if (n, element) not in self._vectors:
            self._vectors[n, element] = self.ir.VectorType.get([n], element)
        return self._vectors[n, element]

    def f(self, value):
        return self.s.const(self.f32, value)

    def ex2(self, v):
        return self.s.intrinsic(self.s.EX2, self.f32, v)

    def vote_any(self, predicate):
        dsl = self.dsl
        return dsl.nvvm.vote_sync(self.i1, dsl.Value(-1).value, predicate, dsl.nvvm.VoteSyncKind.any)

    def load_f32(self, tmem, column: int, n: int = W):
        a = self.dsl.arith
        return a.bitcast(self.vec(n, self.f32), self.dsl.fa4.tmem_load(tmem, result_type=self.vec(n, self.i32),
                                                                         column_offset=column))


def _row(x, h: Helpers) -> types.SimpleNamespace:
    """This thread's row: ``t`` (TMEM lane), ``m`` (row of the CTA's tile), ``half`` (d512: which
    column half of the row), ``mpos`` / ``pos`` (its position in the CTA's tile / the sequence),
    ``lim`` (first key the row may not see)."""
    dsl, d, c = h.dsl, x.d, x.c
    r = types.SimpleNamespace()
    r.tid = dsl.tid_x()
    r.t = r.tid % WG
    if d.split_o:
        r.m, r.half = r.t % d.bm, r.t // d.bm
    else:
        r.m, r.half = r.t, None
    r.mpos = r.m // d.g  # the row's position within the CTA's tile
    r.pos = x.q_start + r.mpos
    if c.causal:
        r.lim = dsl.Value(dsl.arith.minsi(x.arg.seq_k.value, (r.pos + 1).value))
    else:
        r.lim = x.arg.seq_k
    r.col0 = r.half * d.s_cols if d.split_o else None  # first key column of this thread in a tile
    return r


def _exchange(x, h: Helpers, r, value, combine):
    """d512: ``combine(value, partner's value)`` with the partner thread t ^ 64 (the other half of the
    row) through the correction slots of this CTA (free here: the factor is written later) and two
    128-thread named barriers (the upper thread writes, the lower combines and writes the result back,
    the upper reads it; the last barrier orders that read before the slot's next write). The caller
    holds the C pipeline (no factor is in flight in the slots) or is in the first tile."""
    dsl = h.dsl
    fa4 = dsl.fa4
    base = fa4.smem_address(x.smem.correction_smem())
    # the slots hold BM floats; a thread pair uses slot m: the upper thread writes, the lower reads
    # and writes the combined value back, the upper reads it
    slot = dsl.element_ptr(base, r.m, h.f32)
    upper = r.half == 1
    with x.k.if_(upper):
        dsl.llvm.store(value, slot)
    fa4.named_barrier(sym_name="exchange_a", threads=WG)
    out = dsl.Var(value)
    with x.k.if_(r.half == 0, carry=[out]):
        other = dsl.llvm.load(h.f32, slot)
        out.value = combine(value, other)
        dsl.llvm.store(out.value, slot)
    fa4.named_barrier(sym_name="exchange_c", threads=WG)
    res = dsl.Var(out.value)
    with x.k.if_(upper, carry=[res]):
        res.value = dsl.llvm.load(h.f32, slot)
    fa4.named_barrier(sym_name="exchange_d", threads=WG)
    return res.value


def _tile(x, h: Helpers, r, st, t, buf: str, first: bool) -> None:
    """One K/V tile of the online softmax (see the module doc); ``st`` holds the carried states."""
    dsl, s, d = h.dsl, h.s, x.d
    a, V, fa4 = dsl.arith, dsl.Value, dsl.fa4
    v, iv = h.vec(W, h.f32), h.vec(W, h.i32)
    scale = x.arg.scale_log2e
    key0 = t * d.bn
    rel = r.lim - key0 if r.col0 is None else r.lim - key0 - r.col0  # first masked column of the thread
    need = V(a.cmpi(a.CmpIPredicate.slt, rel.value, V(d.s_cols).value))
    relv = dsl.vector.broadcast(iv, rel.value)
    ss = st.s[buf]
    ss.consumer_wait()
    xs, running = [], st.m.value
    for b in range(d.s_cols // W):
        xb = h.load_f32(x.s_tmem[buf], b * W)
        out = dsl.Var(xb)
        with x.k.if_(need, carry=[out]):
            iota = s.const(iv, range(b * W, (b + 1) * W))
            keep = a.cmpi(a.CmpIPredicate.slt, iota, relv)
            out.value = a.select(keep, xb, s.const(v, float("-inf")))
        xs.append(out.value)
        running = a.maxnumf(running, dsl.vector.reduction(h.f32, dsl.vector.CombiningKind.MAXNUMF, out.value))
    ss.consumer_release()  # S is in registers: the MMA may write S_{t+2} here
    ss.step()
    if not first:  # the correction warpgroup read the last factor: its slots are free
        st.c.producer_acquire()
    if d.split_o:
        running = _exchange(x, h, r, running, a.maxnumf)
    # lazy rescale: adopt the new maximum only when some row of the warp grew by > 8 (log2; fp8: 2)
    ds = a.mulf(a.subf(st.m.value, running), scale)
    fresh = a.cmpf(a.CmpFPredicate.OEQ, st.m.value, h.f(float("-inf")))
    big = a.cmpf(a.CmpFPredicate.OLT, ds, h.f(d.f.rescale_threshold))
    any_ = h.vote_any(a.ori(fresh, big))
    mu = a.select(any_, running, st.m.value)
    cf = a.select(any_, a.select(fresh, h.f(0.0), h.ex2(ds)), h.f(1.0))
    if not first:  # P has one buffer: P_{t-1} @ V must be done before P_t overwrites it
        fa4.mbarrier_try_wait_parity(x.o_mma_last, V(0).value, st.oph.value.value)
        st.oph.value = V(a.xori(st.oph.value.value, V(1).value))
    mz = a.cmpf(a.CmpFPredicate.OEQ, mu, h.f(float("-inf")))
    nm = a.mulf(a.select(mz, h.f(0.0), mu), scale)
    # fp8: P = exp2(x + p_bias), the bias folded into the exp2 argument (spec 4.8; see _p_words)
    nmv = dsl.vector.broadcast(v, a.subf(h.f(d.f.p_bias), nm) if d.fp8 else a.negf(nm))
    scv = dsl.vector.broadcast(v, scale)
    base = fa4.smem_address(x.p)
    # the swizzle's 16-byte chunk XOR: row bits [0, 3) for 128B rows, [1, 3) for fp8's 64B rows
    sw = a.andi(dsl.shrui(r.m, V(1)).value, V(3).value) if d.fp8 else a.andi(r.m.value, V(7).value)
    rowb = r.m * d.row_bytes
    if r.col0 is not None:  # d512: the upper thread's columns start BN / 2 keys into P
        rowb = rowb + r.half * (d.s_cols // BLOCK * d.bm * d.row_bytes)
    total = None
    elem = h.ir.BF16Type.get() if d.elem == "bf16" else h.ir.F16Type.get()
    for b, xb in enumerate(xs):
        yl = s.fma(xb, scv, nmv)
        es = [h.ex2(dsl.vector.extract(yl, [], [j])) for j in range(W)]
        yv = dsl.vector.from_elements(v, es)
        ys = dsl.vector.reduction(h.f32, dsl.vector.CombiningKind.ADD, yv)
        total = ys if total is None else a.addf(total, ys)
        parts = _p_words(h, es) if d.fp8 else None
        narrow = None if d.fp8 else a.truncf(h.vec(W, elem), yv)
        blk, hb = divmod(b * W, BLOCK)
        for q in range(W * d.eb // 16):  # 16-byte chunks at their swizzled positions in the k-major P tile
            part = parts[q] if d.fp8 else dsl.vector.extract_strided_slice(h.vec(8, elem), narrow, [8 * q], [8], [1])
            chunk = a.shli(a.xori(sw, V(hb * d.eb // 16 + q).value), V(4).value)
            at = (rowb + V(chunk)) + blk * d.bm * d.row_bytes
            dsl.llvm.store(part, dsl.byte_offset(base, at), alignment=16)
    dsl.nvvm.fence_proxy(dsl.nvvm.ProxyKind.async_shared, space=dsl.nvvm.SharedSpace.shared_cta)
    fa4.mbarrier_arrive(x.mbars.po_lo_mbar(), raw(0))  # P_t written (the leader's barrier)
    if d.split_o:
        total = _exchange(x, h, r, total, a.addf)
    if first:
        st.l.value = total
    else:
        slot = dsl.element_ptr(fa4.smem_address(x.smem.correction_smem()), r.m, h.f32)
        if d.split_o:
            with x.k.if_(r.half == 0):
                dsl.llvm.store(cf, slot)
        else:
            dsl.llvm.store(cf, slot)
        st.c.producer_commit()
        st.c.step()
        st.l.value = s.fma(st.l.value, cf, total)
    st.m.value = mu


def _p_words(h: Helpers, es: list) -> list:
    """fp8: 32 probabilities as e4m3, two 16-byte vectors (``cvt.rn.satfinite.e4m3x2.f32``). Safe: the
    stale maximum is at most 2 (log2) below the true one (the fp8 rescale threshold -2), so a biased P is
    at most 2^(2 + 6) = 256 < 448, e4m3's largest finite value (no saturation); the bias of 6 keeps P
    normal (>= 2^-6) down to 2^-12 of the row maximum instead of 2^-6 below it, and it cancels in
    O / row sum (the sum is of the same biased floats) and is subtracted from the LSE."""
    dsl = h.dsl
    words = [dsl.llvm.inline_asm(h.i32, es[4 * i:4 * i + 4], E4M3X4, "=r,f,f,f,f") for i in range(W // 4)]
    return [dsl.vector.from_elements(h.vec(4, h.i32), words[4 * q:4 * q + 4]) for q in range(W // 16)]


def softmax(k, x) -> None:
    from fa4_mlir import dsl

    d = x.d
    h = Helpers()
    with k.role("softmax", warps=[0, 1, 2, 3], registers=x.registers["softmax"]):
        r = _row(x, h)
        last = d.halves[-1]
        x.o_mma_last = x.smem.declared.value(f"O_mma_{last}")
        st = types.SimpleNamespace(s={"even": x.mbars.consumer_s_even(), "odd": x.mbars.consumer_s_odd()},
                                   c=x.mbars.producer_c(), m=dsl.Var(h.f(float("-inf"))), l=dsl.Var(h.f(0.0)),
                                   oph=dsl.Var(dsl.Value(0)))
        _tile(x, h, r, st, dsl.Value(0), "even", first=True)
        carry = [st.s["even"], st.s["odd"], st.c, st.m, st.l, st.oph]
        with k.range(1, x.n_tiles, carry=carry) as t:
            with dsl.if_else((t % 2) == 1, carry=carry) as br:
                for buf, arm in (("odd", br.then_), ("even", br.else_)):
                    with arm():
                        _tile(x, h, r, st, t, buf, first=False)
        _epilogue(x, h, r, st)


def _o_chunk_blocks(x) -> int:
    """O blocks (BLOCK columns, 16-bit) stored per round through the dead Q region: all of them for
    16-bit inputs; fp8 Q holds half of bf16 O, so whole O halves per round with split_o (a thread's
    columns of a half are then in one round), else as many blocks as fit."""
    d = x.d
    blocks = d.ov // BLOCK
    fit = d.f.q_bytes // (d.bm * ROW_BYTES)
    if fit >= blocks:
        return blocks
    per_half = d.o_cols // BLOCK
    return fit - fit % per_half if d.split_o else fit


def _epilogue(x, h: Helpers, r, st) -> None:
    """Normalise O, store it and the LSE, free TMEM (see the module doc)."""
    dsl, s, d, k = h.dsl, h.s, x.d, x.k
    a, V, fa4 = dsl.arith, dsl.Value, dsl.fa4
    for half in d.halves:  # the last P@V into each half (its commit may be the only one not waited)
        fa4.mbarrier_try_wait_parity(x.smem.declared.value(f"O_mma_{half}"), V(0).value, st.oph.value.value)
    scale = x.arg.scale_log2e
    inv = a.divf(h.f(1.0), st.l.value)
    lsum = a.addf(a.mulf(st.m.value, scale), s.intrinsic(s.LG2, h.f32, st.l.value))
    if d.fp8:  # O * v_scale / sum (bf16); the P bias is in the sum (see _p_words)
        inv, lsum = a.mulf(inv, x.arg.v_scale), a.subf(lsum, h.f(d.f.p_bias))
    elem = h.ir.F16Type.get() if d.elem == "f16" else h.ir.BF16Type.get()  # fp8: bf16 O
    fv = dsl.vector.broadcast(h.vec(W, h.f32), inv)
    base = fa4.smem_address(x.o)
    sw = a.andi(r.m.value, V(7).value)
    rowb = r.m * ROW_BYTES  # O is 16-bit: 128B swizzle rows of BLOCK columns
    per_thread = d.o_tmem_cols  # O columns of each half this thread holds
    blocks, per_chunk = d.ov // BLOCK, _o_chunk_blocks(x)
    for ci in range(-(-blocks // per_chunk)):  # fp8: bf16 O is twice fp8 Q's bytes, so column chunks
        if ci:  # thread 0 waited for the last chunk's TMA store to read the region: overwrite it
            fa4.named_barrier(sym_name="o_chunk", threads=WG)
        for hi, half in enumerate(d.halves):
            for b in range(per_thread // W):
                col = hi * d.o_cols + b * W  # output column (d512: plus half * per_thread, below)
                if col // (per_chunk * BLOCK) != ci:
                    continue
                o = a.mulf(h.load_f32(x.o_tmem[half], b * W), fv)
                narrow = a.truncf(h.vec(W, elem), o)
                blk, hb = divmod(col, BLOCK)
                off = rowb + (blk - ci * per_chunk) * d.bm * ROW_BYTES
                if d.split_o:
                    off = off + r.half * (per_thread // BLOCK * d.bm * ROW_BYTES)
                for q in range(4):
                    part = dsl.vector.extract_strided_slice(h.vec(8, elem), narrow, [8 * q], [8], [1])
                    chunk = a.shli(a.xori(sw, V(hb // 8 + q).value), V(4).value)
                    dsl.llvm.store(part, dsl.byte_offset(base, off + V(chunk)), alignment=16)
        dsl.nvvm.fence_proxy(dsl.nvvm.ProxyKind.async_shared, space=dsl.nvvm.SharedSpace.shared_cta)
        fa4.named_barrier(sym_name="softmax", threads=WG)  # O written and every TMEM read of the CTA done
        with k.if_(r.t == 0):
            for blk in range(ci * per_chunk, min(blocks, (ci + 1) * per_chunk)):
                fa4.tma_store(x.arg.o, x.o, [V(blk * BLOCK).value, x.head0.value, x.q_start.value, x.bz.value],
                              bytes=d.bm * ROW_BYTES, src_offset=(blk - ci * per_chunk) * d.bm * ROW_BYTES)
            fa4.tma_store_wait(pending=0)
    lse = a.mulf(lsum, h.f(s.LN2))
    # the row's position and LSE index as a CTA-uniform base plus this thread's offset: a per-thread
    # ``q_start + m`` here would keep a vector-register copy of q_start live across the whole softmax
    # loop (ptxas spilled it in the causal d512 unfused-GQA kernels); the uniform parts stay uniform
    ok = a.cmpi(a.CmpIPredicate.slt, r.mpos.value, (x.arg.seq_q - x.q_start).value)
    ok = a.andi(ok, (x.arg.write_lse != 0).value)
    if d.split_o:
        ok = a.andi(ok, (r.half == 0).value)
    with k.if_(V(ok)):
        ubase = ((x.bz * x.arg.num_heads + x.head0) * x.arg.seq_q) + x.q_start
        at = ubase + r.mpos if d.g == 1 else ubase + ((r.m % d.g) * x.arg.seq_q + r.mpos)
        dsl.llvm.store(lse, dsl.element_ptr(x.arg.lse, at, h.f32))
    with k.if_((r.tid // 32 == 1).named("tmem_owner")):  # the warp that allocated TMEM frees it
        fa4.tmem_dealloc(x.slot, cta_group=2)
