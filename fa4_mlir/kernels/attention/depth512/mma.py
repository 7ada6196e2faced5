"""The depth-256/512 kernel's MMA warp (warp 8): one elected thread of the leader CTA issues every
tcgen05 MMA of the pair (cta_group 2, M = MMA_M split over the two CTAs); the peer's MMA warp does
nothing. Built through ``fa4_mlir.dsl`` (imported when called: this module imports without MLIR).

Schedule (S double-buffered across tiles, S_t in S_even for even t, S_odd for odd t)::

    S_0 = Q K_0'                       (nqk SS MMAs, each K slot released by a multicast commit)
    for t in 1 .. n-1:
        acquire S_t's buffer (both CTAs' softmax loaded S_{t-2}); S_t = Q K_t'; commit S_t
        PV(t-1)
    PV(n-1)
    PV(t): acquire PO_lo (softmax wrote P_t, correction rescaled O_lo); O_lo (+)= P_t V_lo (npv SS
           MMAs over BK1-key halves of P, each V slot released); commit O_mma_lo; d512: the same for
           O_hi on PO_hi / O_mma_hi.

Q@K'_{t+1} is issued before P_t@V_t so the tensor core works while softmax computes P_t. Every
commit is multicast (mask 0b11) so both CTAs' barriers see it. At the end the thread waits for the
softmax's release of the last S buffers: the peer's arrivals on this CTA's barriers must land
before the leader may exit.
"""

from __future__ import annotations

from fa4_mlir.kernels.attention.depth512.common import BLOCK, K_STEP_BYTES, raw

PAIR = 3  # multicast mask: both CTAs of the pair


def _release_slot(x, ring) -> None:
    from fa4_mlir import dsl

    dsl.fa4.mma_commit(x.kv_empty, ring.stage, multicast_mask=PAIR)
    ring.step()


def _qk(x, ring, buf: str) -> None:
    """S_buf = Q K' over the K depth sub-tiles (``Dims.chunks``) in the next slots."""
    from fa4_mlir import dsl
    from fa4_mlir.dsl import math as s

    d = x.d
    per_row = d.row_bytes // K_STEP_BYTES  # K steps in one swizzle row
    for q, ch in enumerate(d.chunks):  # MLA: the rope chunk is 64 deep, 4 k-steps (kind::f16 under fp8)
        ring.consumer_wait()
        slot = dsl.fa4.smem_stage(x.kv, ring.stage, bytes=d.kv_slot_bytes)
        for kk in range(ch.steps):
            blk, inner = divmod(kk, per_row)
            dsl.fa4.tcgen05_mma(x.s_tmem[buf], x.q[q], slot, s.const(s.i1(), bool(q or kk)), m=d.mma_m, n=d.bn,
                                ab_type=ch.elem, cta_group=2,
                                a_offset=blk * d.bm * d.row_bytes + inner * K_STEP_BYTES,
                                b_offset=blk * d.k_rows * d.row_bytes + inner * K_STEP_BYTES)
        _release_slot(x, ring)


def _pv(x, ring, o_states, accumulate) -> None:
    """O_half (+)= P V_half for each O half, over the next ``num_pv_stages`` slots per half; the first
    MMA into each half accumulates where ``accumulate`` (an i1: false for the first tile) holds."""
    from fa4_mlir import dsl
    from fa4_mlir.dsl import math as s

    d = x.d
    for half in d.halves:
        st = o_states[half]
        st.producer_acquire()
        for j in range(d.num_pv_stages):
            ring.consumer_wait()
            slot = dsl.fa4.smem_stage(x.kv, ring.stage, bytes=d.kv_slot_bytes)
            for kk in range(d.bk1 // d.mma_k):
                key = j * d.bk1 + kk * d.mma_k
                blk, inner = divmod(key, BLOCK)
                acc = accumulate if j == 0 and kk == 0 else s.const(s.i1(), True)
                dsl.fa4.tcgen05_mma(x.o_tmem[half], x.p, slot, raw(acc), m=d.mma_m, n=d.o_cols,
                                    ab_type=d.elem, cta_group=2, a_offset=blk * d.bm * d.row_bytes + inner * d.eb,
                                    b_offset=kk * d.mma_k * d.row_bytes, b_major="mn",
                                    b_block_stride=d.bk1 * d.row_bytes)
            _release_slot(x, ring)
        dsl.fa4.mma_commit(x.smem.declared.value(f"O_mma_{half}"), raw(0), multicast_mask=PAIR)
        st.step()


def _qk_commit(x, states, buf: str) -> None:
    from fa4_mlir import dsl

    dsl.fa4.mma_commit(x.smem.declared.value(f"S_{buf}_producer"), raw(0), multicast_mask=PAIR)
    states[buf].step()


def mma(k, x) -> None:
    from fa4_mlir import dsl

    d = x.d
    with k.role("mma", warps=[8], registers=x.registers["producers"]):
        elected = dsl.fa4.elect_one()
        with k.if_(dsl.andi(elected, x.leader)):  # the leader CTA issues for the pair
            ring = x.mbars.get_kv_mbars().consumer()
            s_states = {"even": x.mbars.producer_s_even(), "odd": x.mbars.producer_s_odd()}
            o_states = {"lo": x.mbars.producer_o_lo()}
            if d.split_o:
                o_states["hi"] = x.mbars.producer_o_hi()
            carry = [ring, *s_states.values(), *o_states.values()]
            s_states["even"].producer_acquire()
            _qk(x, ring, "even")
            _qk_commit(x, s_states, "even")
            with k.range(1, x.n_tiles, carry=carry) as t:
                odd = (t % 2) == 1
                with dsl.if_else(odd, carry=carry) as br:
                    for buf, arm in (("odd", br.then_), ("even", br.else_)):
                        with arm():
                            s_states[buf].producer_acquire()
                            _qk(x, ring, buf)
                            _qk_commit(x, s_states, buf)
                _pv(x, ring, o_states, t != 1)
            _pv(x, ring, o_states, x.n_tiles != 1)
            for buf in ("even", "odd"):  # the last softmax releases (peer arrivals on our barriers)
                s_states[buf].producer_acquire()
