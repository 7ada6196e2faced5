"""The sm_100a load warp over a paged K/V cache whose pages TMA does not load (``AttentionConfig.page_gather``:
every page size but the powers of two from 16, and pages of 16 with num_q 1 at head dim 64, whose 12 TMA chunks a
tile spilled): the whole warp gathers each K/V tile row by row with ``cp.async`` into exactly the shared layout the
TMA path writes (``gather_rows``: rows, block-table entries, layout, 32-bit offsets, head dim 96's zero fill,
completion), so the MMA warp's descriptors are the TMA-paged kernel's. K and V are pointers with their strides
(``abi``: ``gather``).

The load role runs on all 32 lanes. The elected lane loads Q by TMA first: Q0 on its own barriers (``Q0_sync``, one
per Q@K' depth sub-stage: K_0's full barriers count the gathering lanes, so Q0 cannot ride on their transaction
bytes as in the TMA-paged kernel; the MMA warp waits on them before its first Q0@K', as on ``Q1_sync`` before the
first Q1@K'), then Q1 (num_q 2). Then the loop gathers one K/V tile a trip, K_t with V_t (num_q 1: the MMA warp
takes K_even, K_odd, V_even, V_odd; it gets K_odd after V_even). The loop runs over tiles, not over the MMA warp's
iterations (num_q 1: two tiles each): one tile's code fits the warp's 64 registers.

A tile: its block-table entries, read once for K and V (``paged.Pages``' sharing); the K stage (each depth
sub-stage, ``Dims.nqk``: its own buffer and barrier, ``Producers._k_buffers``) and the V stage acquired (fused ring:
the next two slots); every row's K and V pieces copied from one computation of its page and offset (the K copies
and then the V copies of the same rows spilled at num_q 1: LLVM shares the rows' offsets between them); one
``cp.async`` group. Two tiles are in flight, as in ``hopper_gather``: once tile t's copies are issued the lanes wait
for tile t - 1's group (``wait_group 1``), fence the async proxy and arrive on its K sub-stages' and V stage's full
barriers (the last tile's after the loop, ``wait_group 0``). Acquiring tile t's stages before tile t - 1 arrived
does not deadlock: the MMA warp released them after consuming tiles before t - 1 (rings of 3 to 5 K/V stages), and
the protocol verifier proves it per config. Tile t's first key is t * bn, after the range's first key with
split KV (``x.kv_begin``); keys are clamped to the CTA's last (``x.kv_end`` - 1: the sequence's, its rows' causal
limit's or its split range's; >= 0, as the role runs only with a trip count > 0). A packed Q (``varlen``) changes
only Q's rows: K/V are addressed by the sequence's pages.
"""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir.dsl.values import raw
from fa4_mlir.kernels.attention.gather_rows import RowGather


def load(p, x) -> None:
    """The load role over a gathered paged cache, inside its trip-count branch; ``p`` the kernel's ``Producers``."""
    d, c, k = p.d, p.c, p.k
    with k.elect_one():
        p.load_q_half(x, 0, x.mbars.q0_wait_mbar())
        if c.num_q == 2:
            p.load_q_half(x, 1, x.mbars.q1_wait_mbar())
    ks, vs = p._states(x, "producer", "ld")
    # keys clamp to the CTA's last (its key end: the sequence's, the causal limit of its rows, or its split range's)
    limit = x.kv_begin + x.kv_end if c.split_kv else x.kv_end
    rows = RowGather(k, x.arg, page=c.page_size, bn=d.bn, row=d.row_bytes, head_dim=c.head_dim, blocks=d.blocks,
                     seq=x.bz, kvh=x.kvh, limit=limit)
    kpipe, vpipe = x.mbars.k_pipeline().value, x.mbars.v_pipeline().value
    tiles = x.n_iter if c.num_q == 2 else x.n_iter * 2  # num_q 1: two K/V tiles an MMA iteration

    def issue(t):
        """Tile t's copies, one cp.async group; returns its (K stage, V stage)."""
        first = t * d.bn
        first = x.kv_begin + first if c.split_kv else first
        entries = rows.entries(first)
        k_stage, k_target = _acquire_k(p, x, ks, "ldg")
        v_stage, v_target = _acquire_v(p, x, vs)
        rows.copy(entries, first, [k_target, v_target])
        rows.commit()
        return k_stage, v_stage

    def arrive(k_stage, v_stage, pending: int) -> None:
        """Once all but ``pending`` groups landed: the fence and the arrivals on a tile's full barriers."""
        rows.landed(pending)
        for q in range(d.nqk):
            dsl.fa4.pipeline_producer_commit(kpipe, raw(k_stage), sub_stage=q)
        dsl.fa4.pipeline_producer_commit(vpipe, raw(v_stage))

    held = [dsl.Var(stage) for stage in issue(dsl.Value(0))]  # tile t - 1's stages, in flight
    with k.range(1, tiles, carry=[*p._carry(ks, vs), *held]) as t:  # K_t and V_t (see the module's docstring)
        stages = issue(t)
        arrive(held[0].value, held[1].value, 1)
        for var, stage in zip(held, stages):
            var.value = stage
    arrive(held[0].value, held[1].value, 0)


def _acquire_k(p, x, state, tag: str):
    """Acquire the K ring's next stage (each depth sub-stage) and step past it: (the stage, its copy target)."""
    d = p.d
    stage = state.stage
    buffers = p._k_buffers(x, tag, stage)
    for q in range(d.nqk):
        state.producer_acquire(sub_stage=q)
    state.step()
    # the sub-stages' buffers follow each other (stage * nqk + q): their blocks are offsets from the first's
    blocks = [(q * d.sub_blocks + b, q * d.k_chunk + b * d.bn * d.row_bytes)
              for q in range(d.nqk) for b in range(d.sub_blocks)]
    return stage, ("k", dsl.fa4.smem_address(buffers[0][1]), blocks)


def _acquire_v(p, x, state):
    """Acquire the V ring's next stage (the fused ring's, after its K tile's) and step past it: (the stage, its
    copy target)."""
    d = p.d
    state.producer_acquire()
    stage = state.stage
    buf = dsl.fa4.smem_stage(x.smem.v_smem_base(), stage, bytes=d.kv_stage)
    state.step()
    return stage, ("v", dsl.fa4.smem_address(buf), [(b, b * d.bn * d.row_bytes) for b in range(d.blocks)])
