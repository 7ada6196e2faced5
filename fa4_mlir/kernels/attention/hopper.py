"""The attention forward for sm_90a: FA3's structure as an fa4 program.

One CTA of 12 warps owns 128 query rows of one head (64 at head dim 512, below; ``AttentionConfig.hopper``;
``num_q = 3``, head dim 64: 16 warps, three consumer warpgroups of 160 registers on 192 rows, the load warp 12
at 32, the MMA turns going round the three):

* warps 0-3 / 4-7, consumer warpgroups 0 and 1 (240 registers), 64 rows each. Per K/V tile ``j``
  a warpgroup issues ``S = Q K_j'`` (SS wgmma into registers) and ``O += P_{j-1} V_{j-1}`` (RS
  wgmma: P is the previous tile's probabilities, still in the registers where softmax left them),
  then, while the P@V runs, takes S's row maximum (a quad shuffle), the rescale factor and
  ``P = exp2(S * scale_log2e - max * scale_log2e)`` (one FMA and ``ex2.approx`` per element),
  waits for the P@V, rescales O and packs P to 16 bits (FA3's intra-warpgroup overlap);
* the two warpgroups take turns issuing their MMAs (FA3's ping-pong): warpgroup w waits at named
  barrier ``sched{w}`` before issuing and arrives at the other's after, so one warpgroup's softmax
  runs under the other's MMAs;
* warp 8, TMA load (one elected thread, 24 registers with the idle warps 9-11): Q once, then K_0,
  and per tile K_{j+1} ahead of V_j, through two-stage K and V rings whose consumer barriers count
  the 8 consumer warps (lane 0 of each, once its wgmma group retired).

Keys at or past a row's limit (``seq_k``; causal: the row's own position + 1, FA's top-left diagonal) are
masked to -inf, only in tiles that reach the limit. Causal CTAs stop at their last row's tile, and take the
tiles longest first across the heads of sections (``section_order``). The epilogue divides by the row
sum, writes O as 16-bit pairs over the warpgroup's dead Q rows (128B swizzle) and TMA-stores them (the store
clips rows past ``seq_q``); the LSE is written per row when asked. GQA: the CTA of head ``h`` reads K/V head
``h / group``, the group a launch argument (the i32 ``group`` parameter; one kernel for every group,
``AttentionConfig.runtime_group``): a CTA holds one head whatever the group, so only that division depends on
it.

Head dims 96 and 192: 192 is three 64-column blocks (112 keys a tile: the most that fit); 96 is computed
as 128 (``HopperTile.head_dim`` is the padded dim), TMA zero-filling Q's and K's and V's columns past
96 and clipping O's store there (a third of the MMA work is on zeros, the price of one tile shape).

Head dim 512 (``HopperTile.split_o``): O of 64 rows x 512 columns in fp32 is 256 registers a thread of a
warpgroup, past the 255 a thread can address (and the 240 of the budget). So both consumer warpgroups
own the SAME 64 rows (the CTA tile is 64 rows): each computes the whole S = Q K_j' (512 deep) and the
same softmax, and accumulates O += P V_j over its half of V's columns (warpgroup w: columns [256 w, 256
w + 256), one m64n256 RS wgmma per 16 keys); its O half is 128 registers a thread, S and P 24 more at 32
keys (ptxas: no spills under the 240 of setmaxnreg). Shared memory: Q 64 KiB (its column blocks 4w..4w+3
later hold warpgroup w's O, after a 256-thread barrier ``q_dead`` that waits for the other warpgroup's
last Q K'), two K and two V stages of 32 keys x 512 (32 KiB each): 193 KiB of the 227 (40 keys would be
the most that fits). The price is Q K' computed twice: 1.5x the tensor work of attention (6 FLOPs a row,
key and column instead of 4). The alternatives: two passes over K/V, each for half of O's columns, cost
the same 1.5x plus K and V read twice; splitting Q K' by depth across the warpgroups and adding the
partial S through shared memory costs 1.0x but a CTA-wide barrier and a 64 x BN fp32 exchange per tile,
which ends the ping-pong overlap (not built). The ping-pong stays: the warpgroups take turns with
identical MMAs. The LSE is written by warpgroup 0.

fp8 e4m3 (``config.is_fp8``, head dims 64/128/256): Q, K and V^T tiles of bytes (V given transposed by the
op: fp8 wgmma reads K-major operands only), P cast to e4m3 in registers, O (bf16) in a region of its own,
per-token scales TMA-loaded with Q and K; ``hopper_fp8`` says how and why.

Persistent (``AttentionConfig.persistent``; the op's at head dims 64 and 128 up to 1-2k keys,
``SM90_PERSISTENT_KEYS``; docs/PERF.md): a grid of one CTA per resident slot, each walking tiles
``ctaid.x, ctaid.x + nctaid.x, ...`` of the ``ceil(Sq / BM) x H x B``, tile-major within a head (causal: a
head's query tiles rotated by its index, ``_place``), every role looping over them: Q through a ring
(``q_full`` / ``q_empty``, ``HopperTile.q_stages``: the load warp loads a later tile's Q once the consumers'
last S = Q K' of the stage's tile retired), the K and V rings going on from tile to tile, O in a region of
its own, written while the next Q loads and TMA-stored by a store warp (the load warpgroup's second:
``o_full{w}`` / ``o_empty{w}``, a one-stage ring a consumer warpgroup; it frees the region once the store
read it). The consumers release Q from every thread and issue no TMA store: with a lane-0 release and a
thread-0 store in their tile loop, ptxas computed the K/V loop's wgmma descriptors in vector registers
(docs/PERF.md). The batch is a parameter (``batch``).

Packed variable-length sequences (``AttentionConfig.varlen``, ``hopper_varlen``): the grid's z is the
sequence b; each role reads cu_seqlens_q/k[b] and [b + 1] (read-only loads) and derives its tile from
them (in the role: values made before the roles live across their dispatch, where ptxas spilled one).
Q/K/V are TMA-loaded from the sequence's packed rows (batch coordinate 0); causal is bottom-right per
sequence; a CTA past its sequence's rows does nothing, one without a K/V tile writes O = 0 and LSE =
+inf; O is TMA-stored where a warpgroup's 64 rows lie inside the sequence, else stored per thread
through ``o_rows``. The dense kernel is unchanged (top-left causal, the same PTX).

A paged K/V cache (``AttentionConfig.page_size``, ``hopper_paged``): K and V are caches of pages, sequence
b's key j in row j % page_size of page block_table[b, j / page_size]; the load warp loads each K/V tile as
BN / chunk TMA loads per 64-column block (chunk = gcd(BN, page_size) rows, inside one page; the box of the
k/v maps), the page index clamped to the sequence's last page (a chunk past its keys still delivers its
bytes; those keys are masked). Sk_b = seqused_k[b]; Q is dense (B, Sq, H, D), every sequence Sq rows: O
TMA-stored as the dense kernel's, LSE (B, H, Sq); or packed (``varlen``: cu_seqlens_q, O and LSE as
above). The rest is the packed kernel's (``hopper_varlen``: bottom-right causal, rows that see no key).
Pages TMA cannot load (``AttentionConfig.page_gather``: not a multiple of 16 keys, and at head dims 192/256
the sizes whose chunks spilled) are gathered instead: the whole load warp copies each K/V row with cp.async
into the layout TMA writes (``hopper_gather``; K and V are pointers with their strides, the full barriers
count the warp's 32 lanes), the elected lane still TMA-loading Q.

Packed GQA heads (``AttentionConfig.pack_gqa`` = G, paged with dense Q: decoding): CTA (x, y, z) takes the G
query heads kvh * G .. of K/V head kvh = y, each warpgroup's 64 rows 64 / G positions x G heads (row r:
position r / G of head kvh * G + r % G, the consumer's ``tile_heads``, as the MLA kernel packs its heads): the
Q and O TMA boxes are (64 columns, G heads, 64 / G positions, 1), so a decode step (Sq = 1) fills the rows
with heads, not 127 empty positions, and a K/V tile is loaded once for the G heads. Key limits are per row
position (bottom-right causal), the LSE per row head, O positions past Sq are clipped by the TMA store. G is
compiled in (the launch's ``group`` must be it: ``gqa_arguments``); the grid is (ceil(Sq G / 128), Hk, B).

Split KV (``AttentionConfig.split_kv``, paged with dense Q: decoding, ``hopper_split``): grid x is the query
tile times ``num_splits`` key ranges (split-minor); CTA x takes query tile x / num_splits and the keys
[s split_keys, (s + 1) split_keys) of its sequence, s = x % num_splits (``hopper_varlen.set_tile``: the
consumers mask from ``kv_begin``, the load warp numbers its tiles from the sequence's first key), and writes
its rows' O over the range in fp32 and their LSE (-inf, O 0, where a row sees no key of the range) with
per-thread stores; the "attention-combine" kernel merges the ranges.

Built through ``fa4_mlir.dsl``: this module declares the parameters and builds the prologue and the
load warp; ``hopper_consumer`` builds the consumer warpgroups, a role each, or with
``AttentionConfig.one_consumer_role`` (the op's at head dims 128 and 256 on long keys) one role ``consumers`` over all
their warps, whose code reads its warpgroup's index at run time: one copy of it instead of two or three.
"""

from __future__ import annotations

import contextlib
import types

from fa4_mlir.configs.attention import (SM90_SECTION_MIN_HEAD_DIM, SM90_SECTION_MIN_TILES, SM90_SMS,
                                        AttentionConfig)
from fa4_mlir.kernels.attention.abi import CONFIG_FIELDS, declare
from fa4_mlir.kernels.attention.dims import BLOCK, ROW_BYTES
from fa4_mlir.kernels.source import KernelSource, TensorMapSpec
from fa4_mlir.layouts import hopper_attention_barriers

NAME = "attention"
WG_ROWS = 64  # query rows of a consumer warpgroup: the M of one wgmma
CONSUMER_REGISTERS = 240  # 2 x 128 x 240 + 128 x 24 = 64512: the 384 threads' launch pool (168 each)
PRODUCER_REGISTERS = 24
# (consumer, load warpgroup) setmaxnreg budgets by consumer warpgroups: 3 x 128 x 160 + 128 x 32 = 65536, the
# 512 threads' pool (a setmaxnreg.inc past the pool waits forever: fa4.warp_specialize checks it)
REGISTERS = {2: (CONSUMER_REGISTERS, PRODUCER_REGISTERS), 3: (160, 32)}
# the paged load warp (``hopper_paged``) and the 16-bit tile walk's spill at 24: 2 x 128 x 232 + 128 x 40 = 64512, the
# launch pool
PAGED_REGISTERS = {2: (232, 40), 3: (160, 32)}
# split KV: the load warp's key range (its first tile, the range's last page) spilled at 40 at head dim 192
# (4-8 spill stores; ptxas 13.0, 2026-11-26): 2 x 128 x 224 + 128 x 56 = 64512; no consumer spills at 224
SPLIT_REGISTERS = {2: (224, 56)}
# the parameters' names in the printed IR (fa4-compile --emit fa4), as the text kernel had them
_ARG_NAMES = {"q": "q_map", "k": "k_map", "v": "v_map", "o": "o_map"}
_BARRIER_NAMES = {"q_full": "qbar"}


def build(config: AttentionConfig) -> KernelSource:
    """The kernel, built through ``fa4_mlir.dsl`` (imported here: this module, imported by
    ``fa4_mlir.kernels.attention``, stays importable without MLIR)."""
    from fa4_mlir import dsl
    from fa4_mlir.dsl.names import name
    from fa4_mlir.kernels.attention.hopper_consumer import Consumer

    config.validate()
    t = config.hopper
    n = t.consumers
    k = dsl.Kernel(NAME, config.target, 4 * n + 4)
    if config.is_fp8:
        from fa4_mlir.kernels.attention import hopper_fp8

        q_box, kv_box, o_box, v_box, scale_boxes = hopper_fp8.boxes(config)
        declare(k, q_box, kv_box, o_box, scale_boxes, fp8=True, v_box=v_box, runtime_group=True,
                persistent=t.persistent)
    else:
        heads = config.fused_group  # pack_gqa: a warpgroup's 64 rows are 64 / heads positions x heads heads
        q_box = o_box = TensorMapSpec(config.dtype, (BLOCK, heads, WG_ROWS // heads, 1), "128B")
        # paged: a K/V TMA load takes one chunk of a page (``hopper_paged``)
        kv_box = TensorMapSpec(config.dtype, (BLOCK, 1, config.page_chunk or t.bn, 1), "128B")
        declare(k, q_box, kv_box, o_box, runtime_group=True, persistent=t.persistent, varlen=config.varlen,
                paged=bool(config.page_size), split_kv=config.split_kv, gather=config.page_gather,
                schedule=config.varlen)
    consumer, sequence = Consumer, None  # the dense kernel's tile is the prologue's
    if config.serving:  # packed sequences or a paged cache: each role reads its sequence's tile; the
        # consumers are varlen's
        from fa4_mlir.kernels.attention.hopper_varlen import VarlenConsumer, set_tile

        consumer, sequence = VarlenConsumer, set_tile
        if config.split_kv:  # key ranges: fp32 partials stored per thread
            from fa4_mlir.kernels.attention.hopper_split import SplitConsumer as consumer
    with k.body() as arg:
        g = _prologue(dsl, k, config, arg)
        # the tile walk's load warp computes its walk (``walk``) and spilled at 24 (4 bytes, head dim 64)
        budgets = SPLIT_REGISTERS if config.split_kv else PAGED_REGISTERS if config.page_size or t.persistent \
            else REGISTERS
        consumer_registers, load_registers = budgets[n]
        if config.one_consumer_role:  # one copy of the code, the warpgroup index a run-time value
            with k.role("consumers", warps=range(4 * n), registers=consumer_registers):
                consumer(k, g, name(dsl.tid_x() // (4 * 32), "wg")).build()
        for w in range(0 if config.one_consumer_role else n):
            with k.role(f"consumer{w}", warps=range(4 * w, 4 * w + 4), registers=consumer_registers):
                if sequence:
                    sequence(g)
                consumer(k, g, w).build()
        with k.role("load", warps=[4 * n], registers=load_registers):
            if sequence:
                sequence(g)
            if config.page_gather:  # Q by the elected lane, K/V gathered by the whole warp
                from fa4_mlir.kernels.attention.hopper_gather import load

                with _only(k, g.work):
                    load(k, g, _load_q)
            else:
                with _only(k, g.work), k.elect_one():
                    _load(dsl, k, g)
        if t.persistent:  # the next warp of the load warpgroup stores each tile's O
            with k.role("store", warps=[4 * n + 1], registers=load_registers), k.elect_one():
                _store(dsl, k, g)
    grid = "(min(ceil(Sq / {bm}) * H * B, resident CTAs), 1, 1)" if t.persistent else "(ceil(Sq / {bm}), H, B)"
    extra = {"persistent": True} if t.persistent else {}
    if config.pack_gqa:  # a CTA: cta_positions positions of the pack_gqa heads of K/V head ctaid.y; the group
        # is compiled in (the launch's must be it)
        grid = f"(ceil(Sq / {config.cta_positions}), H / {config.pack_gqa}, B)"
        extra = {"group": config.pack_gqa, "pack_gqa": config.pack_gqa}
    geometry = "launch_geometry"
    if config.varlen:  # packed Q: slots over every sequence's query tiles (varlen_schedule); causal, heads minor
        grid = "(min(ceil(total_q / {bm}) + B - 1, B * ceil(max_seqlen_q / {bm})), H, 1)"
        geometry = "varlen_geometry"
    if config.split_kv:  # x: the query tiles times the key ranges, split-minor
        grid, geometry = grid.replace("), ", ") * num_splits, ", 1), "splitkv.split_geometry"
        extra = {**extra, "split_kv": True}
    extra.update({f: getattr(config, f) for f in ("kv_stages", "single_kv_loop", "exp2_f16x2", "one_consumer_role")
                  if getattr(config, f)})
    return k.source(grid=grid.format(bm=t.bm) + f" ({geometry})",
                    config={**{f: getattr(config, f) for f in CONFIG_FIELDS}, "group": "runtime", "block_n": t.bn,
                            **extra})


def _only(k, condition):
    """``k.if_(condition)``, or no branch for None (the dense kernel: every CTA loads)."""
    return contextlib.nullcontext() if condition is None else k.if_(condition)


def _prologue(dsl, k, c: AttentionConfig, arg) -> types.SimpleNamespace:
    """Shared memory, barriers, the K and V rings, the CTA's tile and its K/V trip count: what every
    role reads (returned as a namespace ``g``)."""
    from fa4_mlir.dsl.names import name

    names = {**_ARG_NAMES, "o": "o"} if c.split_kv else _ARG_NAMES  # split KV: O partials, a pointer
    for param, value in vars(arg).items():
        name(value, names.get(param, param))
    t = c.hopper
    wgs = range(t.consumers)
    part = t.q_bytes // t.consumers  # a warpgroup's 64 rows: its Q, then its O (split O: its half of O's blocks)
    row, vrow = t.row_bytes, t.v_row_bytes  # bytes of a swizzled row of Q/K and of V (fp8: V^T) tiles
    q = name(k.smem_region("q", bytes=t.q_stages * t.q_bytes, align=1024, swizzle=f"{row}B"), "q")
    if t.fp8 or t.persistent:  # O in a region of its own: fp8's (bf16) is twice Q's bytes; persistent, the
        # next tile's Q loads while this one's O is written and stored
        qs = [name(dsl.fa4.smem_alias(q, sym_name=f"q{w}", bytes=part, offset=w * part), f"q{w}") for w in wgs]
        o_part = t.o_bytes // t.consumers
        o = name(k.smem_region("o", bytes=t.o_bytes, align=1024, swizzle="128B"), "o")
        os_ = [name(dsl.fa4.smem_alias(o, sym_name=f"o{w}", bytes=o_part, offset=w * o_part), f"o{w}") for w in wgs]
        o_region = (o, o_part)
    elif t.split_o:  # both warpgroups read all of Q; each writes its O columns over half of Q's blocks
        qs = [q, q]
        os_ = [name(dsl.fa4.smem_alias(q, sym_name=f"o{w}", bytes=part, offset=w * part), f"o{w}") for w in wgs]
    else:
        qs = [name(dsl.fa4.smem_alias(q, sym_name=f"q{w}", bytes=part, offset=w * part), f"q{w}") for w in wgs]
        os_ = [name(dsl.fa4.smem_alias(qs[w], sym_name=f"o{w}", bytes=part), f"o{w}") for w in wgs]
    if not (t.fp8 or t.persistent):  # a warpgroup's O over its Q rows
        o_region = (q, part)
    kring = name(k.smem_region("k", bytes=t.stages * t.kv_stage_bytes, align=1024, swizzle=f"{row}B"), "kring")
    vring = name(k.smem_region("v", bytes=t.stages * t.v_stage_bytes, align=1024, swizzle=f"{vrow}B"), "vring")
    qscale = kscale = None
    if t.token_scales:  # fp32 scales: the CTA's rows, and one buffer per K stage
        qscale = name(k.smem_region("q_scale", bytes=t.q_scale_bytes, align=128), "qscale")
        kscale = name(k.smem_region("k_scale", bytes=t.stages * t.k_scale_bytes, align=128), "kscale")
    barriers = {b.name: name(k.mbarriers(b.name, len(b.counts), arrive_count=b.counts[0], arrival=b.arrival),
                             _BARRIER_NAMES.get(b.name, b.name))
                for b in hopper_attention_barriers(c)}
    kp = k.pipeline("kp", t.stages, barriers["k_full"], barriers["k_empty"])
    vp = k.pipeline("vp", t.stages, barriers["v_full"], barriers["v_empty"])
    name(kp.value, "kp")
    name(vp.value, "vp")
    qp, op = None, []
    if t.persistent:  # Q is a ring of ``q_stages``: loaded per tile, released once the tile's last S = Q K'
        # retired; each warpgroup's O a one-stage ring to the store warp
        qp = k.pipeline("qp", t.q_stages, barriers["q_full"], barriers["q_empty"])
        name(qp.value, "qp")
        op = [k.pipeline(f"op{w}", 1, barriers[f"o_full{w}"], barriers[f"o_empty{w}"]) for w in wgs]
        for w, pipe in enumerate(op):
            name(pipe.value, f"op{w}")
    for b in barriers.values():
        dsl.fa4.mbarrier_init(b)
    g = types.SimpleNamespace(
        c=c, t=t, d=t.head_dim, bn=t.bn, wg_rows=WG_ROWS, consumers=t.consumers,
        blocks=t.head_dim * t.elem_bytes // row,
        split_o=t.split_o, o_cols=t.head_dim // 2 if t.split_o else t.head_dim, row=row, vrow=vrow,
        qscale=qscale, kscale=kscale, q_region=q, q_part=part, o_region=o_region,
        elem="e4m3" if t.fp8 else "bf16" if c.dtype == "bf16" else "f16", arg=arg, q=qs, o=os_, kring=kring,
        vring=vring,
        qbar=barriers["q_full"], kfull=barriers["k_full"], vfull=barriers["v_full"], kp=kp, vp=vp, qp=qp, op=op,
        persistent=t.persistent, walk=walk, place=_place, row_sums=t.row_sums,
        # the unmasked K/V tiles' own loop (hopper_consumer), unless the config asks for one loop, or where ptxas
        # spilled with it: per-token fp8 scales over three consumer warpgroups (8 bytes, non-causal)
        peel_unmasked=not (c.single_kv_loop or c.token_scales and t.consumers == 3),
        exp2_emulation=c.exp2_emulation, exp2_f16x2=c.exp2_f16x2, lazy_rescale=c.lazy_rescale,
        rescale_before_pv=c.rescale_before_pv,
        shared_kv=False, kv_begin=None, kv_limit=arg.seq_k,  # the MLA kernel's consumer hooks off
        tile_heads=c.pack_gqa or 1,  # pack_gqa: rows of packed heads (the MLA kernel's hook)
        q_base=None, k_base=None, work=None)  # varlen: the sequence's first Q and K/V rows, whether the CTA works
    if t.persistent:  # each role sets the tile walk's values (``walk``)
        return g
    if c.varlen:  # packed Q: each role places its slot and finds its tile (hopper_varlen.set_tile)
        return g
    i32 = dsl.i32()
    if c.split_kv:  # x = query tile * num_splits + split (the split and its keys: ``hopper_varlen.set_tile``)
        qt = name(dsl.ctaid("x") // arg.num_splits, "qt")
    elif c.causal and c.causal_order == "sections" and not c.serving and t.head_dim >= SM90_SECTION_MIN_HEAD_DIM:
        qt, head, bz = _causal_sections(dsl, g)
        _set_tile(dsl, g, qt, head, bz)
        return g
    elif c.causal:  # each head's longest rows first: the last wave holds the short ones
        qx = name(dsl.ctaid("x"), "qx")
        qlast = name(dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_x(i32)).named("nqx") - 1, "qlast")
        qt = name(qlast - qx, "qt")
    else:
        qt = name(dsl.ctaid("x"), "qt")
    _set_tile(dsl, g, qt, name(dsl.ctaid("y"), "head"), name(dsl.ctaid("z"), "bz"))
    return g


def walk(dsl, g) -> None:
    """Persistent: set ``g``'s tile walk, this CTA's first tile, its stride and the number of tiles. Each role
    computes it in its own code: values made before the roles' dispatch live across it, and the load warp's 24
    registers could not hold them (ptxas spilled 20 bytes at head dim 128, causal)."""
    from fa4_mlir.dsl.names import name

    arg, bm = g.arg, g.t.bm
    q_tiles = name(dsl.Value(dsl.arith.divsi((arg.seq_q + (bm - 1)).value, dsl.Value(bm).value)), "q_tiles")
    g.q_tiles, g.heads_batch = q_tiles, name(arg.num_heads * arg.batch, "hb")
    g.first, g.stride = name(dsl.ctaid("x"), "first"), dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_x(dsl.i32()))
    g.total = name(q_tiles * g.heads_batch, "total")


def section_order(slot, q_tiles, heads_batch, section, minimum=min):
    """(query tile, head-and-batch index ``head + H b``) of the causal tile the ``slot``-th CTA of the launch
    takes (``causal_order="sections"``): the heads go in sections of ``section`` (the last one may be
    shorter), and within a section the longest rows come first across its heads, level by level (query tile
    ``q_tiles - 1`` of every head of the section, then ``q_tiles - 2``, ...). The CTAs start in launch order,
    so this is the longest processing time first within a section; a section of one head is each head's
    tiles in turn. Takes ints or ``dsl.Value``s (``minimum``: ``min`` or ``Value.min``); a bijection of
    ``[0, q_tiles * heads_batch)`` (test_attention_hopper)."""
    per_section = q_tiles * section
    sec = slot // per_section
    rest = slot - sec * per_section
    first = sec * section
    heads = minimum(heads_batch - first, section)  # the last section's heads
    level = rest // heads
    return q_tiles - 1 - level, first + rest - level * heads


def _causal_sections(dsl, g):
    """(query tile, head, batch) of this CTA in ``section_order``: its slot is its linear index in the grid
    (q_tiles, H, B), launch order. A section is the fewest heads (a power of two) whose tiles make two waves of
    CTAs (``SM90_SMS``), so that the causal tiles end on short ones: each head's tiles in turn leaves the last
    head's longest rows to start late. That only where a head has ``SM90_SECTION_MIN_TILES`` query tiles or
    more; below, a section is one head (each head's tiles in turn): a head's few CTAs, adjacent in launch
    order, run at once and share their K/V reads, which interleaving the heads undoes. Head dims below
    ``SM90_SECTION_MIN_HEAD_DIM`` keep each head's order (``_prologue``). H100, bf16, three runs (docs/PERF.md):
    +2..8% at 4k rows of head dims 128 and 256, within the runs' spread (up to 8%) at 16k, -1..7% at head dim
    64 and at 512-1k rows had sections been used there; sections as large as L2 holds the K/V of
    (FlashAttention's) were slower at 1k and at 16k."""
    from fa4_mlir.dsl.names import name

    i32 = dsl.i32()
    q_tiles = name(dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_x(i32)), "nqx")
    heads = dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_y(i32))
    heads_batch = name(heads * dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_z(i32)), "hb")
    slot = name(dsl.ctaid("x") + q_tiles * (dsl.ctaid("y") + heads * dsl.ctaid("z")), "slot")
    most = 2 * SM90_SMS // SM90_SECTION_MIN_TILES  # the largest section: two waves of the fewest tiles
    waves = _pow2_floor(dsl, (dsl.Value(2 * SM90_SMS) // q_tiles).min(most).max(1), most)
    many = q_tiles >= SM90_SECTION_MIN_TILES
    section = name(dsl.Value(dsl.arith.select(many.value, waves.value, dsl.Value(1).value)).min(heads_batch),
                   "section")
    qt, hb = section_order(slot, q_tiles, heads_batch, section, minimum=lambda a, b: a.min(b))
    return name(qt, "qt"), name(hb % heads, "head"), name(hb // heads, "bz")


def _pow2_floor(dsl, value, most: int):
    """The largest power of two <= ``value`` (a Value in [1, ``most``])."""
    out = dsl.Value(1)
    for bit in range(1, most.bit_length()):
        out = dsl.Value(dsl.arith.select((value >= (1 << bit)).value, dsl.Value(1 << bit).value, out.value))
    return out


def _place(dsl, g, tile) -> None:
    """Persistent: set ``g``'s tile values (``_set_tile``) for tile ``tile`` of the walk: tile-major within a
    head, so the CTAs at work at once share a head's K/V in L2 (and a GQA group's, whose heads are adjacent).
    Causal, a head's query tiles are rotated by the head's index: a CTA's tiles at a stride of the grid would
    otherwise sit at one place in their heads whenever the grid is a multiple of the query tiles (at 512 rows,
    a quarter of the CTAs taking only the longest rows). The longest rows first over every head (tried first)
    balanced the CTAs but read each head's K/V once a level: 20-30% slower at 512-2k rows (docs/PERF.md)."""
    hb = tile // g.q_tiles
    qt = tile - hb * g.q_tiles
    if g.c.causal:
        qt = (qt + hb) % g.q_tiles
    _set_tile(dsl, g, qt, hb % g.arg.num_heads, hb // g.arg.num_heads)


def _set_tile(dsl, g, qt, head, bz) -> None:
    """The tile's values every role reads: head, batch, K/V head, first row and K/V trip count."""
    from fa4_mlir.dsl.names import name

    c, t, arg = g.c, g.t, g.arg
    g.bz = bz
    if c.pack_gqa:  # the grid's y is the K/V head; the CTA's rows hold its pack_gqa heads (compiled in)
        g.kvh = head
        g.head = name(head * c.pack_gqa, "head0")
        g.q_start = name(qt * c.cta_positions, "q_start")  # positions: bm / pack_gqa a CTA
    else:
        g.head = head
        g.kvh = name(head // arg.group, "kvh")  # the group is a launch argument: one division per tile
        g.q_start = name(qt * t.bm, "q_start")
    if c.serving:  # bz is the sequence; its rows, lengths and K/V tiles are each role's (hopper_varlen.set_tile)
        g.seq = bz
        return
    if c.causal:  # tiles past the CTA's last row are skipped by every role alike
        q_end = name(g.q_start + t.bm, "q_end")
        kv_end = name(dsl.Value(dsl.arith.minsi(arg.seq_k.value, q_end.value)), "kv_end")
    else:
        kv_end = arg.seq_k
    kv_up = name(kv_end + (t.bn - 1), "kv_up")
    g.n_tiles = name(dsl.Value(dsl.arith.divsi(kv_up.value, dsl.Value(t.bn).value)), "n_tiles")


# -- load warp ---------------------------------------------------------------------------------------
def _load(dsl, k, g) -> None:
    """Q (every warpgroup's rows on one barrier), K_0, then per tile j K_j ahead of V_{j-1} (S = Q K_j' is
    issued before O += P V_{j-1}), then the last V. Persistent: that for each tile of the walk, Q
    through its ring (a tile's Q waits for the consumers' release of its stage), the K and V
    rings going on from tile to tile."""
    from fa4_mlir.dsl.names import name

    if not g.persistent:
        zero = dsl.Value(0).value
        dsl.fa4.mbarrier_arrive_expect_tx(g.qbar, zero, tx_bytes=g.t.q_bytes + g.t.q_scale_bytes)
        _load_q(dsl, g, zero)
        ks, vs = g.kp.producer(), g.vp.producer()
        name(ks.stage, "ld_ki")
        name(vs.stage, "ld_vi")
        _load_kv(dsl, k, g, ks, vs)
        return
    walk(dsl, g)
    qs, ks, vs = g.qp.producer(), g.kp.producer(), g.vp.producer()
    with k.range(g.first, g.total, g.stride, carry=[qs, ks, vs]) as tile:
        name(tile, "ld_tile")
        g.place(dsl, g, tile)
        qs.producer_acquire()
        qs.producer_commit(tx_bytes=g.t.q_bytes + g.t.q_scale_bytes)
        _load_q(dsl, g, qs.stage)
        qs.step()
        _load_kv(dsl, k, g, ks, vs)


def _store(dsl, k, g) -> None:
    """Persistent: for each tile of the walk and each consumer warpgroup, wait for its O rows in shared memory
    (``o_full{w}``), TMA-store them (the store clips rows past the tensor's end) and free the region once the
    store read it (``o_empty{w}``)."""
    from fa4_mlir.dsl.names import name

    walk(dsl, g)
    states = [pipe.consumer() for pipe in g.op]
    positions = WG_ROWS // g.tile_heads
    blocks = g.o_cols // BLOCK  # a warpgroup's 64-column blocks of O
    with k.range(g.first, g.total, g.stride, carry=states) as tile:
        name(tile, "st_tile")
        g.place(dsl, g, tile)
        for w, state in enumerate(states):
            state.consumer_wait()
            row = g.q_start + w * positions
            for blk in range(blocks):
                coords = [dsl.Value(blk * BLOCK).value, g.head.value, row.value, g.bz.value]
                dsl.fa4.tma_store(g.arg.o, g.o[w], coords, bytes=WG_ROWS * ROW_BYTES,
                                  src_offset=blk * WG_ROWS * ROW_BYTES)
            dsl.fa4.tma_store_wait(pending=0)
            state.consumer_release()
            state.step()


def _load_q(dsl, g, index) -> None:
    """The tile's Q (and q scales) on barrier ``index`` of the Q ring."""
    positions = WG_ROWS // g.tile_heads  # a warpgroup's Q box: positions x tile_heads heads (pack_gqa)
    starts = (g.q_start,) if g.split_o else [g.q_start + w * positions for w in range(g.consumers)]
    if g.q_base is not None:  # varlen: rows of the packed Q
        starts = [g.q_base + s for s in starts]
    per_block = g.row // g.t.elem_bytes  # elements of a swizzled row
    # persistent: the Q ring's stage ``index``, a warpgroup's rows at ``q_part`` bytes apart
    stage = dsl.fa4.smem_stage(g.q_region, index, bytes=g.t.q_bytes) if g.t.q_stages > 1 else None
    for blk in range(g.blocks):
        column = dsl.Value(blk * per_block).value
        for w in range(len(starts)):
            dst, base = (g.q[w], 0) if stage is None else (stage, w * g.q_part)
            dsl.fa4.tma_load(g.arg.q, dst, g.qbar, index, [column, g.head.value, starts[w].value, g.bz.value],
                             bytes=WG_ROWS * g.row, dst_offset=base + blk * WG_ROWS * g.row)
    if g.qscale is not None:
        dsl.fa4.tma_load(g.arg.q_scale, g.qscale, g.qbar, index, [g.q_start.value, g.head.value, g.bz.value],
                         bytes=g.t.q_scale_bytes)


def _load_kv(dsl, k, g, ks, vs) -> None:
    """The tile's K and V tiles through their rings (``ks``, ``vs``: the producer states)."""
    from fa4_mlir.dsl.names import name, name_all

    if g.c.page_size:  # K and V tiles chunk by chunk from the block table's pages
        from fa4_mlir.kernels.attention.hopper_paged import load_kv

        load_kv(k, g, ks, vs)
        return
    _load_tile(dsl, g, "k", dsl.Value(0), ks)
    with k.range(1, g.n_tiles, carry=[ks, vs]) as j:
        name_all([ks.stage, ks.phase, vs.stage, vs.phase], ["ld_ks", "ld_kph", "ld_vs", "ld_vph"])
        _load_tile(dsl, g, "k", j, ks)
        _load_tile(dsl, g, "v", j - 1, vs)
    name(vs.stage, "ld_loop")
    _load_tile(dsl, g, "v", g.n_tiles - 1, vs)


def _load_tile(dsl, g, which: str, tile, state) -> None:
    """Acquire the state's stage of the K or V ring, load tile ``tile``'s 64-column blocks into it, step."""
    ring, full, tensor_map = (g.kring, g.kfull, g.arg.k) if which == "k" else (g.vring, g.vfull, g.arg.v)
    nbytes = g.t.kv_stage_bytes if which == "k" else g.t.v_stage_bytes
    scales = which == "k" and g.kscale is not None  # the K tile's k scales ride on its barrier
    key = tile * g.bn if g.k_base is None else g.k_base + tile * g.bn  # varlen: rows of the packed K/V
    state.producer_acquire()
    state.producer_commit(tx_bytes=nbytes + (g.t.k_scale_bytes if scales else 0))
    buf = dsl.fa4.smem_stage(ring, state.stage, bytes=nbytes)
    if which == "v" and g.t.fp8:  # V^T (D, keys): blocks of g.vrow keys, each all D rows (and the rows of ones)
        rows = g.d + g.t.sum_rows
        for blk in range(g.bn // g.vrow):
            coords = [(key + blk * g.vrow).value, dsl.Value(0).value, g.kvh.value, g.bz.value]
            dsl.fa4.tma_load(tensor_map, buf, full, state.stage, coords, bytes=rows * g.vrow,
                             dst_offset=blk * rows * g.vrow)
    else:
        per_block = g.row // g.t.elem_bytes
        for blk in range(g.blocks):
            coords = [dsl.Value(blk * per_block).value, g.kvh.value, key.value, g.bz.value]
            dsl.fa4.tma_load(tensor_map, buf, full, state.stage, coords, bytes=g.bn * g.row,
                             dst_offset=blk * g.bn * g.row)
    if scales:
        kbuf = dsl.fa4.smem_stage(g.kscale, state.stage, bytes=g.t.k_scale_bytes)
        dsl.fa4.tma_load(g.arg.k_scale, kbuf, full, state.stage, [key.value, g.kvh.value, g.bz.value],
                         bytes=g.t.k_scale_bytes)
    state.step()
