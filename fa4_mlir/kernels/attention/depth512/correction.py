"""The depth-256/512 kernel's correction warpgroup (warps 4-7): rescales O in TMEM when the softmax
adopted a new row maximum. Built through ``fa4_mlir.dsl`` (imported when called: this module
imports without MLIR).

Prologue: one "O rescaled" arrival per O half (PO_lo, PO_hi) for the first tile, whose P@V writes O
fresh. Then per tile t >= 1: wait for the softmax's factor (C pipeline), read it (thread t serves
TMEM lane t, row t % BM), release it; per O half: wait for P_{t-1} @ V into the half (O_mma_lo/hi),
multiply this lane's O columns by the factor when some row of the warp needs it (warp vote), and
arrive on PO_lo / PO_hi (the leader's barriers): the MMA may accumulate P_t @ V.
"""

from __future__ import annotations

from fa4_mlir.kernels.attention.depth512.common import WG
from fa4_mlir.kernels.attention.depth512.softmax import W, Helpers


def correction(k, x) -> None:
    from fa4_mlir import dsl

    d = x.d
    h = Helpers()
    a, fa4 = dsl.arith, dsl.fa4
    with k.role("correction", warps=[4, 5, 6, 7], registers=x.registers["correction"]):
        t = dsl.tid_x() % WG
        m = t % d.bm
        cc = x.mbars.consumer_c()
        states = {"lo": x.mbars.consumer_o_lo()}
        if d.split_o:
            states["hi"] = x.mbars.consumer_o_hi()
        for st in states.values():  # tile 0's P@V writes O fresh: nothing to rescale
            st.consumer_release()
        with k.range(1, x.n_tiles, carry=[cc, *states.values()]):
            cc.consumer_wait()
            slot = dsl.element_ptr(fa4.smem_address(x.smem.correction_smem()), m, h.f32)
            factor = dsl.llvm.load(h.f32, slot)
            cc.consumer_release()
            cc.step()
            rescale = dsl.Value(h.vote_any(a.cmpf(a.CmpFPredicate.OLT, factor, h.f(1.0))))
            fv = dsl.vector.broadcast(h.vec(W, h.f32), factor)
            for half, st in states.items():
                st.consumer_wait()
                with k.if_(rescale):
                    for b in range(d.o_tmem_cols // W):
                        o = h.load_f32(x.o_tmem[half], b * W)
                        fa4.tmem_store(x.o_tmem[half], a.bitcast(h.vec(W, h.i32), a.mulf(o, fv)), column_offset=b * W)
                st.consumer_release()
                st.step()
