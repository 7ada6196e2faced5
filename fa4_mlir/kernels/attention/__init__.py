"""attention: the FlashAttention-4 forward (softmax(scale Q K') V) for sm_100a, warp-specialised.

The reference system's SM100MHA2Q kernel (spec sections 2-4) as an fa4 program built through
``fa4_mlir.dsl`` (roles in ``producers`` and ``softmax``), with its shared memory, barriers and TMEM
map declared by the reference structs of ``fa4_mlir.dsl.structs.attention`` (SM100AttentionSMem,
FA4MiscMBars, FA4Tmem: the S0/S1/O0/O1 columns), which derive them from
``fa4_mlir.layouts.fa4_layout``. One CTA of 16 warps owns 256 query rows (2Q: halves Q0/Q1)
or 128 (1Q) of one head (or of ``group`` heads sharing a K/V head):

* warps 0-3 / 4-7, softmax warpgroups (184 registers): per K/V tile, read S_i from TMEM, mask,
  take the row maximum, decide lazily (warp vote) whether to adopt a maximum that grew by more than
  8 in log2 units, hand the rescale factor to the correction warpgroup, compute
  ``exp2(s * scale_log2e - m * scale_log2e)`` (one FMA, ``ex2.approx``, optionally a polynomial
  for some columns), write P as 16-bit pairs over S_i's first columns in two stages (3/4 of the
  keys, then 1/4), and keep the row sum; at the end normalise O_i by 1/sum (1Q: merge O0 and O1),
  write it over the dead Q tile and TMA-store it, and the log-sum-exp when asked;
* warps 8-11, correction warpgroup (80): rescales O_i in TMEM only when a warp adopted a new
  maximum, then signals S_i's consumer barrier 0 (count 256 = P stage 0 written + O_i rescaled);
* warp 12, MMA (64, one elected thread): ``S0 <- Q0 Kn'; O1 += P1 V(n-1); S1 <- Q1 Kn';
  O0 += P0 Vn``, Q@K' as SS MMAs over the K depth sub-stages, P@V as TS MMAs (P from TMEM, V
  mn-major from shared memory) in the two P stages;
* warp 13, TMA load (64): Q with the first K tile, Q1 on its own barriers, then K and V tiles
  through one ring (fused) or a K ring with depth sub-stages and a V ring (split); over a gathered paged
  cache (``page_gather``) the whole warp copies the K/V rows (``gather``);
* warps 14-15 idle.

Registers 184/80/64 instead of the reference's 192/88/40/24: ``setmaxnreg`` is warpgroup-wide, so
the idle pair cannot drop to 24 apart from the MMA and load warps, and at 40 (or 56) the MMA
thread's loop spills (ptxas, every config); 184 * 256 + 80 * 128 + 64 * 128 = 65536, the whole
register file, with no spills in any supported config.

fp8 e4m3 (head dims 64, 128; spec 1.2, 4.4, 4.9): Q, K, V tiles are 64-element (64-byte) rows with
64B swizzle, both MMAs ``kind::f8f6f4`` (P@V with P in TMEM, four e4m3 a column), the reference's
fp8 FA4Config (BN, rings, MMA_K 32). The softmax adopts every larger row maximum (threshold 0) and
adds 8 to the exp2 argument before casting P to e4m3 (``softmax.FP8_P_BIAS``: P <= 256 < 448, out of
the subnormals), which cancels in O / sum; the output is bf16, O * v_scale / sum, stored in 32-column
chunks through buffers over the fp8 Q (half its bytes). Tensor-wise Q/K scales are folded into
``scale_log2e`` by the host; per-token ones (``token_scales``) are TMA-loaded into shared memory
(q_scale with Q, k_scale of each K tile into a ring of ``num_k_scale_bufs`` buffers, both on the
K / Q1 barriers' transaction bytes) and the softmax scales each score by its key's and row's scale
before masking and the maximum (the FMA path off); the MMA warp then releases a K stage with its
tile's V stage, after the softmax of the tile read the tile's scales.

MLA prefill (``mla_prefill``; spec 1.2, 2.1, 4.9: ``is_mla``): Q and K 192 deep (128 nope + 64 rope),
V and O 128; one Q@K' sub-stage of 12 MMA K steps, the last 4 from each Q half's rope block (region
``q_rope``) and the K tile's rope (``rope`` buffers after the fused ring, tile mod ceil(nkv / 2); a
split ring keeps it after K_nope in the K stage), loaded from their own maps on the same barriers;
registers 168/80/96 (``Dims.registers``). fp8 MLA prefill: e4m3 nope parts (4 kind::f8f6f4 K steps)
and a 16-bit rope (``rope_dtype``) in fp8's 64B swizzle, two 32-column blocks a row, whose 4 K steps are
kind::f16 MMAs into the same S; registers 176/80/80.

Head dims 256 and 512 on sm_100a are a different kernel, a CTA pair per tile (``depth512``); ``build``
and ``launch_geometry`` dispatch to it.

Packed variable-length sequences (``varlen``, module ``varlen``): the grid's x is a slot of the compacted
tile schedule (``varlen_schedule``, ``varlen_geometry``: at most ceil(total_q / tile positions) + B - 1 slots over
every sequence's query tiles), whose sequence b and tile every thread finds first by a warp scan of the
tile counts from ``cu_seqlens_q``, with b's row offsets and lengths; a slot past the tiles does nothing
(sm_100a: exits before allocating anything). Q/K/V loads and the TMA store address packed rows (batch
coordinate 0), keys past Sk_b are masked, causal is bottom-right per sequence, and the one
trip count may be 0 (every role then skips its tiles; rows that see no key get O = 0, LSE = +inf). A
tile that ends past Sq_b stores its rows with ``st.global`` through ``o_rows`` (a TMA store would write
the next sequence's rows); the LSE is (H, total_q). The dense kernels' IR is unchanged.

A paged K/V cache (``page_size``, module ``paged``): K and V are [num_pages, page_size, Hk, D] caches whose
TMA box is one chunk of a page (gcd(bn, page_size) rows); the load warp reads each K/V tile's
block-table entries once (clamped to the sequence's last page: a tile's chunks past it still deliver
their bytes, masked keys) and loads the K and the V tile as bn / chunk TMA loads each into the same
stage. Sk_b = seqused_k[b] and everything else is as with ``varlen`` (bottom-right causal, trip count 0,
rows that see no key); Q is packed (``varlen``) or dense (B, Sq, H, D) with the dense O store and
(B, H, Sq) LSE. Pages TMA does not load (``AttentionConfig.page_gather``: every size but the powers of two
from 16) are gathered instead: the load warp's 32 lanes copy each K/V row with cp.async into the same layout
(module ``gather``; K and V are pointers with their strides, the K/V full barriers count the lanes, and Q0
loads on its own ``Q0_sync`` barriers).

Split KV (``split_kv``, paged with a dense Q: decode; module ``split``, host side ``splitkv``): grid x also
enumerates ranges of ``split_keys`` keys (query tile x / num_splits, range x % num_splits); every role counts the
range's tiles (0 for a range past the sequence's keys), the load warp's page walk starts at the range's first key,
and the softmax warpgroups store each row's O normalised over the range in fp32 and its LSE (-inf where the row saw
no key of it) with ``st.global`` instead of the TMA store; the "attention-combine" kernel merges the ranges.

Causal attention skips the K/V tiles past the CTA's last row in every role (one trip count); keys at
or past a row's limit (causal diagonal, end of the sequence) are masked to -inf in the tiles that
reach it. Q and O are (B, Sq, H, D), K and V (B, Sk, H / group, D), row-major, D padded to 64-column
blocks by TMA zero fill; the LSE is (B, H, Sq) fp32.
"""

from __future__ import annotations

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention import hopper
from fa4_mlir.kernels.attention.abi import CONFIG_FIELDS, declare
from fa4_mlir.kernels.attention.dims import BLOCK, FP8_OUT_CHUNK, Dims
from fa4_mlir.kernels.attention.producers import Producers
from fa4_mlir.kernels.attention.softmax import Softmax
from fa4_mlir.kernels.source import KernelSource, TensorMapSpec

NAME = "attention"
NUM_WARPS = 16
MAX_GRID_YZ = 65535


def launch_geometry(config: AttentionConfig, batch: int, seq_q: int, heads: int, seq_k: int,
                    ctas: int = 0) -> tuple[int, int, int]:
    """The grid: (query tiles, heads or K/V heads when GQA shares a CTA, batch); a persistent sm_90a kernel
    (``config.persistent``): (one CTA per resident slot, ``ctas`` of them, at most one per tile, 1, 1)."""
    if min(batch, seq_q, heads, seq_k) < 1:
        raise LaunchError(f"attention: batch, seq_q, heads and seq_k must be >= 1, got "
                          f"{batch}, {seq_q}, {heads}, {seq_k}")
    if heads % config.group:
        raise LaunchError(f"attention: heads ({heads}) must be a multiple of group ({config.group})")
    if heads % config.fused_group:  # sm_90a pack_gqa (group 1 in the canonical config): whole K/V heads a CTA
        raise LaunchError(f"attention: heads ({heads}) must be a multiple of pack_gqa ({config.fused_group})")
    if compacted(config):
        raise LaunchError("attention: the packed kernel's grid counts the tiles of all sequences, which "
                          "launch_geometry cannot: call varlen_geometry(config, batch, total_q, max_seqlen_q, heads, "
                          "max_seqlen_k)")
    tiles = -(-seq_q // config.cta_positions)
    if config.target == "sm_90a" and config.persistent:  # heads and batch are not grid dimensions
        if not isinstance(ctas, int) or ctas < 1:
            raise LaunchError(f"attention: a persistent kernel's launch needs the GPU's resident CTAs (Kernel."
                              f"resident_ctas), which must be an int >= 1, got {ctas!r}")
        total = tiles * heads * batch
        if total >= 2 ** 31:  # the kernel's tile walk counts in i32
            raise LaunchError(f"attention: query tiles x heads x batch must be < 2^31 for the persistent kernel, "
                              f"got {tiles} x {heads} x {batch}")
        return min(total, ctas), 1, 1
    ys = heads // config.fused_group
    if ys > MAX_GRID_YZ or batch > MAX_GRID_YZ:
        raise LaunchError(f"attention: heads / fused group and batch must be <= {MAX_GRID_YZ}, got {ys}, {batch}")
    return (2 * tiles if config.is_depth512 else tiles), ys, batch  # head dim 256/512: a CTA pair per tile


def compacted(config: AttentionConfig) -> bool:
    """Whether ``config``'s kernel takes the compacted tile schedule (``varlen_schedule``): the packed
    kernels (``varlen``, paged or not) of both targets."""
    return bool(config.varlen)


def varlen_slots(total_q: int, batch: int, bm: int, max_seqlen_q: int | None = None) -> int:
    """The packed grid's slots for ``batch`` sequences of ``total_q`` query rows in all, tiles of ``bm`` rows: at
    least every sequence's tiles, and at least 1. Two bounds hold, and the smaller is taken: ceil(total_q / bm) +
    batch - 1 (``varlen_schedule``'s, from the packed rows alone) and, given the longest sequence's rows
    ``max_seqlen_q``, batch x ceil(max_seqlen_q / bm) (equal lengths of whole tiles: exactly the tiles, where
    the first leaves batch - 1 CTAs without a tile, 12% more CTAs for 16 sequences of 1024 rows). Host side,
    here and not in ``varlen_schedule`` (which builds IR): the runtime launches without MLIR."""
    bound = -(-total_q // bm) + batch - 1
    if max_seqlen_q is not None:
        bound = min(bound, batch * -(-max_seqlen_q // bm))
    return max(1, bound)


def varlen_geometry(config: AttentionConfig, batch: int, total_q: int, max_seqlen_q: int, heads: int,
                    max_seqlen_k: int) -> tuple[int, int, int]:
    """The packed kernel's (``config.varlen``; other kernels: ``launch_geometry``) grid for ``batch`` sequences
    of ``total_q`` query rows in all (``compacted``): (slots, heads / fused group, 1), ``varlen_slots``: the
    fewer of ceil(total_q / tile positions) + batch - 1 and batch x ceil(max_seqlen_q / tile positions), at
    least every sequence's query tiles when no sequence is longer than ``max_seqlen_q`` (the op refuses a bound
    below a real length; ``max_seqlen_k`` is not needed)."""
    if not compacted(config):
        return launch_geometry(config, batch, max_seqlen_q, heads, max_seqlen_k)
    for what, v, least in (("batch", batch, 1), ("total_q", total_q, 0), ("max_seqlen_q", max_seqlen_q, 0),
                           ("heads", heads, 1)):
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            raise LaunchError(f"attention: {what} must be an int >= {least}, got {v!r}")
    if heads % config.group:  # the fused group (sm_100a) is the group or 1 for a packed kernel
        raise LaunchError(f"attention: heads ({heads}) must be a multiple of group ({config.group})")
    rows, ys = config.cta_positions, heads // config.fused_group
    x = varlen_slots(total_q, batch, rows, max_seqlen_q)
    if ys > MAX_GRID_YZ or x * ys >= 2 ** 31:  # the causal schedule's linear index x + X y is an i32
        raise LaunchError(f"attention: heads / fused group must be <= {MAX_GRID_YZ} and tile slots (varlen_slots, "
                          f"tiles of {rows} rows) x heads / fused group < 2^31 for the packed kernel, got {ys} and "
                          f"{x} slots")
    return x, ys, 1


def walk_arguments(config: AttentionConfig, batch: int) -> dict[str, int]:
    """The persistent sm_90a kernel's ``batch`` (the grid no longer holds it); ``{}`` for other kernels."""
    return {"batch": batch} if config.target == "sm_90a" and config.persistent else {}


def varlen_arguments(config: AttentionConfig, cu_seqlens_q, cu_seqlens_k, total_q: int, o_rows,
                     batch: int) -> dict:
    """The packed kernel's (``config.varlen``) sequence arguments: the two int32[B + 1] prefix sums and O's
    tensor (device pointers, or NumPy arrays on the emulator), ``total_q`` and, for the compacted schedule
    (``compacted``), ``batch`` (B); ``{}`` for other kernels. Its grid is ``varlen_geometry``'s."""
    if not config.varlen:
        return {}
    keys = {} if config.page_size else {"cu_seqlens_k": cu_seqlens_k}  # paged: seqused_k gives the keys
    sequences = {"batch": batch} if compacted(config) else {}
    return {"cu_seqlens_q": cu_seqlens_q, **keys, "total_q": total_q, **sequences, "o_rows": o_rows}


def paged_arguments(config: AttentionConfig, block_table, pages_per_seq: int, seqused_k, num_pages: int) -> dict:
    """The paged kernel's (``config.page_size``) arguments: the int32 [B, pages_per_seq] block table and the
    int32 [B] key counts (device pointers, or NumPy arrays on the emulator), the table's row length and the
    cache's pages; ``{}`` for other kernels. A packed Q (``config.varlen``) passes ``cu_seqlens_k=None`` to
    ``varlen_arguments`` (left out)."""
    if not config.page_size:
        return {}
    return {"block_table": block_table, "pages_per_seq": pages_per_seq, "seqused_k": seqused_k,
            "num_pages": num_pages}


GATHER_PIECE = 8  # 16-bit elements of the gathered load warp's 16-byte copies: the unit of its cache strides


def gather_arguments(config: AttentionConfig, k_cache, v_cache, k_strides, v_strides) -> dict:
    """The gathered paged kernel's (``config.page_gather``) K and V caches (device pointers, or C-contiguous NumPy
    arrays on the emulator, which places an array behind a pointer contiguously) and their (page, row, head)
    strides in elements (``k_strides``, ``v_strides``); ``{}`` for other kernels, whose k and v are tensor maps.
    The launch's other arguments are the TMA-paged kernel's. The kernel takes the strides in 16-byte pieces (8
    elements; a dimension of size 1 may have any stride, its index is always 0)."""
    if not config.page_gather:
        return {}
    out = {"k": k_cache, "v": v_cache}
    for t, strides in (("k", k_strides), ("v", v_strides)):
        out.update({f"{t}_{dim}_stride": int(s) // GATHER_PIECE for dim, s in zip(("page", "row", "head"), strides)})
    return out


def gqa_arguments(config: AttentionConfig, heads: int, kv_heads: int) -> dict[str, int]:
    """The launch's GQA argument for ``heads`` query heads over ``kv_heads`` K/V heads: ``{"group": heads
    // kv_heads}`` where the kernel takes the group at launch (sm_90a, ``config.runtime_group``), else ``{}``
    (sm_100a compiles the group in: it must be the config's). LaunchError unless kv_heads divides heads, or
    with ``pack_gqa`` unless the group is it (the packed heads are compiled in)."""
    if not isinstance(kv_heads, int) or isinstance(kv_heads, bool) or kv_heads < 1 or heads % kv_heads:
        raise LaunchError(f"attention: kv_heads must be an int >= 1 that divides heads ({heads}), got {kv_heads!r}")
    group = heads // kv_heads
    if config.pack_gqa and group != config.pack_gqa:
        raise LaunchError(f"attention: heads / kv_heads must be the config's pack_gqa ({config.pack_gqa}, the heads "
                          f"packed into a CTA's rows), got {heads} / {kv_heads} = {group}")
    if config.runtime_group:
        return {"group": group}
    if group != config.group:
        raise LaunchError(f"attention: heads / kv_heads must be the config's group ({config.group}, compiled into the "
                          f"{config.target} kernel), got {heads} / {kv_heads} = {group}")
    return {}


def build(config: AttentionConfig) -> KernelSource:
    """The kernel for ``config``: sm_90a goes to ``hopper``; sm_100a is built through ``fa4_mlir.dsl``
    (imported here, so that this package and ``launch_geometry`` import without MLIR)."""
    if config.target == "sm_90a":
        return hopper.build(config)
    if config.is_depth512:  # head dims 256 / 512: the pair-CTA kernel
        from fa4_mlir.kernels.attention import depth512

        return depth512.build(config)
    from fa4_mlir import dsl

    config.validate()
    d = Dims(config)
    g = config.fused_group
    q_box = TensorMapSpec(config.dtype, (BLOCK, g, config.positions, 1), d.swizzle)
    # paged: one chunk of a page (config.page_chunk rows), a K/V tile being bn / chunk loads
    kv_box = TensorMapSpec(config.dtype, (BLOCK, 1, config.page_chunk or d.bn, 1), d.swizzle)
    k = dsl.Kernel(NAME, config.target, NUM_WARPS)
    if config.is_fp8:  # bf16 O in 32-column chunks (64-byte rows); per-token scales: one fp32 per row / key
        o_box = TensorMapSpec(config.out_dtype, (FP8_OUT_CHUNK, g, config.positions, 1), "64B")
        scale_boxes = (TensorMapSpec("fp32", (config.positions, g, 1), "none"),
                       TensorMapSpec("fp32", (d.bn, 1, 1), "none")) if config.token_scales else None
        declare(k, q_box, kv_box, o_box, scale_boxes, fp8=True)
    else:
        declare(k, q_box, kv_box, q_box, varlen=config.varlen, paged=bool(config.page_size), split_kv=config.split_kv,
                gather=config.page_gather, schedule=config.varlen)
    build_roles(k, d)
    grid = f"(ceil(Sq / {config.cta_positions}), H / {g}, B) (launch_geometry)"
    if config.varlen:  # the compacted schedule: slots over every sequence's query tiles (varlen_schedule)
        p = config.cta_positions
        grid = f"(min(ceil(total_q / {p}) + B - 1, B * ceil(max_seqlen_q / {p})), H / {g}, 1) (varlen_geometry)"
    if config.split_kv:
        grid = f"(ceil(Sq / {config.cta_positions}) * num_splits, H / {g}, B) (splitkv.split_geometry)"
    return k.source(grid=grid,
                    config={f: getattr(config, f) for f in CONFIG_FIELDS})


def build_roles(k, d: Dims) -> None:
    """The FA4 kernel's body into ``k`` (its parameters declared): the prologue, both softmax
    warpgroups, the correction warpgroup, the MMA warp and the load warp (also the MLA prefill's)."""
    with k.body() as arg:
        prod, soft = Producers(d, k), Softmax(d, k)
        x = prod.prologue(arg)
        soft.softmax(x, 0)
        soft.softmax(x, 1)
        soft.correction(x)
        prod.mma(x)
        prod.load(x)
