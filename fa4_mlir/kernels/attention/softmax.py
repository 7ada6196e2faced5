"""The attention kernel's softmax warpgroups (online softmax, P into TMEM, the epilogue) and its
correction warpgroup (rescales O in TMEM when a row maximum grew), built through ``fa4_mlir.dsl``
(imported when a kernel is built: this module imports without MLIR)."""

from __future__ import annotations

from fa4_mlir.kernels.attention import split, varlen
from fa4_mlir.kernels.attention.dims import BLOCK, FP8_OUT_CHUNK, ROW_BYTES, WG, Dims
from fa4_mlir.kernels.attention.exp2 import emulated, exp2_poly

RESCALE_THRESHOLD = -8.0  # log2 units: a row maximum that grew by less keeps the stale one
# fp8 (spec 4.4, 4.8): adopt any larger maximum (threshold 0), so P = exp2(logit) <= 1 before the bias;
# the exp2 argument gets + FP8_P_BIAS (8 + threshold), P <= 2^8 = 256 < 448 (e4m3's largest finite)
# and P >= 2^-6 (e4m3's smallest normal) for every logit >= -14 instead of >= -6: the keys that
# carry the weight keep e4m3's 3 mantissa bits instead of falling into its subnormals (or to zero
# below 2^-9). The factor 2^8 is in both P @ V and the row sum and cancels in O / sum; the LSE subtracts it.
FP8_RESCALE_THRESHOLD = 0.0
FP8_P_BIAS = 8.0 + FP8_RESCALE_THRESHOLD


class Softmax:
    """Softmax warpgroup ``wg`` (``softmax``, with its epilogue) and the correction warpgroup, over
    the prologue's namespace ``x`` (``Producers.prologue``)."""

    def __init__(self, dims: Dims, kernel):
        from fa4_mlir import dsl
        from fa4_mlir._mlir import ir
        from fa4_mlir.dsl import math

        self.d, self.c, self.k, self.dsl, self.s = dims, dims.c, kernel, dsl, math
        f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
        elem = ir.BF16Type.get() if dims.elem in ("bf16", "e4m3") else ir.F16Type.get()  # fp8: of O
        # the types the roles use, made once
        self.t = dict(f32=f32, i32=i32, i1=ir.IntegerType.get_signless(1), elem=elem)
        if dims.fp8:
            self.t.update(i16=ir.IntegerType.get_signless(16), e4m3=ir.Float8E4M3FNType.get())
        self._vectors: dict = {}

    # -- helpers -------------------------------------------------------------------------------------
    def _vec(self, n: int, element):
        """vector<n x element>, made once per shape."""
        if (n, element) not in self._vectors:
            from fa4_mlir._mlir import ir

            self._vectors[n, element] = ir.VectorType.get([n], element)
        return self._vectors[n, element]

    def _f(self, value):
        return self.s.const(self.t["f32"], value)

    def _ex2(self, x):
        return self.s.intrinsic(self.s.EX2, self.t["f32"], x)

    def _vote_any(self, predicate):
        dsl = self.dsl
        return dsl.nvvm.vote_sync(self.t["i1"], dsl.Value(-1).value, predicate, dsl.nvvm.VoteSyncKind.any)

    def _masked(self, row, src, b: int):
        """``src`` with columns at or past the row's key limit set to -inf (only in tiles that reach
        the limit: the others skip the compare)."""
        dsl, W = self.dsl, self.d.batch
        out = dsl.Var(src)
        with self.k.if_(row.need, carry=[out]):
            iota = self.s.const(self._vec(W, self.t["i32"]), range(b * W, (b + 1) * W))
            keep = dsl.arith.cmpi(dsl.arith.CmpIPredicate.slt, iota, row.relv)
            out.value = dsl.arith.select(keep, src, self.s.const(self._vec(W, self.t["f32"]), float("-inf")))
        return out.value

    def _exp2(self, x, poly: bool):
        return exp2_poly(x) if poly else self._ex2(x)

    def _row(self, x, wg: int):
        """The thread's row: ``t`` (TMEM lane = row of the tile), ``pos`` (query position), ``head``,
        ``lim`` (first key the row may not see)."""
        import types

        dsl, c = self.dsl, self.c
        r = types.SimpleNamespace()
        r.pos0 = x.q1_start if c.num_q == 2 and wg == 1 else x.q_start
        r.tid = dsl.tid_x()
        r.t = r.tid % 128
        tp = r.t // c.fused_group
        th = r.t % c.fused_group
        r.pos = r.pos0 + tp
        r.head = x.head0 + th
        if c.serving:  # the sequence's keys, bottom-right causal
            r.lim = varlen.row_limit(x, c, r.pos)
            if c.split_kv:  # and the range's end, counted from its first key (the tiles' origin)
                r.lim = split.row_limit(x, r.lim)
        elif c.causal:
            pos1 = r.pos + 1
            r.lim = dsl.Value(dsl.arith.minsi(x.arg.seq_k.value, pos1.value))
        else:
            r.lim = x.arg.seq_k
        return r

    # -- softmax warpgroups --------------------------------------------------------------------------
    def softmax(self, x, wg: int) -> None:
        d, c, k, dsl, s = self.d, self.c, self.k, self.dsl, self.s
        a, V = dsl.arith, dsl.Value
        W = d.batch
        v, iv = self._vec(W, self.t["f32"]), self._vec(W, self.t["i32"])
        batches = range(d.bn // W)
        scale = x.arg.scale_log2e
        S = x.tmem.s(wg)
        tokens = c.token_scales
        threshold = FP8_RESCALE_THRESHOLD if d.fp8 else RESCALE_THRESHOLD
        with k.role(f"softmax{wg}", warps=[4 * wg + j for j in range(4)], registers=self.d.registers[0]):
            row = self._row(x, wg)
            if not tokens:
                scv = dsl.vector.broadcast(v, scale)
            ss, cs = x.mbars.consumer_s(wg), x.mbars.producer_c(wg)
            m, l, oph = dsl.Var(self._f(float("-inf"))), dsl.Var(self._f(0.0)), dsl.Var(V(1))
            with k.range(0, x.n_iter, carry=[m, l, ss, cs, oph]) as n:
                tile = n if c.num_q == 2 else n * 2 + wg
                key0 = tile * d.bn
                rel = row.lim - key0
                row.need = V(a.cmpi(a.CmpIPredicate.slt, rel.value, V(d.bn).value))
                row.relv = dsl.vector.broadcast(iv, rel.value)
                ss.consumer_wait()
                if tokens:  # the scales landed before the Q@K' that wrote S (on the K barrier)
                    scv = dsl.vector.broadcast(v, self._row_scale(x, wg, row))
                    kscale = self._k_scales(x, tile)
                running = m.value
                for b in batches:  # pass 1: the tile's row maximum
                    xb = a.bitcast(v, dsl.fa4.tmem_load(S, result_type=iv, column_offset=b * W))
                    if tokens:  # FMA path off: scores in log2 units before masking, the maximum of those
                        xb = a.mulf(a.mulf(xb, kscale(b)), scv)
                    xk = self._masked(row, xb, b)
                    xm = dsl.vector.reduction(self.t["f32"], dsl.vector.CombiningKind.MAXNUMF, xk)
                    running = a.maxnumf(running, xm)
                # lazy rescale: adopt the new maximum only when some row of the warp grew by > 8 (log2;
                # fp8: by > 0)
                ds = a.subf(m.value, running) if tokens else a.mulf(a.subf(m.value, running), scale)
                fresh = a.cmpf(a.CmpFPredicate.OEQ, m.value, self._f(float("-inf")))
                big = a.cmpf(a.CmpFPredicate.OLT, ds, self._f(threshold))
                any_ = self._vote_any(a.ori(fresh, big))
                mu = a.select(any_, running, m.value)
                ex = self._ex2(ds)
                cf0 = a.select(fresh, self._f(0.0), ex)
                cf = a.select(any_, cf0, self._f(1.0))
                cs.producer_acquire()
                slot = self.dsl.element_ptr(dsl.fa4.smem_address(x.corr[wg]), row.t, self.t["f32"])
                dsl.llvm.store(cf, slot)
                cs.producer_commit()
                cs.step()
                # logits in one FMA: s * scale_log2e - max * scale_log2e (a row that saw no key yet uses 0)
                mz = a.cmpf(a.CmpFPredicate.OEQ, mu, self._f(float("-inf")))
                me = a.select(mz, self._f(0.0), mu)
                if tokens:  # (s - max) + bias: exact near the maximum, whatever the logits' magnitude
                    nmv = dsl.vector.broadcast(v, me)
                    biasv = dsl.vector.broadcast(v, self._f(FP8_P_BIAS))
                elif d.fp8:  # the exp2 bias (FP8_P_BIAS) rides in the FMA's addend
                    nmv = dsl.vector.broadcast(v, a.subf(self._f(FP8_P_BIAS), a.mulf(me, scale)))
                else:
                    nmv = dsl.vector.broadcast(v, a.negf(a.mulf(me, scale)))
                total = None
                poly = emulated(W, c.exp2_emulation)
                last_of_stage = {d.p_stage(b * W): b for b in batches}
                for b in batches:  # pass 2: exponentials, P (16-bit pairs) over S's first columns, row sum
                    yb = a.bitcast(v, dsl.fa4.tmem_load(S, result_type=iv, column_offset=b * W))
                    if tokens:
                        yb = a.mulf(a.mulf(yb, kscale(b)), scv)
                    yk = self._masked(row, yb, b)
                    yl = a.addf(a.subf(yk, nmv), biasv) if tokens else s.fma(yk, scv, nmv)
                    ps = [self._exp2(dsl.vector.extract(yl, [], [j]), j in poly) for j in range(W)]
                    yv = dsl.vector.from_elements(v, ps)
                    if d.fp8:  # 4 e4m3 a column, the lower key in the lower byte
                        dsl.fa4.tmem_store(S, self._e4m3_words(ps), column_offset=b * W // 4)
                    else:
                        yt = a.truncf(self._vec(W, self.t["elem"]), yv)
                        yi = dsl.vector.bitcast(self._vec(W // 2, self.t["i32"]), yt)
                        dsl.fa4.tmem_store(S, yi, column_offset=b * W // 2)
                    ys = dsl.vector.reduction(self.t["f32"], dsl.vector.CombiningKind.ADD, yv)
                    total = ys if total is None else a.addf(total, ys)
                    stage = d.p_stage(b * W)
                    if last_of_stage[stage] == b:  # P stage written: the MMA may start its share of P@V
                        ss.consumer_release(sub_stage=stage)
                l.value = s.fma(l.value, cf, total)
                m.value = mu
                ss.step()
                oph.value = V(a.xori(oph.value.value, V(1).value))
            self._epilogue(x, wg, row, m.value, l.value, oph.value)

    # -- fp8 ---------------------------------------------------------------------------------------------
    def _e4m3_words(self, ps: list):
        """f32 values -> e4m3 (round to nearest, saturating), 4 to an i32, the first in the lowest
        byte (``cvt.rn.satfinite.e4m3x2.f32 d, a, b`` puts ``a`` in the upper byte)."""
        dsl, i16 = self.dsl, self.t["i16"]
        pairs = [dsl.nvvm.convert_f32x2_to_f8x2(i16, ps[j + 1], ps[j], self.t["e4m3"], rnd=dsl.nvvm.FPRoundingMode.RN,
                                                sat=dsl.nvvm.SaturationMode.SATFINITE)
                 for j in range(0, len(ps), 2)]
        packed = dsl.vector.from_elements(self._vec(len(pairs), i16), pairs)
        return dsl.vector.bitcast(self._vec(len(ps) // 4, self.t["i32"]), packed)

    def _row_scale(self, x, wg: int, row):
        """scale_log2e times the row's q_scale (per-token scales: the scores are multiplied by it, and
        by their key's scale, before masking and the maximum, so that the maximum and the logits are
        in log2 units and ``logit - max`` is exact near the maximum: an FMA ``s * scale - max * scale``
        would round ``max * scale``, up to the order of 1 for the logits that scales up to 1e3 make). The Q half's scales are (group heads, positions) in
        shared memory (the TMA box): row t = position t // g, head t % g sits at (t % g) * positions
        + t // g."""
        g = self.c.fused_group
        half = wg if self.c.num_q == 2 else 0
        at = row.t if g == 1 else (row.t % g) * self.c.positions + row.t // g
        ptr = self.dsl.element_ptr(self.dsl.fa4.smem_address(x.q_scale[half]), at, self.t["f32"])
        return self.dsl.arith.mulf(x.arg.scale_log2e, self.dsl.llvm.load(self.t["f32"], ptr))

    def _k_scales(self, x, tile):
        """A function of a batch: its columns' key scales (a vector from tile's k_scale buffer)."""
        dsl, d, W = self.dsl, self.d, self.d.batch
        buf = dsl.arith.remui(tile.value, dsl.Value(self.c.fa4.num_k_scale_bufs).value)
        base = dsl.fa4.smem_address(dsl.fa4.smem_stage(x.smem.k_scale_smem(), buf, bytes=d.bn * 4))
        v = self._vec(W, self.t["f32"])
        return lambda b: dsl.llvm.load(v, dsl.element_ptr(base, b * W, self.t["f32"]), alignment=16)

    # -- epilogue ------------------------------------------------------------------------------------
    def _epilogue(self, x, wg: int, row, m, l, oph) -> None:
        """Wait for the last P@V into O_wg, normalise the rows (1Q: merge O0 and O1 first), write the
        tile over the dead Q and TMA-store it (varlen: row by row where the tile ends past the sequence,
        ``varlen.Epilogue``, which also zeroes the rows that see no key of a paged kernel; split KV: each row's
        fp32 partial with ``st.global``, ``split.Partials``); the LSE row by row; then free TMEM."""
        d, c, k, dsl, s = self.d, self.c, self.k, self.dsl, self.s
        a, V, fa4 = dsl.arith, dsl.Value, dsl.fa4
        f32 = self.t["f32"]
        o_full = x.mbars.producer_o0() if wg == 0 else x.mbars.producer_o1()
        with varlen.trips(k, x, c):  # varlen: no tile, no P@V to wait for (O is not read: ``vl.output``)
            fa4.mbarrier_try_wait_parity(o_full, V(0).value, oph.value)
        vl = (split.Partials if c.split_kv else varlen.Epilogue)(self, x, row) if c.serving else None
        ms = m if c.token_scales else a.mulf(m, x.arg.scale_log2e)  # per-token: m is in log2 units already
        # fp8: O and the sums carry P's 2^FP8_P_BIAS; O is multiplied by V's scale
        numerator = x.arg.v_scale if d.fp8 else self._f(1.0)
        if c.num_q == 2:
            inv = a.divf(numerator, l)
            lsum = a.addf(ms, s.intrinsic(s.LG2, f32, l))
            factors = [(wg, inv)]
            if vl:
                vl.saw_keys(l)
        else:  # both warpgroups hold the same rows: swap (max, sum) through S's first columns
            other = 1 - wg
            i32 = self.t["i32"]
            mine = dsl.vector.from_elements(self._vec(2, i32), [a.bitcast(i32, ms), a.bitcast(i32, l)])
            fa4.tmem_store(x.tmem.s(wg), mine)
            fa4.named_barrier(sym_name="softmax", threads=256)
            pair = fa4.tmem_load(x.tmem.s(other), result_type=self._vec(2, i32))
            theirs = a.bitcast(self._vec(2, f32), pair)
            ml = {other: (dsl.vector.extract(theirs, [], [0]), dsl.vector.extract(theirs, [], [1]))}
            ml[wg] = (a.addf(ms, self._f(0.0)), a.addf(l, self._f(0.0)))
            gm = a.maxnumf(ml[0][0], ml[1][0])
            sc, ls = [], []
            for j in (0, 1):
                sc.append(self._ex2(a.subf(ml[j][0], gm)))
                ls.append(a.mulf(ml[j][1], sc[j]))
            total = a.addf(ls[0], ls[1])
            if vl:
                vl.saw_keys(total)
            inv = a.divf(numerator, total)
            factors = [(0, a.mulf(sc[0], inv)), (1, a.mulf(sc[1], inv))]
            lsum = a.addf(gm, s.intrinsic(s.LG2, f32, total))
        if d.fp8:
            lsum = a.subf(lsum, self._f(FP8_P_BIAS))
            self._store_chunks(x, wg, row, factors)
        blocks = () if d.fp8 else d.out_blocks(wg)
        if blocks and c.split_kv:  # fp32 partials, row by row (``split.Partials``)
            for _, blk, h, acc in self._o_vectors(x, blocks, factors, vl, wide=True):
                vl.store_o(blk * BLOCK + h * 32, acc)
        elif blocks and vl and c.varlen:  # TMA store where the tile lies inside the sequence, else row by row
            with dsl.if_else(vl.tile_inside(c.positions)) as branch:
                with branch.then_():
                    self._store_tile(x, wg, row, blocks, factors, vl)
                with branch.else_():
                    self._store_rows(x, blocks, factors, vl)
        elif blocks:  # paged with a dense Q: the dense store (clipped at seq_q), rows that see no key zeroed
            self._store_tile(x, wg, row, blocks, factors, vl)
        if (c.num_q == 2 or wg == 0) and vl:
            vl.store_lse(a.mulf(lsum, self._f(self.s.LN2)))
        elif c.num_q == 2 or wg == 0:
            lse = a.mulf(lsum, self._f(self.s.LN2))
            inq = a.cmpi(a.CmpIPredicate.slt, row.pos.value, x.arg.seq_q.value)
            with k.if_(V(a.andi(inq, (x.arg.write_lse != 0).value))):
                at = ((x.bz * x.arg.num_heads + row.head) * x.arg.seq_q) + row.pos
                dsl.llvm.store(lse, self.dsl.element_ptr(x.arg.lse, at, f32))
        # every TMEM access of the CTA is done once both warpgroups read their last O
        fa4.named_barrier(sym_name="softmax", threads=256)
        if wg == 0:  # warp 1 frees TMEM: the warp that allocated it (one warp must do both)
            with k.if_((row.tid // 32 == 1).named("sm0_owner")):
                fa4.tmem_dealloc(x.slot)

    def _o_vectors(self, x, blocks, factors, vl=None, wide: bool = False):
        """The normalised output, 32 columns at a time: (index in ``blocks``, block, half, 16-bit vector, or
        fp32 when ``wide``); 1Q sums both O halves' shares (``factors``). varlen: zeros for a row that saw no
        key."""
        dsl, s, a, fa4 = self.dsl, self.s, self.dsl.arith, self.dsl.fa4
        W = 32
        v, iv = self._vec(W, self.t["f32"]), self._vec(W, self.t["i32"])
        fv = [dsl.vector.broadcast(v, f) for _, f in factors]
        for rb, blk in enumerate(blocks):
            for h in (0, 1):
                if vl and blk * BLOCK + h * W >= self.c.head_dim:  # the padded block's columns past D (d96)
                    continue
                acc = None
                for j, (i, _) in enumerate(factors):
                    o = fa4.tmem_load(x.tmem.o(i), result_type=iv, column_offset=blk * BLOCK + h * W)
                    o = a.bitcast(v, o)
                    acc = a.mulf(o, fv[j]) if acc is None else s.fma(o, fv[j], acc)
                if vl:
                    acc = vl.output(acc)
                yield rb, blk, h, acc if wide else a.truncf(self._vec(W, self.t["elem"]), acc)

    def _store_tile(self, x, wg: int, row, blocks, factors, vl=None) -> None:
        """Write the output tile over the dead Q (128B-swizzled) and TMA-store it (varlen: at the
        sequence's packed rows, batch 0; ``vl.origin``)."""
        k, dsl, a, V, fa4 = self.k, self.dsl, self.dsl.arith, self.dsl.Value, self.dsl.fa4
        rowb = row.t * ROW_BYTES
        sw = a.andi(row.t.value, V(7).value)
        base = fa4.smem_address(x.o[wg])
        elem = self.t["elem"]
        for rb, _, h, narrow in self._o_vectors(x, blocks, factors, vl):
            for q in range(4):  # 16-byte chunks at their 128B-swizzled positions
                part = dsl.vector.extract_strided_slice(self._vec(8, elem), narrow, [8 * q], [8], [1])
                chunk = a.shli(a.xori(sw, V(h * 4 + q).value), V(4).value)
                at = (rowb + V(chunk)) + rb * WG * ROW_BYTES
                dsl.llvm.store(part, dsl.byte_offset(base, at), alignment=16)
        dsl.nvvm.fence_proxy(dsl.nvvm.ProxyKind.async_shared, space=dsl.nvvm.SharedSpace.shared_cta)
        fa4.named_barrier(sym_name=f"softmax{wg}", threads=128)
        first, b = vl.origin() if vl else (row.pos0, x.bz)
        with k.if_(row.t == 0):
            for rb, blk in enumerate(blocks):
                fa4.tma_store(x.arg.o, x.o[wg], [V(blk * BLOCK).value, x.head0.value, first.value, b.value],
                              bytes=WG * ROW_BYTES, src_offset=rb * WG * ROW_BYTES)
            fa4.tma_store_wait(pending=0)

    def _store_rows(self, x, blocks, factors, vl) -> None:
        """varlen, a tile that ends past the sequence: each thread stores its own row (``vl.store_row``)."""
        for _, blk, h, narrow in self._o_vectors(x, blocks, factors, vl):
            vl.store_row(narrow, blk * BLOCK + h * 32)

    def _store_chunks(self, x, wg: int, row, factors) -> None:
        """fp8: the bf16 output tile is twice the bytes of the fp8 Q it is written over, so it goes out
        in 32-column chunks (128 rows x 64 bytes, 64B-swizzled: the size of one fp8 Q block) through
        the warpgroup's chunk buffers (``Dims.chunk_plan``): write, TMA-store, and before a buffer is
        written again wait until its last store has read it."""
        d, k, dsl, s = self.d, self.k, self.dsl, self.s
        a, V, fa4 = dsl.arith, dsl.Value, dsl.fa4
        f32, W, elem = self.t["f32"], FP8_OUT_CHUNK, self.t["elem"]
        v, iv = self._vec(W, f32), self._vec(W, self.t["i32"])
        chunks, offsets = d.chunk_plan(wg)
        if not chunks:
            return
        rowb = row.t * (2 * W)
        sw = a.andi(a.shrui(row.t.value, V(1).value), V(3).value)  # 64B swizzle: chunk ^ (row / 2) % 4
        fv = [dsl.vector.broadcast(v, f) for _, f in factors]
        lead = row.t == 0
        for n, col in enumerate(chunks):
            buf = x.o[wg][n % len(offsets)]
            if n >= len(offsets):  # the buffer's previous store must have read it
                with k.if_(lead):
                    fa4.tma_store_wait(pending=len(offsets) - 1)
                fa4.named_barrier(sym_name=f"softmax{wg}", threads=128)
            base = fa4.smem_address(buf)
            acc = None
            for j, (i, _) in enumerate(factors):
                o = a.bitcast(v, fa4.tmem_load(x.tmem.o(i), result_type=iv, column_offset=col * W))
                acc = a.mulf(o, fv[j]) if acc is None else s.fma(o, fv[j], acc)
            narrow = a.truncf(self._vec(W, elem), acc)
            for q in range(4):  # 16-byte pieces at their 64B-swizzled positions
                part = dsl.vector.extract_strided_slice(self._vec(8, elem), narrow, [8 * q], [8], [1])
                at = rowb + V(a.shli(a.xori(sw, V(q).value), V(4).value))
                dsl.llvm.store(part, dsl.byte_offset(base, at), alignment=16)
            dsl.nvvm.fence_proxy(dsl.nvvm.ProxyKind.async_shared, space=dsl.nvvm.SharedSpace.shared_cta)
            fa4.named_barrier(sym_name=f"softmax{wg}", threads=128)
            with k.if_(lead):
                fa4.tma_store(x.arg.o, buf, [V(col * W).value, x.head0.value, row.pos0.value, x.bz.value],
                              bytes=WG * 2 * W)
        with k.if_(lead):
            fa4.tma_store_wait(pending=0)

    # -- correction warpgroup ------------------------------------------------------------------------
    def correction(self, x) -> None:
        """Per tile after the first and per O_i: read the softmax's factor, wait for the P@V that
        last wrote O_i, rescale O_i in TMEM only when some row of the warp needs it, and release
        S_i's first P stage (the 'O rescaled' half of its 256 arrivals)."""
        d, k, dsl, s = self.d, self.k, self.dsl, self.s
        a, V, fa4 = dsl.arith, dsl.Value, dsl.fa4
        v, iv = self._vec(32, self.t["f32"]), self._vec(32, self.t["i32"])
        with k.role("correction", warps=[8, 9, 10, 11], registers=self.d.registers[1]), varlen.trips(k, x, self.c):
            t = dsl.tid_x() % 128
            zero = V(0).value  # made before the loop: the stage and barrier index of every release below
            states = []
            for i in (0, 1):  # tile 0: O_i is written fresh; consume the factor, release at once
                st = x.mbars.consumer_c0() if i == 0 else x.mbars.consumer_c1()
                st.consumer_wait()
                st.consumer_release()
                st.step()
                fa4.pipeline_consumer_release(x.mbars.pipeline(f"s{i}").value, zero, sub_stage=0)
                states.append(st)
            phases = [dsl.Var(V(0)), dsl.Var(V(0))]
            with k.range(1, x.n_iter, carry=[states[0], phases[0], states[1], phases[1]]):
                for i in (0, 1):
                    st, ph = states[i], phases[i]
                    st.consumer_wait()
                    slot = self.dsl.element_ptr(fa4.smem_address(x.corr[i]), t, self.t["f32"])
                    factor = dsl.llvm.load(self.t["f32"], slot)
                    st.consumer_release()
                    st.step()
                    o_full = x.mbars.producer_o0() if i == 0 else x.mbars.producer_o1()
                    fa4.mbarrier_try_wait_parity(o_full, zero, ph.value.value)
                    ph.value = V(a.xori(ph.value.value, V(1).value))
                    rescale = self._vote_any(a.cmpf(a.CmpFPredicate.OLT, factor, self._f(1.0)))
                    with k.if_(V(rescale)):
                        fv = dsl.vector.broadcast(v, factor)
                        for b in range(d.depth // 32):
                            o = a.bitcast(v, fa4.tmem_load(x.tmem.o(i), result_type=iv, column_offset=b * 32))
                            fa4.tmem_store(x.tmem.o(i), a.bitcast(iv, a.mulf(o, fv)), column_offset=b * 32)
                    fa4.pipeline_consumer_release(x.mbars.pipeline(f"s{i}").value, zero, sub_stage=0)
