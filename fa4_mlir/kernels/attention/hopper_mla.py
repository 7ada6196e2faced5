"""mla-attention: multi-head latent attention (DeepSeek-V3, absorbed form) forward for sm_90a.

``O = softmax(scale * (q_nope kv_latent' + q_rope k_rope')) kv_latent`` per query head, every head
reading the one latent head (MQA), bf16/fp16 in, fp32 accumulation; the LSE when asked.

The structure is the sm_90a attention's at head dim 512 (``hopper.py``: split O) with its consumer
warpgroups (``hopper_consumer.Consumer``) unchanged; this module declares the parameters, the shared
memory, the barriers and the load warp:

* a CTA owns 64 query rows, which both consumer warpgroups share: each computes S = Q K' (576 deep:
  36 m64nBNk16 SS wgmmas) and the same softmax, and accumulates O += P V over its 256 of the latent's
  512 columns (warpgroup w: columns [256 w, 256 w + 256));
* the rows pack ``tile_heads`` heads x ``64 / tile_heads`` positions (FlashMLA's packing; the sm_100a
  kernel's fused GQA): the Q and O TMA boxes are (64 columns, tile_heads heads, positions, 1), so a
  decode step (Sq = 1, H >= 64) fills all 64 rows with heads of one position;
* Q (64 x 576, 72 KiB) is loaded once: q_nope's eight 64-column blocks, then q_rope's block; O (512
  columns) is written over Q's first eight blocks after both warpgroups' last S = Q K';
* one K ring of ``stages`` stages of ``block_n`` keys x 576: the latent's eight blocks, then k_rope's
  block. V is NOT loaded: P @ V reads the stage's first 512 columns (mn-major, as the attention kernel
  reads V), so a stage is released (its empty barrier counts the 8 consumer warps) only once the P @ V
  that read it retired, one tile after its S = Q K' (``shared_kv``);
* warp 8 (one elected thread) is the TMA load warp: Q, then K tiles 0, 1, ... as stages free up.

Keys at or past a row's limit (``seq_k``; causal: the row's position + 1, the top-left diagonal) are
masked; causal CTAs stop at their last position's tile. The default 4 stages of 32 keys: Q 72 KiB + 4 x
36 KiB + barriers = 217 KiB of the 227 (at 48 keys a tile the consumers spill: S, P and O pass the 240
registers).

Split KV (``MLAConfig.split_kv``; decode, when B x H / 64 CTAs leave SMs idle): grid x enumerates
position tiles x ``num_splits`` key ranges of ``split_keys``; a CTA loads and masks only its range and
writes fp32 partials (``hopper_mla_split``), which the host combines.

The prefill form (``MLAConfig.form = "prefill"``: q/k 192 = 128 nope + 64 rope, v 128) is the sm_90a
attention itself at 128 rows a CTA (warpgroup w: rows [64 w, 64 w + 64), its own O of 128 columns over
its Q rows), Q from q_nope's two blocks and q_rope's, a K ring of k_nope's two blocks and k_rope's and a
V ring, loaded as the attention's load warp does (K_j ahead of V_{j-1}).
"""

from __future__ import annotations

import types

from fa4_mlir.configs.mla import LATENT, NOPE, TILE_ROWS, MLAConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention.dims import BLOCK
from fa4_mlir.kernels.attention.dims import ROW_BYTES as ROW
from fa4_mlir.kernels.source import KernelSource, Param, TensorMapSpec

NAME = "mla_attention"
NUM_WARPS = 12
LOAD_WARP = 8
CONSUMER_REGISTERS = 240
PRODUCER_REGISTERS = 24
CONSUMER_WARPS = 8  # the rings' empty barriers count lane 0 of each consumer warp
MAX_GRID_YZ = 65535
CONFIG_FIELDS = ("dtype", "form", "causal", "tile_heads", "block_n", "stages", "group", "split_kv")


def params(c: MLAConfig) -> tuple[Param, ...]:
    """The kernel's parameters in signature order, with their TMA boxes."""
    q_box = TensorMapSpec(c.dtype, (BLOCK, c.heads_per_tile, TILE_ROWS // c.heads_per_tile, 1), "128B")
    k_box = TensorMapSpec(c.dtype, (BLOCK, 1, c.bn, 1), "128B")
    tail = (
        Param("lse", "ptr", "LSE[B, H, Sq] fp32 (written when write_lse != 0)"),
        Param("seq_q", "i32", "query positions Sq"),
        Param("seq_k", "i32", "key positions Sk, >= 1"),
        Param("num_heads", "i32", "query heads H (absorbed: a multiple of tile_heads; prefill: of group)"),
        Param("scale_log2e", "f32", "softmax scale * log2(e)"),
        Param("write_lse", "i32", "1: write the LSE"),
    )
    if c.form == "prefill":
        return (
            Param("q_nope", "tensormap", "q_nope[B, Sq, H, 128] as dims (128, H, Sq, B)", q_box),
            Param("q_rope", "tensormap", "q_rope[B, Sq, H, 64] as dims (64, H, Sq, B)", q_box),
            Param("k_nope", "tensormap", "k_nope[B, Sk, H / group, 128] as dims (128, H / group, Sk, B)", k_box),
            Param("k_rope", "tensormap", "k_rope[B, Sk, H / group, 64] as dims (64, H / group, Sk, B)", k_box),
            Param("v", "tensormap", "v[B, Sk, H / group, 128] as dims (128, H / group, Sk, B)", k_box),
            Param("o", "tensormap", "O[B, Sq, H, 128] as dims (128, H, Sq, B)", q_box),
        ) + tail
    inputs = (
        Param("q_nope", "tensormap", "q_nope[B, Sq, H, 512] as dims (512, H, Sq, B)", q_box),
        Param("q_rope", "tensormap", "q_rope[B, Sq, H, 64] as dims (64, H, Sq, B)", q_box),
        Param("kv", "tensormap", "kv_latent[B, Sk, 512] as dims (512, 1, Sk, B): K's first 512 columns and V", k_box),
        Param("k_rope", "tensormap", "k_rope[B, Sk, 64] as dims (64, 1, Sk, B)", k_box),
    )
    if not c.split_kv:
        return inputs + (Param("o", "tensormap", "O[B, Sq, H, 512] as dims (512, H, Sq, B)", q_box),) + tail
    return inputs + (
        Param("o", "ptr", "O partials [B, Sq, H, num_splits, 512] fp32, each normalised over its split's keys"),
        Param("lse", "ptr", "LSE partials [B, H, Sq, num_splits] fp32 (always written)"),
        *tail[1:-1],
        Param("num_splits", "i32", "key ranges (grid x = position tiles x num_splits)"),
        Param("split_keys", "i32", "keys of a range, a multiple of block_n; every range must hold a key"),
    )


def launch_geometry(config: MLAConfig, batch: int, seq_q: int, heads: int, seq_k: int) -> tuple[int, int, int]:
    """The grid: (position tiles, head tiles (prefill: heads), batch)."""
    if min(batch, seq_q, heads, seq_k) < 1:
        raise LaunchError(f"mla_attention: batch, seq_q, heads and seq_k must be >= 1, got "
                          f"{batch}, {seq_q}, {heads}, {seq_k}")
    per, what = (config.heads_per_tile, "tile_heads") if config.form == "absorbed" else (config.group, "group")
    if heads % per:
        raise LaunchError(f"mla_attention: heads ({heads}) must be a multiple of the config's {what} ({per})")
    ys = heads // config.heads_per_tile
    if ys > MAX_GRID_YZ or batch > MAX_GRID_YZ:
        raise LaunchError(f"mla_attention: heads / tile_heads and batch must be <= {MAX_GRID_YZ}, got {ys}, {batch}")
    return -(-seq_q // config.positions), ys, batch


def split_geometry(config: MLAConfig, batch: int, seq_q: int, heads: int, seq_k: int,
                   num_splits: int) -> tuple[tuple[int, int, int], int]:
    """The grid of a ``split_kv`` kernel with (at most) ``num_splits`` key ranges, and the keys of a
    range (whole tiles; the ranges are re-counted so that none is empty): (grid, split_keys)."""
    x, ys, b = launch_geometry(config, batch, seq_q, heads, seq_k)
    tiles = -(-seq_k // config.bn)
    per = -(-tiles // max(1, min(num_splits, tiles)))
    splits = -(-tiles // per)
    return (x * splits, ys, b), per * config.bn


def build(config: MLAConfig) -> KernelSource:
    """The kernel, built through ``fa4_mlir.dsl`` (imported here: this module imports without MLIR)."""
    from fa4_mlir import dsl
    from fa4_mlir.kernels.attention.hopper_consumer import Consumer

    config.validate()
    k = dsl.Kernel(NAME, config.target, NUM_WARPS)
    k.declare_params(params(config))
    absorbed = config.form == "absorbed"
    with k.body() as arg:
        g = _prologue(dsl, k, config, arg)
        consumer = Consumer
        if config.split_kv:
            from fa4_mlir.kernels.attention.hopper_mla_split import SplitConsumer as consumer
        for w in (0, 1):
            with k.role(f"consumer{w}", warps=range(4 * w, 4 * w + 4), registers=CONSUMER_REGISTERS):
                consumer(k, g, w).build()
        with k.role("load", warps=[LOAD_WARP], registers=PRODUCER_REGISTERS), k.elect_one():
            (_load_absorbed if absorbed else _load_prefill)(dsl, k, g)
    ys = f"H / {config.heads_per_tile}" if absorbed else "H"
    xs = f"ceil(Sq / {config.positions})" + (" * num_splits" if config.split_kv else "")
    return k.source(grid=f"({xs}, {ys}, B) ({'split_geometry' if config.split_kv else 'launch_geometry'})",
                    config={f: getattr(config, f) for f in CONFIG_FIELDS})


def _prologue(dsl, k, c: MLAConfig, arg) -> types.SimpleNamespace:
    """Shared memory (Q with O over it, the K ring and the prefill form's V ring), barriers, the rings,
    the CTA's tile and trip count: what the roles read, in the namespace ``hopper_consumer.Consumer``
    expects (absorbed: ``shared_kv`` and ``tile_heads`` on; prefill: ``t.v_stage_bytes``)."""
    from fa4_mlir.dsl.names import name

    absorbed = c.form == "absorbed"
    q = name(k.smem_region("q", bytes=c.q_bytes, align=1024, swizzle="128B"), "q")
    if absorbed:  # both warpgroups read all of Q; warpgroup w's 256 O columns go over Q's blocks 4w .. 4w + 3
        o_half = TILE_ROWS * (LATENT // 2) * 2
        qs = [q, q]
        os_ = [name(dsl.fa4.smem_alias(q, sym_name=f"o{w}", bytes=o_half, offset=w * o_half), f"o{w}") for w in (0, 1)]
    else:  # warpgroup w's 64 rows of Q, then its O (64 x 128) over them
        half = c.q_bytes // 2
        qs = [name(dsl.fa4.smem_alias(q, sym_name=f"q{w}", bytes=half, offset=w * half), f"q{w}") for w in (0, 1)]
        os_ = [name(dsl.fa4.smem_alias(qs[w], sym_name=f"o{w}", bytes=TILE_ROWS * c.v_depth * 2), f"o{w}")
               for w in (0, 1)]
    n = c.num_stages
    kring = name(k.smem_region("k", bytes=n * c.k_stage_bytes, align=1024, swizzle="128B"), "kring")
    qbar = name(k.mbarriers("q_full", 1, arrive_count=1, arrival="tx"), "qbar")
    kfull = name(k.mbarriers("k_full", n, arrive_count=1, arrival="tx"), "k_full")
    kempty = name(k.mbarriers("k_empty", n, arrive_count=CONSUMER_WARPS, arrival="threads"), "k_empty")
    kp = vp = k.pipeline("kp", n, kfull, kempty)
    name(kp.value, "kp")
    barriers = [qbar, kfull, kempty]
    vring, vfull = kring, None
    if not absorbed:
        vring = name(k.smem_region("v", bytes=n * c.v_stage_bytes, align=1024, swizzle="128B"), "vring")
        vfull = name(k.mbarriers("v_full", n, arrive_count=1, arrival="tx"), "v_full")
        vempty = name(k.mbarriers("v_empty", n, arrive_count=CONSUMER_WARPS, arrival="threads"), "v_empty")
        vp = k.pipeline("vp", n, vfull, vempty)
        name(vp.value, "vp")
        barriers += [vfull, vempty]
    for b in barriers:
        dsl.fa4.mbarrier_init(b)
    i32 = dsl.i32()
    kv_begin = split = None
    if c.split_kv:  # x = position tile * num_splits + split: the split's keys [kv_begin, kv_limit)
        qx = name(dsl.ctaid("x"), "qx")
        qt = name(qx // arg.num_splits, "qt")
        split = name(qx % arg.num_splits, "split")
        kv_begin = name(split * arg.split_keys, "kv_begin")
    elif c.causal:  # the longest rows first: the last wave holds the short ones
        qx = name(dsl.ctaid("x"), "qx")
        qlast = name(dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_x(i32)).named("nqx") - 1, "qlast")
        qt = name(qlast - qx, "qt")
    else:
        qt = name(dsl.ctaid("x"), "qt")
    head = name(dsl.ctaid("y") * c.heads_per_tile, "head0") if absorbed else name(dsl.ctaid("y"), "head")
    kvh = dsl.Value(0) if absorbed else name(head // c.group, "kvh")  # absorbed: the one latent head
    bz = name(dsl.ctaid("z"), "bz")
    q_start = name(qt * c.positions, "q_start")
    if c.causal:  # tiles past the CTA's last position are skipped by every role alike
        q_end = name(q_start + c.positions, "q_end")
        kv_end = name(dsl.Value(dsl.arith.minsi(arg.seq_k.value, q_end.value)), "kv_end")
    elif c.split_kv:
        kv_end = name(dsl.Value(dsl.arith.minsi(arg.seq_k.value, (kv_begin + arg.split_keys).value)), "kv_limit")
    else:
        kv_end = arg.seq_k
    span = kv_end if kv_begin is None else kv_end - kv_begin
    kv_up = name(span + (c.bn - 1), "kv_up")
    n_tiles = name(dsl.Value(dsl.arith.divsi(kv_up.value, dsl.Value(c.bn).value)), "n_tiles")
    # what the consumers read of a tile (hopper_consumer): bf16/fp16 only, so no fp8 parts
    tile = types.SimpleNamespace(kv_stage_bytes=c.k_stage_bytes, v_stage_bytes=c.v_stage_bytes or c.k_stage_bytes,
                                 fp8=False, elem_bytes=2, k_scale_bytes=0)
    return types.SimpleNamespace(
        c=c, t=tile, d=c.qk_depth, bn=c.bn, wg_rows=TILE_ROWS, consumers=2, persistent=False, split_o=absorbed,
        row=ROW, vrow=ROW,
        qscale=None, kscale=None, exp2_emulation=0, exp2_f16x2=False, lazy_rescale=False,
        row_sums="",
        peel_unmasked=False, rescale_before_pv=False,  # one K/V loop: peeled, ptxas spilled 4-32 bytes
        o_cols=LATENT // 2 if absorbed else c.v_depth, elem="bf16" if c.dtype == "bf16" else "f16", arg=arg, q=qs,
        o=os_, kring=kring, vring=vring, qbar=qbar, kfull=kfull, vfull=vfull, kp=kp, vp=vp, head=head, kvh=kvh,
        bz=bz, q_start=q_start, n_tiles=n_tiles, shared_kv=absorbed, tile_heads=c.heads_per_tile,
        kv_begin=kv_begin, kv_limit=kv_end if c.split_kv else arg.seq_k, split=split)


# -- load warp ---------------------------------------------------------------------------------------
def _load_q(dsl, g, q_map, q_rope_map, nope_blocks: int) -> None:
    """Q once on one barrier: per warpgroup tile of 64 rows (absorbed: the one both share), q_nope's
    64-column blocks, then q_rope's block."""
    c = g.c
    zero = dsl.Value(0).value
    box_bytes = TILE_ROWS * ROW
    dsl.fa4.mbarrier_arrive_expect_tx(g.qbar, zero, tx_bytes=c.q_bytes)
    starts = (g.q_start,) if g.split_o else (g.q_start, g.q_start + TILE_ROWS)
    for w, start in enumerate(starts):
        for blk in range(nope_blocks + 1):
            source, column = (q_map, blk * BLOCK) if blk < nope_blocks else (q_rope_map, 0)
            coords = [dsl.Value(column).value, g.head.value, start.value, g.bz.value]
            dsl.fa4.tma_load(source, g.q[w], g.qbar, zero, coords, bytes=box_bytes, dst_offset=blk * box_bytes)


def _load_absorbed(dsl, k, g) -> None:
    """Q, then K tiles 0 .. n-1 (the latent's blocks, then k_rope's), each as its stage frees up."""
    from fa4_mlir.dsl.names import name

    _load_q(dsl, g, g.arg.q_nope, g.arg.q_rope, LATENT // BLOCK)
    ks = g.kp.producer()
    name(ks.stage, "ld_ki")
    parts = ((g.arg.kv, LATENT // BLOCK), (g.arg.k_rope, 1))
    with k.range(0, g.n_tiles, carry=[ks]) as j:
        _load_tile(dsl, g, j, ks, g.kring, g.kfull, g.c.k_stage_bytes, parts)


def _load_prefill(dsl, k, g) -> None:
    """Q (both warpgroups' halves), K_0, then per tile j K_j ahead of V_{j-1} (S = Q K_j' is issued
    before O += P V_{j-1}), then the last V, as the attention kernel's load warp."""
    from fa4_mlir.dsl.names import name

    _load_q(dsl, g, g.arg.q_nope, g.arg.q_rope, NOPE // BLOCK)
    ks, vs = g.kp.producer(), g.vp.producer()
    name(ks.stage, "ld_ki")
    name(vs.stage, "ld_vi")
    k_parts, v_parts = ((g.arg.k_nope, NOPE // BLOCK), (g.arg.k_rope, 1)), ((g.arg.v, NOPE // BLOCK),)
    k_bytes, v_bytes = g.c.k_stage_bytes, g.c.v_stage_bytes
    _load_tile(dsl, g, dsl.Value(0), ks, g.kring, g.kfull, k_bytes, k_parts)
    with k.range(1, g.n_tiles, carry=[ks, vs]) as j:
        _load_tile(dsl, g, j, ks, g.kring, g.kfull, k_bytes, k_parts)
        _load_tile(dsl, g, j - 1, vs, g.vring, g.vfull, v_bytes, v_parts)
    _load_tile(dsl, g, g.n_tiles - 1, vs, g.vring, g.vfull, v_bytes, v_parts)


def _load_tile(dsl, g, tile, state, ring, full, nbytes: int, parts) -> None:
    """Acquire the state's stage, load tile ``tile``: each (tensor map, 64-column blocks) of ``parts``
    in turn into the stage's consecutive blocks, then step."""
    state.producer_acquire()
    state.producer_commit(tx_bytes=nbytes)
    buf = dsl.fa4.smem_stage(ring, state.stage, bytes=nbytes)
    key = tile * g.bn
    if g.kv_begin is not None:
        key = g.kv_begin + key
    box_bytes = g.bn * ROW
    blk = 0
    for tensor_map, blocks in parts:
        for b in range(blocks):
            coords = [dsl.Value(b * BLOCK).value, g.kvh.value, key.value, g.bz.value]
            dsl.fa4.tma_load(tensor_map, buf, full, state.stage, coords, bytes=box_bytes, dst_offset=blk * box_bytes)
            blk += 1
    state.step()
