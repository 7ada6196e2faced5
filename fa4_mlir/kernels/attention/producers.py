"""The attention kernel's prologue and its two single-thread roles, the TMA load warp and the MMA warp,
built through ``fa4_mlir.dsl`` (imported when a kernel is built: this module imports without MLIR).

The prologue declares the reference structs (``SM100AttentionSMem`` with its ``FA4MiscMBars``, the
TMEM map), allocates TMEM, creates the rings and initialises the barriers, then names the views the
roles share and the CTA's tile. Pipeline states are ``PipelineState`` objects carried through the
loops; the first iteration of each role is peeled (Q rides on the first K tile, the MMA's first P@V
does not accumulate). A gathered paged cache (``AttentionConfig.page_gather``) has its own load role
(``gather``: Q0 on ``Q0_sync``, which the MMA warp waits before its first Q0@K').
"""

from __future__ import annotations

import types

from fa4_mlir.kernels.attention import paged, split, varlen
from fa4_mlir.kernels.attention.dims import BLOCK, K_STEP_BYTES, ROW_BYTES, WG, Dims


class Producers:
    """Prologue (regions, barriers, TMEM, pipelines, the CTA's tile), load warp and MMA warp."""

    def __init__(self, dims: Dims, kernel):
        from fa4_mlir import dsl
        from fa4_mlir.dsl import math

        self.d, self.c, self.k, self.dsl, self.s = dims, dims.c, kernel, dsl, math

    # -- prologue ------------------------------------------------------------------------------------
    def prologue(self, arg) -> types.SimpleNamespace:
        """Declare everything the roles share; returns it as a namespace (``x.mbars``, ``x.n_iter``...)."""
        from fa4_mlir.dsl.structs.attention import FA4Tmem, SM100AttentionSMem

        dsl, d = self.dsl, self.d
        # varlen / paged: the CTA's sequence first; a CTA past its rows exits before TMEM or a barrier
        seq = varlen.sequence(self.k, arg, self.c) if self.c.serving else None
        smem = SM100AttentionSMem(self.c)  # q, o over q, kv | k + v, correction, the barriers, tmem_addr
        mbars = smem.misc_mbars()
        tmem = FA4Tmem(self.c)
        warp = dsl.tid_x() // 32
        with self.k.if_((warp == 1).named("alloc_warp")):  # warp 1 allocates; softmax warp 1 frees
            dsl.fa4.tmem_alloc(smem.tmem_addr_ptr())
        mbars.declare_pipelines()
        mbars.init()
        x = types.SimpleNamespace(arg=arg, smem=smem, mbars=mbars, tmem=tmem, slot=smem.tmem_addr_ptr(), seq=seq)
        # MLA prefill names its maps as the sm_90a prefill kernel does (q_nope, q_rope, k_nope, k_rope, v)
        x.q_map, x.k_map = (arg.q_nope, arg.k_nope) if d.mla else (arg.q, arg.k)
        self._views(x)
        self._tile(x)
        return x

    def _views(self, x) -> None:
        """Named views: each Q half's depth sub-stages (the MMA reads one while TMA may still fill the
        next), each softmax warpgroup's output tile over the dead Q and its correction slots."""
        d, c, fa4 = self.d, self.c, self.dsl.fa4
        q, o, corr = x.smem.q_smem(), x.smem.o_smem(), x.smem.correction_smem()
        if c.token_scales:  # each Q half's 128 row scales (1Q: one half, both warpgroups read it)
            x.q_scale = [fa4.smem_alias(x.smem.q_scale_smem(), sym_name=f"q_scale{half}", bytes=WG * 4,
                                        offset=half * WG * 4) for half in range(c.num_q)]
        x.q = [[fa4.smem_alias(q, sym_name=f"q{half}_{s}", bytes=d.q_chunk, offset=d.q_offset(half, s))
                for s in range(d.nqk)] for half in range(c.num_q)]
        if d.mla:  # each Q half's rope block (spec 2.1: region q_rope after q)
            qr, rope = x.smem.q_rope_smem(), WG * d.rope * d.rope_dsz
            x.q_rope = [fa4.smem_alias(qr, sym_name=f"q_rope{half}", bytes=rope, offset=half * rope)
                        for half in range(c.num_q)]
        x.corr, x.o = [], []
        for wg in (0, 1):
            x.corr.append(fa4.smem_alias(corr, sym_name=f"corr{wg}", bytes=WG * 4, offset=wg * WG * 4))
            x.o.append(None)
            if d.fp8:  # the bf16 output goes out in chunks through buffers over the fp8 Q (chunk_plan)
                _, offsets = d.chunk_plan(wg)
                x.o[wg] = [fa4.smem_alias(o, sym_name=f"o{wg}_{i}", bytes=WG * BLOCK, offset=off)
                           for i, off in enumerate(offsets)]
                continue
            blocks = d.out_blocks(wg)
            if blocks:
                off = wg * d.o_half if c.num_q == 2 else blocks.start * WG * ROW_BYTES
                x.o[wg] = fa4.smem_alias(o, sym_name=f"o{wg}", bytes=len(blocks) * WG * ROW_BYTES, offset=off)

    def _tile(self, x) -> None:
        """The CTA's tile: ``q_start`` (first query position), ``n_iter`` (loop trips of every role:
        K/V tiles in 2Q, pairs of them in 1Q), ``kvh`` / ``head0`` (K/V head, first query head);
        ``q_row`` / ``q1_row`` / ``b`` the Q halves' TMA row and batch coordinates (varlen: packed rows,
        batch 0; paged: ``b`` is the dense Q's batch and K/V are addressed by page, ``paged``); split KV: the
        key range (``split``: ``x.split``, ``x.kv_begin``, ``x.range_end``), whose keys the tiles count from."""
        dsl, c, d, arg = self.dsl, self.c, self.d, x.arg
        V, arith = dsl.Value, dsl.arith
        qt, hy, x.bz = dsl.ctaid("x"), dsl.ctaid("y"), dsl.ctaid("z")
        if c.split_kv:  # grid x enumerates query tiles x key ranges, split-minor
            qt = split.query_tile(x)
        if c.varlen:  # the compacted schedule's tile and head group; its sequence is the paged table's row
            x.q_start, hy, x.bz = x.seq.q_start, x.seq.hy, x.seq.b
        else:
            x.q_start = qt * c.cta_positions
        x.q1_start = x.q_start + c.positions
        x.q_row, x.q1_row, x.b = x.q_start, x.q1_start, x.bz
        if c.varlen:
            x.q_row, x.q1_row, x.b = x.seq.q0 + x.q_start, x.seq.q0 + x.q1_start, 0
        if c.serving:  # the sequence's keys, bottom-right causal
            kv_end = varlen.key_end(x, c)
            if c.split_kv:  # the CTA's key range: its tiles count from kv_begin
                kv_end = split.span(x, kv_end)
        elif c.causal:  # tiles past the CTA's last row are skipped by every role alike
            q_end = x.q_start + c.cta_positions
            kv_end = V(arith.minsi(arg.seq_k.value, q_end.value))
        else:
            kv_end = arg.seq_k
        x.kv_end = kv_end  # the CTA's key end (split KV: from kv_begin); the gathered load warp clamps to it
        tiles = V(arith.divsi((kv_end + (d.bn - 1)).value, V(d.bn).value))
        if c.num_q == 2:
            x.n_iter = tiles
        else:
            x.n_iter = V(arith.divsi((tiles + 1).value, V(2).value))
        x.n_iter.named("n_iter")
        if c.fused_group > 1:
            x.kvh, x.head0 = hy, hy * c.group
        else:
            x.kvh, x.head0 = V(arith.divsi(hy.value, V(c.group).value)), hy

    # -- shared by both roles ------------------------------------------------------------------------
    def _k_buffers(self, x, tag: str, stage) -> list:
        """The K depth sub-stages of ``stage``: (barrier / buffer index stage * nqk + q, its buffer)."""
        d = self.d
        m = self.dsl.Value(stage) * d.nqk
        out = []
        for q in range(d.nqk):
            i = (m + q).named(f"{tag}_i{q}")
            out.append((i, self.dsl.fa4.smem_stage(x.smem.k_smem_base(), i.value, bytes=d.k_chunk)))
        return out

    def _named_step(self, state, name: str | None) -> None:
        """``state.step()``, naming the new state in the printed IR in the peeled first iteration: with
        the initial states' names (``ld_ki``), what test/python/protocol_mutants.py recognises as the
        load warp's first pass over fresh rings (its acquires pass at once: equivalent mutants)."""
        state.step()
        if name:
            self.dsl.Value(state.stage).named(name)

    # -- load warp -----------------------------------------------------------------------------------
    def _key(self, x, tile):
        """The TMA row of K/V tile ``tile``'s first key (varlen: after the sequence's packed offset)."""
        key = tile * self.d.bn
        return x.seq.k0 + key if self.c.varlen else key

    def _load_k(self, x, tag: str, state, tile, with_q: bool, peel: bool, pages=None) -> None:
        """K tile ``tile`` into the K ring's next stage (its depth sub-stages), with Q0 the first time;
        paged: chunk by chunk from ``pages`` (``paged.Pages.tile``)."""
        d, fa4 = self.d, self.dsl.fa4
        full = x.mbars.get_k_mbars()[0]
        key = None if pages else self._key(x, tile)
        buffers = self._k_buffers(x, tag, state.stage)
        rb = d.row_bytes
        scales = self.c.token_scales
        for q, (i, buf) in enumerate(buffers):
            state.producer_acquire(sub_stage=q)
            extra = (d.q_tx if with_q else 0) + (self._scale_bytes(with_q) if scales and q == 0 else 0)
            state.producer_commit(tx_bytes=d.k_tx + extra, sub_stage=q)
            for blk in range(d.sub_blocks - (d.rope // BLOCK)):
                col = q * d.bk0 + blk * BLOCK
                if with_q:  # Q rides on the first K tile's barriers (the reference's Q0 + K0 load)
                    fa4.tma_load(x.q_map, x.q[0][q], full, i.value, _coords(col, x.head0, x.q_row, x.b),
                                 bytes=WG * rb, dst_offset=blk * WG * rb)
                if pages:
                    continue
                fa4.tma_load(x.k_map, buf, full, i.value, _coords(col, x.kvh, key, x.b),
                             bytes=d.bn * rb, dst_offset=blk * d.bn * rb)
            if pages:  # paged: chunk-major over the blocks
                blocks = [(q * d.bk0 + blk * BLOCK, blk * d.bn * rb) for blk in range(d.sub_blocks)]
                paged.load_chunks(d, fa4, x.k_map, buf, full, i.value, blocks, x.kvh, pages)
            if d.mla:  # the rope block: Q0's into q_rope, K's into its rope buffer or after K_nope
                if with_q:
                    self._load_q_rope(x, 0, full, i, x.q_start)
                rbuf, off = self._k_rope(x, buf, tile)
                for blk in range(d.rope_blocks):
                    fa4.tma_load(x.arg.k_rope, rbuf, full, i.value, _coords(blk * d.rope_block_cols, x.kvh, key, x.bz),
                                 bytes=d.bn * rb, dst_offset=off + blk * d.bn * rb)
            if scales and q == 0:  # the tile's key scales (and the first time Q0's) on the same barrier
                if with_q:
                    self._load_q_scale(x, 0, full, i)
                ks = fa4.smem_stage(x.smem.k_scale_smem(), self._k_scale_buffer(tile), bytes=d.bn * 4)
                fa4.tma_load(x.arg.k_scale, ks, full, i.value, _coords(key, x.kvh, x.bz), bytes=d.bn * 4)
        self._named_step(state, f"{tag}_n" if peel else None)

    def _load_q_rope(self, x, half: int, barriers, index, start) -> None:
        """Q half ``half``'s rope block (rows from position ``start``), one TMA box per swizzle block."""
        d = self.d
        for blk in range(d.rope_blocks):
            self.dsl.fa4.tma_load(x.arg.q_rope, x.q_rope[half], barriers, _raw(index),
                                  _coords(blk * d.rope_block_cols, x.head0, start, x.bz), bytes=WG * d.row_bytes,
                                  dst_offset=blk * WG * d.row_bytes)

    def _k_rope(self, x, kbuf, tile):
        """MLA: (buffer, byte offset) of K tile ``tile``'s rope block: rope buffer tile mod ceil(nkv / 2)
        in a fused ring (the reference's, spec 2.1), else the K stage ``kbuf`` after K_nope. A rope
        buffer is loaded again with the K tile ``rope_bufs`` later, whose ring slot the MMA warp released
        after MMAs issued past this tile's Q@K' (a commit covers every earlier MMA of the thread)."""
        d, V = self.d, self.dsl.Value
        if not d.rope_bufs:
            return kbuf, d.blocks * d.bn * d.row_bytes
        idx = V(self.dsl.arith.remui(V(tile).value, V(d.rope_bufs).value)).value
        return self.dsl.fa4.smem_stage(x.smem.rope_smem_base(), idx, bytes=d.rope_chunk), 0

    # -- per-token scales (fp8) ------------------------------------------------------------------------
    def _scale_bytes(self, with_q: bool) -> int:
        """Bytes of per-token scales that land on a K tile's first barrier: its BN key scales, and the
        first time also Q0's 128 row scales."""
        return self.d.bn * 4 + (WG * 4 if with_q else 0)

    def _k_scale_buffer(self, tile):
        """The k_scale buffer of K/V tile ``tile``: tile mod num_k_scale_bufs (the reference's ring).
        A buffer is loaded again only after the K (or fused K/V) stage it rides with was acquired, and
        the MMA warp releases a K stage only after the P@V of its tile, which waited for the softmax
        warpgroups to finish the tile (its scale reads included): then no more tiles are loaded and
        unfinished than there are buffers. The protocol verifier proves it per config (released after
        the Q@K' MMAs instead, as without scales, it finds the race on the buffer)."""
        V = self.dsl.Value
        return V(self.dsl.arith.remui(V(tile).value, V(self.c.fa4.num_k_scale_bufs).value)).value

    def _load_q_scale(self, x, half: int, barriers, index) -> None:
        """Q half ``half``'s row scales: box (positions, group heads), one fp32 per tile row."""
        fa4 = self.dsl.fa4
        start = x.q_start if half == 0 else x.q1_start
        fa4.tma_load(x.arg.q_scale, x.q_scale[half], barriers, _raw(index), _coords(start, x.head0, x.bz),
                     bytes=WG * 4)

    def _load_q1(self, x) -> None:
        self.load_q_half(x, 1, x.mbars.q1_wait_mbar())

    def load_q_half(self, x, half: int, sync) -> None:
        """Q half ``half`` on its own barriers ``sync`` (one per depth sub-stage, expect_tx each): Q1's
        ``Q1_sync``; a gathered paged cache's Q0 on ``Q0_sync`` (``gather``)."""
        d, fa4 = self.d, self.dsl.fa4
        scales = self.c.token_scales
        rb = d.row_bytes
        row, start = (x.q_row, x.q_start) if half == 0 else (x.q1_row, x.q1_start)
        for q in range(d.nqk):
            fa4.mbarrier_arrive_expect_tx(sync, _raw(q), tx_bytes=d.q_tx + (WG * 4 if scales and q == 0 else 0))
            for blk in range(d.sub_blocks - (d.rope // BLOCK)):
                box = _coords(q * d.bk0 + blk * BLOCK, x.head0, row, x.b)
                fa4.tma_load(x.q_map, x.q[half][q], sync, _raw(q), box, bytes=WG * rb,
                             dst_offset=blk * WG * rb)
            if d.mla:
                self._load_q_rope(x, half, sync, q, start)
            if scales and q == 0:
                self._load_q_scale(x, half, sync, q)

    def _load_v(self, x, tag: str, state, tile, peel: bool, pages=None) -> None:
        """V tile ``tile`` into the V ring's next stage (paged: from ``pages``, as ``_load_k``)."""
        d, fa4 = self.d, self.dsl.fa4
        full = x.mbars.get_v_mbars()[0]
        key = None if pages else self._key(x, tile)
        state.producer_acquire()
        state.producer_commit(tx_bytes=d.kv_stage)
        buf = fa4.smem_stage(x.smem.v_smem_base(), state.stage, bytes=d.kv_stage)
        rb = d.row_bytes
        if pages:
            blocks = [(blk * BLOCK, blk * d.bn * rb) for blk in range(d.blocks)]
            paged.load_chunks(d, fa4, x.arg.v, buf, full, state.stage, blocks, x.kvh, pages)
        else:
            for blk in range(d.blocks):
                fa4.tma_load(x.arg.v, buf, full, state.stage, _coords(blk * BLOCK, x.kvh, key, x.b),
                             bytes=d.bn * rb, dst_offset=blk * d.bn * rb)
        self._named_step(state, f"{tag}_n" if peel else None)

    def _states(self, x, side: str, prefix: str) -> list:
        """The K ring's state and the V ring's (the same object when K and V share one ring)."""
        ks = getattr(x.mbars.k_pipeline(), side)()
        self.dsl.Value(ks.stage).named(f"{prefix}_ki")
        if self.d.fused:
            return [ks, ks]
        vs = getattr(x.mbars.v_pipeline(), side)()
        self.dsl.Value(vs.stage).named(f"{prefix}_vi")
        return [ks, vs]

    def load(self, x) -> None:
        """The TMA warp: Q with the first K tile (Q1 on its own barriers in 2Q), then per iteration
        the K and V tiles in the order the MMA warp consumes them (paged: the iteration's block-table
        entries first, shared by its K and V tiles)."""
        k, V = self.k, self.dsl.Value
        if self.c.page_gather:  # Q by the elected lane's TMA, K/V gathered by the whole warp
            from fa4_mlir.kernels.attention import gather

            with k.role("load", warps=[13], registers=self.d.registers[2]), varlen.trips(k, x, self.c):
                gather.load(self, x)
            return
        with k.role("load", warps=[13], registers=self.d.registers[2]), k.elect_one(), \
                varlen.trips(k, x, self.c):
            ks, vs = self._states(x, "producer", "ld")
            table = paged.Pages(k, x, self.c, self.d.bn) if self.c.page_size else None

            def iteration(n, first: bool, tag: str) -> None:
                if self.c.num_q == 2:
                    pages = table.tile(n) if table else None
                    self._load_k(x, f"{tag}k", ks, n, with_q=first, peel=first, pages=pages)
                    if first:
                        self._load_q1(x)
                    self._load_v(x, f"{tag}v", vs, n, peel=first, pages=pages)
                    return
                even = n * 2
                odd = even + 1
                pe, po = (table.tile(even), table.tile(odd)) if table else (None, None)
                self._load_k(x, f"{tag}ke", ks, even, with_q=first, peel=first, pages=pe)
                self._load_k(x, f"{tag}ko", ks, odd, with_q=False, peel=first, pages=po)
                self._load_v(x, f"{tag}ve", vs, even, peel=first, pages=pe)
                self._load_v(x, f"{tag}vo", vs, odd, peel=first, pages=po)

            iteration(V(0), True, "ld0")
            with k.range(1, x.n_iter, carry=self._carry(ks, vs)) as n:
                iteration(n, False, "ldl")

    def _carry(self, *states) -> list:
        """The loop-carried states, each once (fused K/V: the K and V states are one object)."""
        out = []
        for s in states:
            if all(s is not o for o in out):
                out.append(s)
        return out

    # -- MMA warp ------------------------------------------------------------------------------------
    def _qk(self, x, half: int, q_half: int, kb, q: int, tile=None) -> None:
        """S_half (+)= Q_{q_half} sub-stage q x K sub-stage q (buffer ``kb``); MLA: then the rope blocks,
        q_rope x K tile ``tile``'s rope (``_k_rope``; fp8: kind::f16 MMAs of the 16-bit rope into S)."""
        d = self.d
        nope = (d.bk0 - d.rope) * d.dsz // K_STEP_BYTES
        steps = [(kk, x.q[q_half][q], 0, kb, 0, d.elem) for kk in range(nope)]
        if d.mla:
            rbuf, roff = self._k_rope(x, kb, tile)
            steps += [(kk, x.q_rope[q_half], 0, rbuf, roff, d.rope_elem)
                      for kk in range(d.rope * d.rope_dsz // K_STEP_BYTES)]
        for n, (kk, a, a_base, b, b_base, elem) in enumerate(steps):
            self._mma_step(x.tmem.s(half), a, a_base, b, b_base, kk, bool(q or n), elem)

    def _mma_step(self, acc, a, a_base: int, b, b_base: int, kk: int, accumulate: bool, elem: str) -> None:
        """One K-major SS MMA: K step ``kk`` (32 bytes of a row) of operands whose rows are swizzle blocks
        of the config's width, 128 A rows and BN B rows a block."""
        d, s, rb = self.d, self.s, self.d.row_bytes
        blk, inner = divmod(kk, rb // K_STEP_BYTES)
        self.dsl.fa4.tcgen05_mma(acc, a, b, s.const(s.i1(), accumulate), m=128, n=d.bn, ab_type=elem,
                                 a_offset=a_base + blk * WG * rb + inner * K_STEP_BYTES,
                                 b_offset=b_base + blk * d.bn * rb + inner * K_STEP_BYTES)

    def _pv(self, x, half: int, vb, first_acc, s_state) -> None:
        """O_half (+)= P_half x V in the two P stages; stage j waits until softmax wrote P stage j
        (stage 0 also: correction rescaled O_half) and covers its share of the BN keys."""
        d, s = self.d, self.s
        steps, rb = d.bn // d.mma_k, d.row_bytes
        for j, (lo, hi) in enumerate(((0, d.pv_split), (d.pv_split, steps))):
            s_state.producer_acquire(sub_stage=j)
            for kk in range(lo, hi):  # P in TMEM: 32 bytes of a row (8 columns) per K step, any P type
                acc = first_acc if kk == 0 else s.const(s.i1(), True)
                self.dsl.fa4.tcgen05_mma(x.tmem.o(half), x.tmem.s(half), vb, acc, m=128, n=d.depth, ab_type=d.elem,
                                         a_offset=kk * K_STEP_BYTES, b_offset=kk * d.mma_k * rb, b_major="mn",
                                         b_block_stride=d.bn * rb)
        o_full = x.mbars.producer_o0() if half == 0 else x.mbars.producer_o1()
        self.dsl.fa4.mma_commit(o_full, _raw(0))

    def _wait_k(self, x, tag: str, ks) -> list:
        buffers = self._k_buffers(x, tag, ks.stage)
        for q in range(self.d.nqk):
            ks.consumer_wait(sub_stage=q)
        return [buf for _, buf in buffers]

    def _release_k(self, ks) -> None:
        for q in range(self.d.nqk):
            ks.consumer_release(sub_stage=q)
        ks.step()

    def _wait_v(self, x, vs):
        vs.consumer_wait()
        return self.dsl.fa4.smem_stage(x.smem.v_smem_base(), vs.stage, bytes=self.d.kv_stage)

    def mma(self, x) -> None:
        """One elected thread: S0 <- Q0 Kn', O1 += P1 V(n-1), S1 <- Q1 Kn', O0 += P0 Vn (2Q; in 1Q
        S0/O0 take the even tiles and S1/O1 the odd ones of one Q). S_i is overwritten only by a
        Q@K' issued after the P_i@V that read it: MMAs of one thread run in order. With per-token
        scales a K stage is released with its tile's V stage, after the P@V that waited for the
        softmax of the tile (which reads the tile's k_scale buffer, loaded with K: its reuse is then
        ordered after those reads); otherwise after the Q@K' MMAs that read it."""
        k, d, s, fa4 = self.k, self.d, self.s, self.dsl.fa4
        two_q = self.c.num_q == 2
        late_k = self.c.token_scales
        vpipe, kpipe = x.mbars.v_pipeline().value, x.mbars.k_pipeline().value
        with k.role("mma", warps=[12], registers=self.d.registers[2]), k.elect_one(), \
                varlen.trips(k, x, self.c):
            ks, vs = self._states(x, "consumer", "mm")
            s0, s1 = x.mbars.producer_s0(), x.mbars.producer_s1()

            def release_k(held) -> None:
                for q in range(d.nqk):
                    fa4.pipeline_consumer_release(kpipe, held, sub_stage=q)

            def done_k():
                """Release the K stage now, or (per-token scales) return it to release later."""
                if not late_k:
                    self._release_k(ks)
                    return None
                held = ks.stage
                ks.step()
                return held

            def iteration(first: bool, tag: str, vprev=None, o1_acc=None, vp_b=None, kprev=None, n=None):
                """One iteration's MMAs; ``vprev`` is the held V stage of the previous one (O1's),
                ``kprev`` its held K stage (per-token scales); ``n`` the iteration (MLA: rope buffers)."""
                tile = (n if two_q else n * 2) if d.mla else None
                kb = self._wait_k(x, f"{tag}ka", ks)
                for q in range(d.nqk):
                    if first and self.c.page_gather:  # gathered K/V: Q0 on its own barriers, as Q1
                        fa4.mbarrier_try_wait_parity(x.mbars.q0_wait_mbar(), _raw(q), _raw(0))
                    self._qk(x, 0, 0, kb[q], q, tile)
                s0.producer_commit()
                s0.step()
                if not first:
                    self._pv(x, 1, vp_b, o1_acc, s1)
                    fa4.pipeline_consumer_release(vpipe, vprev)
                    if late_k:
                        release_k(kprev)
                if two_q:
                    for q in range(d.nqk):
                        if first:
                            fa4.mbarrier_try_wait_parity(x.mbars.q1_wait_mbar(), _raw(q), _raw(0))
                        self._qk(x, 1, 1, kb[q], q, tile)
                    k_o1 = k_o0 = done_k()
                else:
                    k_o0 = done_k()
                    kb2 = self._wait_k(x, f"{tag}kb", ks)
                    for q in range(d.nqk):
                        self._qk(x, 1, 0, kb2[q], q, None if tile is None else tile + 1)
                    k_o1 = done_k()
                s1.producer_commit()
                s1.step()
                vb = self._wait_v(x, vs)
                self._pv(x, 0, vb, s.const(s.i1(), not first), s0)
                held = vs.stage
                vs.step()
                if not two_q:  # V_even is done; V_odd is held for O1 in the next iteration
                    fa4.pipeline_consumer_release(vpipe, held)
                    if late_k:
                        release_k(k_o0)
                    self._wait_v(x, vs)
                    held = vs.stage
                    vs.step()
                return held, k_o1

            v0, k0 = iteration(True, "mm0", n=self.dsl.Value(0) if d.mla else None)
            vp = self.dsl.Var(v0)
            kp = self.dsl.Var(k0) if late_k else None
            acc = self.dsl.Var(s.const(s.i1(), False))
            with k.range(1, x.n_iter, carry=[*self._carry(ks, vs), s0, s1, vp, acc, *([kp] if late_k else [])]) as n:
                vp_b = fa4.smem_stage(x.smem.v_smem_base(), vp.value.value, bytes=d.kv_stage)
                vn, kn = iteration(False, "mml", vp.value.value, acc.value.value, vp_b,
                                   kp.value.value if late_k else None, n)
                vp.value = vn
                if late_k:
                    kp.value = kn
                acc.value = s.const(s.i1(), True)
            vp_b = fa4.smem_stage(x.smem.v_smem_base(), vp.value.value, bytes=d.kv_stage)
            self._pv(x, 1, vp_b, acc.value.value, s1)
            fa4.pipeline_consumer_release(vpipe, vp.value.value)
            if late_k:
                release_k(kp.value.value)


def _raw(x):
    """The ``ir.Value`` of an index (a ``Value``, or an int as an i32 constant made here)."""
    from fa4_mlir.dsl.values import raw

    return raw(x)


def _coords(*xs) -> list:
    """TMA box coordinates (innermost first): ints become i32 constants, in argument order."""
    return [_raw(x) for x in xs]
