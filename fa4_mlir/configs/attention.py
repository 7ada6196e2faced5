"""AttentionConfig: the attention forward kernel as users pick it (head dim, mask, Q tiles, GQA).

On sm_100a the kernel's resources (tile shape, K/V stages, fused or split K/V ring, barriers, TMEM
map) are those of the reference FA4Config for the same dtype, depth, Q tiles and group: ``fa4``
returns it, so ``fa4-layout`` and the kernel read one derivation. On sm_90a (FA3's structure: two
consumer warpgroups of 64 query rows and a producer warp) ``hopper`` gives the tile and the smem
budget; the tables ``SM90_*`` hold the torch op's choices, which ``attention_op`` makes. No MLIR import.
"""

from __future__ import annotations

import dataclasses
import math

from fa4_mlir.configs.depth512 import Depth512Config
from fa4_mlir.configs.dtypes import dtype as lookup_dtype
from fa4_mlir.configs.fa4 import FA4Config
from fa4_mlir.configs.support import Checked, Support
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import Target

HEAD_DIMS = {"sm_100a": (64, 96, 128), "sm_90a": (64, 96, 128, 192, 256, 512)}  # FA4 (sm_100a) and sm_90a kernels
FP8_HEAD_DIMS = {"sm_100a": (64, 128, 256, 512), "sm_90a": (64, 128, 256)}  # fp8_e4m3 Q, K, V (bf16 O)
DEPTH512_HEAD_DIMS = (256, 512)  # sm_100a: the depth-256/512 pair-CTA kernel (``.depth512``)
MAX_GROUP = 128  # a fused GQA tile holds 128 / group positions of group heads
EXP2_BATCH = 32  # softmax columns per exp2 batch; exp2_emulation counts per batch


SM90_SMEM_BYTES = 232448  # the opt-in shared memory of one CTA on sm_90 (227 KiB)
# keys per K/V tile by head dim: the fastest in bench/attention.py --block-n; at 512 the largest that fits
# (Q 64 KiB + two K and two V stages of 1 KiB a key <= 227 KiB: at most 40 keys)
# (96: the 128 tile, whose second column block TMA half zero-fills; 192: the most keys that fit, 112)
SM90_KV_TILE = {64: 192, 96: 128, 128: 128, 192: 112, 256: 80, 512: 32}
# fp8_e4m3: multiples of 64 (V^T tiles of 64- or 128-key blocks), the fastest at 16k in bench/attention.py
# --dtype fp8 --block-n (docs/PERF.md); at 256 the most that fits (128 at 128 spills)
SM90_FP8_KV_TILE = {64: 256, 128: 192, 256: 128}
# fp8_e4m3: exponentials per 32 by polynomial (exp2_emulation) that the torch op uses, the fastest at 16k in
# bench/attention.py --dtype fp8 --exp2-emulation (docs/PERF.md: d64 +4..9% with 2 of the f32 form, +8% more
# with 4 of the packed f16 one; at 128 and 256 no count beat 0 by more than the run's noise); absent: 0
SM90_FP8_EXP2_EMULATION = {64: 4}
# fp8_e4m3: the head dims whose polynomial exponentials take the packed f16 form (``exp2_f16x2``: two in 10
# instructions, against 8 an exponential in f32; H200, 16k: d64 710 against 660 TFLOP/s for 2 of the f32 form)
SM90_FP8_EXP2_F16X2 = frozenset({64})
# fp8_e4m3: how the tensor core sums P's rows (``HopperTile.row_sums``) over the 8 rows of ones the op appends to
# V^T, instead of one FADD a probability: "columns" (O's P V wgmmas are 8 columns wider; the sums are read out and
# zeroed each tile) where the 4 more accumulator registers fit, "wgmma" (an n8 wgmma a k step, its accumulator
# fresh each tile) at 64 (num_q 3: 160 registers a thread, where "columns" spills and serialises the wgmmas). The
# H100 (docs/PERF.md): 16k non-causal +7% at 128 ("wgmma" +5%), +8% at 64. Absent (256: V^T's TMA box would pass
# 256 rows), and in the persistent walk (its tile loop holds more registers: with the sums ptxas spills at 64):
# the FADDs
SM90_FP8_ROW_SUMS = {64: "wgmma", 128: "columns"}
FP8_SUM_ROWS = 8  # the rows of ones after V^T's head-dim rows (one n8 wgmma's worth)
ROW_SUMS = ("", "columns", "wgmma")  # ``HopperTile.row_sums``
# sm_90a lazy rescale (``AttentionConfig.lazy_rescale``: the consumers rescale O only when a row of the warp
# adopted a larger maximum, the same numbers): the head dims where it was faster in bench/attention.py
# (docs/PERF.md: bf16 d256 and d512, fp8 d128; slower at d64, even at bf16 d128), where O is not rescaled
# before the P V instead (below)
SM90_LAZY_RESCALE = {"bf16": (256, 512), "fp16": (256, 512), "fp8_e4m3": (128,)}
# sm_90a: head dims whose consumers rescale O by the last tile's factors while the next S = Q K' runs, before
# the P V that adds the next P (``AttentionConfig.rescale_before_pv``, FlashAttention-4's RescaleOBeforeGemm,
# which it takes above head dim 128): faster at 256 (+1..5% on 5 of 6 rows), level at 192 (docs/PERF.md);
# the dense kernel only: the serving kernels (varlen, paged) spilled 4-8 bytes with it
SM90_RESCALE_BEFORE_PV = {"bf16": (256,), "fp16": (256,)}
SM90_KV_STAGES = 2
SM90_MAX_KV_STAGES = 8  # AttentionConfig.kv_stages: K and V buffers each (shared memory bounds them first)
SM90_SMS = 132  # the SMs of an H100 SXM: CTAs of the one-tile kernels at work at once
# causal sections (``hopper.section_order``) from this many query tiles a head: below, each head's tiles in turn
# (bench/attention.py --block-n H, docs/PERF.md: sections +2..8% at 4k rows, -4..17% at 512-1k in the runs that
# used them there)
SM90_SECTION_MIN_TILES = 32
SM90_SECTION_MIN_HEAD_DIM = 128  # and from this (padded) head dim: at 64, sections were 0.5-7% slower at 4k-16k
CAUSAL_ORDERS = ("sections", "heads")  # ``AttentionConfig.causal_order``
# sm_90a consumer warpgroups of 64 query rows (``num_q``): 3 (a 192-row CTA tile, FA3's at head dim 64) only
# where 160 registers a consumer thread (3 x 128 x 160 + 128 x 32 = 65536) hold S, O and P without spills
SM90_NUM_Q_HEAD_DIMS = {2: (64, 96, 128, 192, 256, 512), 3: (64,)}
SM90_NUM_Q3_MAX_BN = 128  # num_q 3: the most keys per tile whose S fits (ptxas spills at 144 and up), the default
# the num_q the torch op (and the artifacts built for it) use per (dtype, head dim, causal), the faster in
# bench/attention.py --block-n 3x128 (docs/PERF.md, H100: fp8 +2..7%; 16-bit non-causal +4..9% at 1k and 4k,
# -1..2% at 16k; 16-bit causal, with one wgmma descriptor an operand: +12% at 4k, +3% at 16k, -8% at 1k, where
# SM90_SHORT_TILE takes over); absent: 2
SM90_NUM_Q: dict[tuple[str, int, bool], int] = {("bf16", 64, False): 3, ("fp16", 64, False): 3,
                                                ("bf16", 64, True): 3, ("fp16", 64, True): 3,
                                                ("fp8_e4m3", 64, False): 3, ("fp8_e4m3", 64, True): 3}
# sm_90a tiles (num_q, block_n) the torch op takes instead for at most SM90_SHORT_KEYS keys (SM90_SHORT_TILE_KEYS
# where it names its own), per (dtype, head dim, causal): the faster in bench/attention.py --seqlens
# 1024,2048,4096,8192 --block-n 128 (docs/PERF.md, H100: d64 causal 128 keys a tile +13% at 1k, +3% at 2k, level at
# 4k; the default's 192 keys waste more on the diagonal; fp8 d128, 128 keys against 192, up to 4k keys: causal
# +3..46% at 2k, +1..9% at 4k, non-causal level at 2k, +1..4% at 4k; from 8k level causal, 4-6% slower non-causal)
SM90_SHORT_KEYS = 2048
SM90_SHORT_TILE: dict[tuple[str, int, bool], tuple[int, int]] = {("bf16", 64, True): (2, 128),
                                                                 ("fp16", 64, True): (2, 128),
                                                                 ("fp8_e4m3", 128, False): (2, 128),
                                                                 ("fp8_e4m3", 128, True): (2, 128)}
SM90_SHORT_TILE_KEYS = {("fp8_e4m3", 128, False): 4096, ("fp8_e4m3", 128, True): 4096}  # absent: SM90_SHORT_KEYS
# the sm_90a kernels the torch op takes as the persistent tile walk (``AttentionConfig.persistent``) for at most
# this many keys, per (dtype, head dim, causal): a CTA's start and its end overlap the next tile's loads
# (docs/PERF.md, H100, against the grid of tiles: head dim 128 +15% at 512 keys, +9% at 1k, +4% at 2k, +1% at 4k,
# -5% at 16k; causal +2..5% at 512, +8% at 1k, +7% at 2k, -7% at 4k; head dim 64 non-causal, three consumer
# warpgroups, +11% at 512, +3% at 1k, -2% at 2k; causal, its 128-key tile, -2% at 512, +7% at 1k, +4% at 2k).
# Not at head dim 96 (0.97-0.99 up to 2k)
SM90_PERSISTENT_KEYS: dict[tuple[str, int, bool], int] = {
    (dt, d, c): keys for dt in ("bf16", "fp16") for d, c, keys in ((64, False, 1024), (64, True, 2048),
                                                                   (128, False, 2048), (128, True, 2048))}
# the walk's own (num_q, block_n) by length, where it differs from ``attention_op.default_tile``'s: steps of (at most
# this many keys, tile) per (dtype, head dim, causal). docs/PERF.md, H100 (64 keys at head dim 128: +8..9% at 512
# keys, -2% at 1k) and H200 with one K/V loop: head dim 128 causal 64 keys +5% at 512 keys (the B32 H16 batch), 128
# keys +4% at 1k (level at 2k); head dim 64 causal 64 keys +4% at 512. The serving kernels keep theirs
SM90_WALK_SHORT_TILE: dict[tuple[str, int, bool], tuple[tuple[int, tuple[int, int]], ...]] = {
    **{(dt, 128, True): ((512, (2, 64)), (1024, (2, 128))) for dt in ("bf16", "fp16")},
    **{(dt, 64, True): ((512, (2, 64)),) for dt in ("bf16", "fp16")}}
# the walks that take one K/V loop, the mask tested each tile (``AttentionConfig.single_kv_loop``): the causal ones.
# docs/PERF.md, H200, against the unmasked tiles' own loop: head dim 64 +21% at 512 keys, +10% at 1k, +1% at 2k;
# head dim 128 +2..5% at 512, +4% at 1k, level at 2k (the consumers' code a third smaller: ncu counted 12% of
# their cycles waiting for instructions, 24% in the first tile's softmax). Not non-causal (-2..3%), nor the grid
# (head dim 256 causal at 1k: -8%)
SM90_WALK_SINGLE_LOOP = frozenset((dt, d, True) for dt in ("bf16", "fp16") for d in (64, 128))
# the one-tile kernels whose consumer warpgroups run one copy of their code (``AttentionConfig.one_consumer_role``):
# from this many keys, by (head dim, causal), every dtype. docs/PERF.md, H200, two processes of interleaved rounds
# against a role each: at 16k keys +3..5% at head dim 128 (both masks), 256 causal +2% (+4% at 4k), 256 non-causal
# -2..+6%, fp8 256 +1..4%; below, level or 1..5% slower (the warpgroup index costs each CTA a little; one copy of
# the code gains a little each K/V tile). Not head dim 64 (three warpgroups: 1..3% slower, though ncu counts 0.8% of
# its samples waiting for instructions against 3.2%), nor the walks and serving kernels (not built for them)
SM90_ONE_CONSUMER_ROLE_KEYS: dict[tuple[int, bool], int] = {(128, False): 16384, (128, True): 16384,
                                                              (256, False): 16384, (256, True): 4096}
PAGE_MULTIPLE = 16  # TMA loads a paged K/V tile in chunks of whole multiples of this (sm_100a: powers of two)
BLOCK_COLS = 64  # sm_90a: 16-bit columns of one 128-byte swizzle block
SM90_SPLIT_O_HEAD_DIM = 512  # from this head dim on, O (64 x D fp32) is too big for one warpgroup's registers
SM90_PACK_GQA_MAX = 64  # sm_90a pack_gqa: the most heads a consumer warpgroup's 64 rows hold (one position)
SM90_PACK_GQA_ROWS = 128  # sm_90a pack_gqa: a paged CTA's rows (num_q 2), which Sq x group must fit to pack


@dataclasses.dataclass(frozen=True)
class HopperTile:
    """The sm_90a attention tile: ``bm`` query rows (a consumer warpgroup per 64: 128, or 192 at head
    dim 64), ``bn`` keys per
    K/V tile, ``stages`` K and V buffers each, Q resident (and reused for O); bf16/fp16 elements.
    From head dim 512 (``split_o``) the tile is 64 rows, which both warpgroups share. fp8 (``elem_bytes``
    1): Q, K and V^T tiles of 1-byte elements, and O (bf16, twice Q's bytes) in a region of its own;
    with ``token_scales`` the q scales of the tile and a k-scale buffer per K stage (fp32); with ``row_sums``
    each V^T key block ends in ``sum_rows`` rows of ones, over which the P V wgmmas sum P's rows
    (``hopper_fp8``). ``persistent``: a CTA per resident slot walks the tiles (``hopper.py``), with O in a
    region of its own."""

    head_dim: int
    bn: int
    bm: int = 128
    stages: int = SM90_KV_STAGES
    elem_bytes: int = 2
    token_scales: bool = False
    persistent: bool = False
    row_sums: str = ""  # fp8: "columns" or "wgmma" (SM90_FP8_ROW_SUMS); "": the softmax's FADDs

    def __post_init__(self):
        if self.row_sums not in ROW_SUMS or (self.row_sums and not self.fp8):
            raise ConfigError(f"HopperTile.row_sums must be one of {', '.join(map(repr, ROW_SUMS))} ('' unless "
                              f"elem_bytes is 1: fp8 sums P's rows on the tensor core), got {self.row_sums!r}")

    @property
    def fp8(self) -> bool:
        return self.elem_bytes == 1

    @property
    def row_bytes(self) -> int:
        """Bytes of one swizzled row of a Q/K tile block (the swizzle width): 128, or 64 for fp8 head dim 64."""
        return min(128, self.head_dim * self.elem_bytes)

    @property
    def v_row_bytes(self) -> int:
        """Bytes of one swizzled row of a V tile block; fp8 (V^T, rows of keys): 128 when 128 keys divide
        ``bn``, else 64."""
        return 64 if self.fp8 and self.bn % 128 else 128

    @property
    def o_bytes(self) -> int:
        """fp8, or persistent: the O tile's own region, 16-bit (0: O goes over the dead Q). A persistent CTA
        loads the next tile's Q while the last one's O is written and stored."""
        return self.bm * self.head_dim * 2 if self.fp8 or self.persistent else 0

    @property
    def k_scale_bytes(self) -> int:
        """Per-token scales: one K stage's fp32 k scales (its ``bn`` keys)."""
        return self.bn * 4 if self.token_scales else 0

    @property
    def q_scale_bytes(self) -> int:
        return self.bm * 4 if self.token_scales else 0

    @property
    def consumers(self) -> int:
        """Consumer warpgroups: one per 64 rows of ``bm``; split O: two on the same 64 rows."""
        return 2 if self.split_o else self.bm // 64

    @property
    def split_o(self) -> bool:
        """Both consumer warpgroups own the same 64 rows and each accumulates half of O's columns (``bm`` 64)."""
        return self.head_dim >= SM90_SPLIT_O_HEAD_DIM

    @property
    def q_bytes(self) -> int:
        return self.bm * self.head_dim * self.elem_bytes

    @property
    def q_stages(self) -> int:
        """Q's buffers: 2 in the persistent walk where they fit (the next tile's Q loads while this one's last
        S = Q K' is computed; per-token scales keep one, their q scales ride on Q's barrier), else 1."""
        one = self.q_bytes + self.o_bytes + self.stages * (self.kv_stage_bytes + self.v_stage_bytes) + 1024
        two = self.persistent and not self.token_scales and one + self.q_bytes <= SM90_SMEM_BYTES
        return 2 if two else 1

    @property
    def kv_stage_bytes(self) -> int:
        return self.bn * self.head_dim * self.elem_bytes

    @property
    def sum_rows(self) -> int:
        """V^T's rows of ones after its head-dim rows, with ``row_sums`` (``FP8_SUM_ROWS``), else 0."""
        return FP8_SUM_ROWS if self.row_sums else 0

    @property
    def v_stage_bytes(self) -> int:
        """A V stage: as a K stage, and V^T's rows of ones (the MLA kernel's prefill form has narrower V stages)."""
        return self.kv_stage_bytes + self.bn * self.sum_rows * self.elem_bytes

    @property
    def smem_bytes(self) -> int:
        """Q (``q_stages`` buffers), the K and V rings and the barriers (with the 1024-byte alignment of each
        tile); fp8 and persistent: O; per-token scales: the scale buffers."""
        scales = self.q_scale_bytes + self.stages * self.k_scale_bytes
        return self.q_stages * self.q_bytes + self.o_bytes + self.stages * (self.kv_stage_bytes + self.v_stage_bytes) \
            + scales + 1024

    def supported(self) -> Support:
        if self.smem_bytes > SM90_SMEM_BYTES:
            return Support(False, f"shared memory must be <= {SM90_SMEM_BYTES} bytes, got {self.smem_bytes}")
        return Support(True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionConfig(Checked):
    """One attention forward kernel: softmax(scale * Q K') V for Q (B, Sq, H, D), K/V (B, Sk, H/group, D).

    sm_100a, ``num_q = 2``: a CTA owns 256 query rows as two 128-row halves Q0/Q1, one per softmax warpgroup;
    ``num_q = 1``: 128 rows, softmax warpgroup 0 takes the even K/V tiles and 1 the odd ones. ``group > 1`` is
    GQA; when it divides 128 the heads sharing a K/V head share the CTA (rows = 128 / group positions x group
    heads). ``exp2_emulation`` of every 32 exponentials use a degree-3 polynomial on the FMA pipe instead of
    ``ex2.approx`` (0: none). On sm_90a a CTA owns 64 query rows of one head per consumer warpgroup (``num_q`` 2,
    or 3 at head dim 64: 128 or 192 rows), and exp2 is ``ex2.approx`` (fp8: ``exp2_emulation`` as on sm_100a, or
    in packed f16 with ``exp2_f16x2``; ``attention_op.default_exp2`` is the op's choice); at head dim 512 it owns
    64 rows, and each consumer warpgroup accumulates half of O's columns. The sm_90a kernel takes the group at
    launch (``runtime_group``: its ``group`` parameter), so there ``group`` only describes the call: every group
    runs the kernel of ``canonical()`` (group 1).

    ``varlen``: Q, K, V and O are packed (total, heads, D): sequence b's queries are rows
    [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and its keys rows [cu_seqlens_k[b], cu_seqlens_k[b + 1]) (int32
    prefix sums, launch arguments); the grid's batch enumerates sequences and its query tiles cover the
    longest. Causal is bottom-right aligned per sequence (FlashAttention's: query i of Sq sees keys
    j <= i + Sk - Sq); a row that sees no key gets O = 0 and LSE = +inf. The LSE is (H, total_q).

    ``page_size``: K and V are a paged cache (num_pages, page_size, Hk, D); sequence b holds ``seqused_k[b]`` keys,
    key j in row j % page_size of page ``block_table[b, j // page_size]`` (launch arguments). Q is dense (B, Sq, H,
    D), or packed with ``varlen`` (then ``cu_seqlens_k`` is not used). Causal is aligned bottom-right as with
    ``varlen``. Which sizes, and how K/V tiles are loaded:
      - sm_100a, powers of two from 16 (16, 32, 64, 128, 256, ...; but 16 with num_q 1 at head dim 64): TMA loads
        each K/V tile in chunks of gcd(keys a tile, page_size) rows, each inside one page.
      - sm_90a, multiples of 16 (at head dims 192/256: powers of two from 32): TMA, in chunks as on sm_100a.
      - every other size >= 1 (1, 8, 24, 40, 100, 255, ...; sm_100a: also 16 with num_q 1 at head dim 64; sm_90a at
        head dims 192/256: also 16, 48, 80, ...): gathered row by row (``page_gather``: the load warp's cp.async into
        the TMA layout, ``hopper_gather`` / ``gather``), K and V passed as pointers with their strides.

    ``pack_gqa`` (sm_90a, paged, dense Q: the decode form): the ``pack_gqa`` query heads of one K/V head share
    the CTA's rows (FlashAttention's pack_gqa): each consumer warpgroup's 64 rows are 64 / pack_gqa positions x
    pack_gqa heads (row r: position r / pack_gqa of head kvh * pack_gqa + r % pack_gqa), so a decode step (Sq 1)
    fills the rows with heads instead of 127 empty positions, and reads each K/V tile once per K/V head. The
    launch's group must be ``pack_gqa`` (compiled in); 0: one head a CTA.

    ``split_kv`` (paged, dense Q: decode): the grid also enumerates ranges of each sequence's keys
    (``num_splits`` ranges of ``split_keys``, launch arguments: ``fa4_mlir.kernels.attention.splitkv``), so a
    small batch fills the SMs. Each CTA writes its rows' O normalised over its range's keys and their LSE, in
    fp32 (a row without a key in the range: O 0, LSE -inf); the "attention-combine" kernel merges the ranges.

    ``one_consumer_role`` (sm_90a one-tile kernels below head dim 512): the consumer warpgroups are one
    ``fa4.warp_role`` over their warps, one copy of their code (FlashAttention-4's): each takes its warpgroup
    index from the thread index at run time, and with it its rows, its Q and O buffers and its turn barriers (a
    family of named barriers). Without it each warpgroup is a role of its own, its code a copy of the others'
    (two or three copies: the instruction cache holds less of the K/V loop).

    ``causal_order`` (sm_90a, causal, one tile a CTA, contiguous K/V): the order in which the launch's CTAs take
    the query tiles. "sections" (the default): from ``SM90_SECTION_MIN_TILES`` query tiles a head and head dim
    ``SM90_SECTION_MIN_HEAD_DIM``, the heads in sections of the fewest whose tiles make two waves of CTAs, the
    longest rows first across a section's heads (``hopper.section_order``); else each head's tiles in turn.
    "heads": each head's tiles in turn, its longest rows first, everywhere (the order before; kept to measure
    against).
    """

    target: str = "sm_100a"
    dtype: str = "bf16"
    head_dim: int = 128
    causal: bool = False
    num_q: int = 2
    group: int = 1
    exp2_emulation: int = 0
    exp2_f16x2: bool = False  # sm_90a fp8: the polynomial exponentials two at a time in packed f16 (exp2.py)
    block_n: int = 0  # sm_90a: keys per K/V tile (0: SM90_KV_TILE of the head dim)
    kv_stages: int = 0  # sm_90a: K and V buffers each, the load warp's lead (0: SM90_KV_STAGES)
    single_kv_loop: bool = False  # sm_90a: one K/V loop testing the mask each tile, no loop of the unmasked tiles
    one_consumer_role: bool = False  # sm_90a: one copy of the consumers' code for every warpgroup (see below)
    token_scales: bool = False  # fp8: per-token Q and K dequantization scales (else tensor-wise)
    persistent: bool = False  # sm_90a: one CTA per resident slot walks the tiles (``HopperTile.persistent``)
    varlen: bool = False  # packed variable-length sequences (``cu_seqlens_q`` / ``cu_seqlens_k``; see below)
    page_size: int = 0  # keys per page of a paged K/V cache (``block_table``; see below); 0: K/V contiguous
    pack_gqa: int = 0  # sm_90a paged, dense Q: query heads of one K/V head packed into a CTA's rows (see below)
    split_kv: bool = False  # paged, dense Q: key ranges over more CTAs, fp32 partials to combine (see below)
    causal_order: str = "sections"  # sm_90a causal one-tile kernel with contiguous K/V: the order of its tiles

    def __post_init__(self):
        lookup_dtype(self.dtype, field="AttentionConfig.dtype", allowed=("bf16", "fp16", "fp8_e4m3"))
        Target.parse(self.target)
        dims = HEAD_DIMS[self.target] + (() if self.target == "sm_90a" else DEPTH512_HEAD_DIMS)
        hopper = self.target == "sm_90a"
        min_bn = 32 if self.head_dim >= SM90_SPLIT_O_HEAD_DIM else 64  # d512: shared memory allows 40 keys
        deep = self.is_depth512
        rules = (
            ("head_dim", self.head_dim in dims, f"one of {', '.join(map(str, dims))} on {self.target}"),
            ("causal", isinstance(self.causal, bool), "True or False"),
            ("num_q", (type(self.num_q) is int and self.head_dim in SM90_NUM_Q_HEAD_DIMS.get(self.num_q, ()))
             if hopper else self.num_q == 2 if deep else self.num_q in (1, 2),
             f"2, or 3 at head dim {', '.join(map(str, SM90_NUM_Q_HEAD_DIMS[3]))}, on sm_90a (consumer warpgroups "
             f"of 64 rows; three fit 160 registers a thread)" if hopper else
             "2 for head dim 256/512 (one pair tile; num_q does not apply)" if deep else "1 (BM 128) or 2 (BM 256)"),
            ("group", isinstance(self.group, int) and 1 <= self.group <= MAX_GROUP,
             f"in [1, {MAX_GROUP}] (query heads per K/V head)"),
            ("exp2_emulation", self.exp2_emulation == 0 if (hopper and not self.is_fp8) or deep else
             0 <= self.exp2_emulation <= EXP2_BATCH and self.exp2_emulation % 2 == 0,
             "0 on sm_90a unless dtype is fp8_e4m3 (only the fp8 kernel has a polynomial exp2 there)"
             if hopper and not self.is_fp8 else
             "0 for head dim 256/512 (the depth-512 kernel has no polynomial exp2)" if deep else
             f"even and in [0, {EXP2_BATCH}] (exponentials per {EXP2_BATCH} computed by polynomial)"),
            ("exp2_f16x2", isinstance(self.exp2_f16x2, bool) and (not self.exp2_f16x2 or hopper and self.is_fp8
                                                                     and self.exp2_emulation > 0),
             "False unless target is sm_90a, dtype fp8_e4m3 and exp2_emulation > 0 (the packed form of the fp8 "
             "consumer's polynomial exponentials, whose P is rounded to e4m3)"),
            ("block_n", (self.block_n == 0 or (self.block_n % 16 == 0 and min_bn <= self.block_n <= 256)) if hopper
             else self.block_n == 0,
             f"0 (the head dim's default) or a multiple of 16 in [{min_bn}, 256] on sm_90a" if hopper
             else "0 on sm_100a (the reference layout picks BN)"),
            ("kv_stages", type(self.kv_stages) is int and (self.kv_stages == 0 or hopper and 2 <= self.kv_stages
                                                            <= SM90_MAX_KV_STAGES),
             f"0 (the default, {SM90_KV_STAGES}) or in [2, {SM90_MAX_KV_STAGES}] on sm_90a (K and V buffers each)"
             if hopper else "0 on sm_100a (the reference layout picks the stages)"),
            ("single_kv_loop", isinstance(self.single_kv_loop, bool) and (hopper or not self.single_kv_loop),
             "False unless target is sm_90a (its consumers' K/V loops)"),
            ("kv_stages", not (self.kv_stages and (self.varlen or self.page_size)),
             "0 with varlen or a paged K/V cache (the serving kernels keep their stages)"),
            ("single_kv_loop", not (self.single_kv_loop and (self.varlen or self.page_size)),
             "False with varlen or a paged K/V cache (the serving kernels keep their loops)"),
            ("block_n", not (hopper and self.num_q == 3) or self.block_n <= SM90_NUM_Q3_MAX_BN,
             f"<= {SM90_NUM_Q3_MAX_BN} with num_q 3 on sm_90a (160 registers a consumer thread: larger S tiles spill)"),
            ("one_consumer_role", isinstance(self.one_consumer_role, bool) and (not self.one_consumer_role or (
                hopper and not (self.persistent or self.varlen or self.page_size)
                and self.head_dim < SM90_SPLIT_O_HEAD_DIM)),
             f"False unless target is sm_90a, below head dim {SM90_SPLIT_O_HEAD_DIM}, without persistent, varlen or a "
             "paged K/V cache (the one-tile kernels' consumers)"),
            ("persistent", isinstance(self.persistent, bool) and (hopper or not self.persistent),
             "False unless target is sm_90a (the persistent tile walk is the sm_90a kernel's)"),
            ("persistent", not (self.persistent and self.head_dim >= SM90_SPLIT_O_HEAD_DIM),
             f"False at head dim {SM90_SPLIT_O_HEAD_DIM} (both warpgroups share one 64-row tile there)"),
            ("varlen", isinstance(self.varlen, bool), "True or False"),
            ("varlen", not self.varlen or not (self.is_fp8 or self.persistent or deep
                                               or self.head_dim >= SM90_SPLIT_O_HEAD_DIM),
             "False with fp8_e4m3, persistent, or head dim 256/512 on sm_100a or 512 on sm_90a (packed "
             "variable-length sequences are built for the 16-bit one-tile kernels)"),
            ("page_size", type(self.page_size) is int and self.page_size >= 0,
             "0 (contiguous K/V) or >= 1 (pages TMA cannot load are gathered row by row: ``page_gather``)"),
            ("page_size", not self.page_size or not (self.is_fp8 or self.persistent or deep
                                                    or self.head_dim >= SM90_SPLIT_O_HEAD_DIM),
             "0 with fp8_e4m3, persistent, or head dim 256/512 on sm_100a or 512 on sm_90a (the paged K/V cache is "
             "built for the 16-bit one-tile kernels)"),
            # a sweep of sm_100a's gathered configs (head dims x masks x Q layouts x split x groups x pages): only these
            ("num_q", hopper or not (self.split_kv and self.causal and self.head_dim == 64 and self.num_q == 1
                                     and self.page_gather),
             "2 for a causal split KV over gathered pages (``page_gather``) at head dim 64 on sm_100a (with 1Q ptxas "
             "spills registers of the kernel's prologue there)"),
            ("num_q", not (hopper and self.page_size and self.num_q == 3),
             "2 with a paged K/V cache on sm_90a (three consumer warpgroups leave the load warp 32 registers, and "
             "its paged loads spill)"),
            ("pack_gqa", type(self.pack_gqa) is int and (self.pack_gqa == 0 or (
                2 <= self.pack_gqa <= SM90_PACK_GQA_MAX and SM90_PACK_GQA_MAX % self.pack_gqa == 0)),
             f"0 (a head a CTA) or a power of two in [2, {SM90_PACK_GQA_MAX}] (query heads per K/V head packed into "
             f"a consumer warpgroup's {SM90_PACK_GQA_MAX} rows)"),
            ("pack_gqa", not self.pack_gqa or (hopper and self.page_size and not self.varlen),
             "0 unless target is sm_90a with a paged K/V cache (page_size > 0) and dense Q (varlen False): the "
             "decode form packs the heads of a K/V head"),
            ("group", not self.pack_gqa or self.group in (1, self.pack_gqa),
             f"1 or pack_gqa ({self.pack_gqa}) with pack_gqa (the packed heads are the group's)"),
            ("split_kv", isinstance(self.split_kv, bool)
             and (not self.split_kv or (self.page_size and not self.varlen)),
             "False unless the K/V cache is paged (page_size > 0) and Q dense (varlen False): split KV is the decode "
             "form's"),
            ("token_scales", isinstance(self.token_scales, bool) and (self.is_fp8 or not self.token_scales),
             "False unless dtype is fp8_e4m3 (per-token scales dequantize fp8 Q and K)"),
            ("token_scales", not (self.token_scales and self.target == "sm_100a" and self.group > 32
                                  and 128 % self.group == 0),
             "False for group 64 or 128 on sm_100a (a tile holds 128 / group positions of a head: its q_scale "
             "TMA row of that many fp32 must be >= 16 bytes)"),
            ("head_dim", not self.is_fp8 or self.head_dim in FP8_HEAD_DIMS[self.target],
             f"one of {', '.join(map(str, FP8_HEAD_DIMS[self.target]))} for fp8_e4m3 on {self.target}"),
            ("token_scales", not (deep and self.token_scales),
             "False for head dim 256/512 on sm_100a (the depth-512 kernel takes tensor-wise fp8 scales)"),
            ("block_n", not (hopper and self.is_fp8) or self.block_n % 64 == 0,
             "0 or a multiple of 64 for fp8_e4m3 on sm_90a (V^T tiles are 64- or 128-key swizzle blocks)"),
        )
        rules += (
            ("causal_order", self.causal_order in CAUSAL_ORDERS and (self.causal_order == "sections" or (
                hopper and self.causal and not self.persistent and not self.serving)),
             "'sections' (the longest rows first across the heads of each section), or 'heads' (each head's rows "
             "in turn) for a causal sm_90a kernel that is not persistent, paged or varlen"),
        )
        for name, ok, expected in rules:
            if not ok:
                raise ConfigError(f"AttentionConfig.{name} must be {expected}, got {getattr(self, name)!r}")

    @property
    def serving(self) -> bool:
        """Per-sequence lengths read at launch (``varlen`` or ``page_size``): causal is aligned bottom-right,
        and a row may see no key."""
        return self.varlen or self.page_size > 0

    @property
    def page_gather(self) -> bool:
        """Whether the paged K/V tiles are gathered row by row (cp.async by the whole load warp into the layout TMA
        would write: ``hopper_gather`` on sm_90a, ``gather`` on sm_100a) instead of TMA-loaded in chunks: for pages
        TMA cannot load or whose chunk loads spilled the load warp (ptxas 13.0). sm_100a: every size but the powers
        of two from 16, and pages of 16 with num_q 1 at head dim 64 (12 chunks a tile there). sm_90a: sizes not a
        multiple of 16 keys and, at head dims 192 and 256, those not a power of two or of 16 keys. False unless
        paged."""
        if not isinstance(self.page_size, int) or self.page_size <= 0:
            return False
        power = self.page_size & (self.page_size - 1) == 0
        if self.target == "sm_100a":
            chunked = power and self.page_size >= PAGE_MULTIPLE
            return not chunked or (self.page_size == PAGE_MULTIPLE and self.head_dim == 64 and self.num_q == 1)
        tma = self.page_size % PAGE_MULTIPLE == 0 and (self.head_dim <= 128 or (
            power and self.page_size > PAGE_MULTIPLE))
        return not tma

    @property
    def page_chunk(self) -> int:
        """Keys a paged K/V tile's TMA load takes from one page: gcd(keys a tile, page_size); 0 if not paged or
        gathered (``page_gather``)."""
        if not self.page_size or self.page_gather:
            return 0
        bn = self.hopper.bn if self.target == "sm_90a" else self.fa4.bn
        return math.gcd(bn, self.page_size)

    @property
    def is_fp8(self) -> bool:
        """fp8 e4m3 Q, K and V with dequantization scales; the output is bf16."""
        return self.dtype == "fp8_e4m3"

    @property
    def lazy_rescale(self) -> bool:
        """sm_90a: whether the consumers skip O's rescale when no row of a warp adopted a larger maximum
        (``SM90_LAZY_RESCALE``, unless ``rescale_before_pv``; sm_100a's softmax always does, through its
        correction warpgroup)."""
        return (self.target == "sm_90a" and self.head_dim in SM90_LAZY_RESCALE.get(self.dtype, ())
                and not self.rescale_before_pv)

    @property
    def rescale_before_pv(self) -> bool:
        """sm_90a: whether the consumers rescale O by the last tile's factors while the next S = Q K' runs,
        before the P V wgmma that reads O (``SM90_RESCALE_BEFORE_PV``; the dense kernel), not after the
        softmax."""
        return (self.target == "sm_90a" and self.head_dim in SM90_RESCALE_BEFORE_PV.get(self.dtype, ())
                and not self.serving)

    @property
    def out_dtype(self) -> str:
        """The output's element type: bf16 for fp8 inputs, else the input's."""
        return "bf16" if self.is_fp8 else self.dtype

    @property
    def is_depth512(self) -> bool:
        """sm_100a with head dim 256 or 512: the depth-256/512 pair-CTA kernel."""
        return self.target == "sm_100a" and self.head_dim in DEPTH512_HEAD_DIMS

    @property
    def depth512(self) -> Depth512Config:
        """The reference configuration of the depth-256/512 pair-CTA kernel (head dim 256 or 512)."""
        if not self.is_depth512:
            raise ConfigError(f"AttentionConfig.depth512 is the sm_100a head dim 256/512 layout; head_dim must be "
                              f"256 or 512 on sm_100a, got {self.head_dim} on {self.target}")
        return Depth512Config(dtype=self.dtype, qk_depth=self.head_dim, group=self.group)

    @property
    def fa4(self) -> FA4Config:
        """The reference configuration whose layout the sm_100a kernel uses."""
        if self.target != "sm_100a":
            raise ConfigError(f"AttentionConfig.fa4 is the sm_100a layout; target must be sm_100a, got "
                              f"'{self.target}' (use .hopper)")
        if self.is_depth512:
            raise ConfigError(f"AttentionConfig.fa4 is the FA4 layout; head_dim must be one of "
                              f"{', '.join(map(str, HEAD_DIMS['sm_100a']))}, got {self.head_dim} (use .depth512)")
        return FA4Config(dtype=self.dtype, qk_depth=self.head_dim, num_q=self.num_q, group=self.group,
                         scale_dtype="fp32" if self.token_scales else None, page_gather=self.page_gather)

    @property
    def hopper(self) -> HopperTile:
        """The sm_90a kernel's tile and shared-memory plan."""
        if self.target != "sm_90a":
            raise ConfigError(f"AttentionConfig.hopper is the sm_90a tile; target must be sm_90a, got '{self.target}'")
        # a consumer warpgroup per 64 rows; split O: one 64-row tile per CTA, which both warpgroups share
        bm = 64 if self.head_dim >= SM90_SPLIT_O_HEAD_DIM else 64 * self.num_q
        default_bn = SM90_NUM_Q3_MAX_BN if self.num_q == 3 else \
            (SM90_FP8_KV_TILE if self.is_fp8 else SM90_KV_TILE)[self.head_dim]
        stages = self.kv_stages or SM90_KV_STAGES
        if self.is_fp8:
            return HopperTile(self.head_dim, self.block_n or default_bn, bm, stages, elem_bytes=1,
                              token_scales=self.token_scales, persistent=self.persistent,
                              row_sums="" if self.persistent else SM90_FP8_ROW_SUMS.get(self.head_dim, ""))
        # Q, K, V and O tiles are whole 64-column blocks: head dim 96 is computed as 128, TMA zero-filling
        # the columns past the tensors' 96 on loads and clipping them on O's store
        padded = -(-self.head_dim // BLOCK_COLS) * BLOCK_COLS
        return HopperTile(padded, self.block_n or default_bn, bm, stages, persistent=self.persistent)

    @property
    def runtime_group(self) -> bool:
        """Whether the kernel takes the group as a launch argument (its i32 ``group`` parameter) rather
        than compiling it in: sm_90a, where a CTA holds one head and only the K/V head it reads depends
        on the group. On sm_100a GQA may fuse the group's heads into one tile, whose shape depends on it."""
        return self.target == "sm_90a"

    def canonical(self) -> AttentionConfig:
        """The config that names this one's kernel: with ``runtime_group``, the same config at group 1
        (configs that differ only in group share one kernel and one artifact); else ``self``."""
        return dataclasses.replace(self, group=1) if self.runtime_group and self.group != 1 else self

    @property
    def fused_group(self) -> int:
        """Heads that share one CTA's rows: ``group`` when it divides the 128 rows (sm_100a); sm_90a:
        ``pack_gqa`` when set, else 1 (a CTA holds one head, and the heads of a group read the same K/V tiles
        from L2)."""
        if self.pack_gqa:
            return self.pack_gqa
        if self.is_depth512:  # each CTA of the pair holds BM rows: whole positions of the group's heads
            f = self.depth512
            return self.group if f.fuse_gqa and f.bm % self.group == 0 else 1
        return self.group if self.target == "sm_100a" and self.fa4.fuse_gqa else 1

    @property
    def rows(self) -> int:
        """Query rows of one softmax (sm_100a, TMEM lanes) or consumer (sm_90a) warpgroup."""
        if self.is_depth512:
            return self.depth512.bm
        return 128 if self.target == "sm_100a" else 64

    @property
    def positions(self) -> int:
        """Sequence positions of one 128-row tile (fewer than 128 with fused GQA)."""
        return self.rows // self.fused_group

    @property
    def cta_positions(self) -> int:
        """Positions of the tile one CTA (a CTA pair for head dim 256/512 on sm_100a) computes."""
        if self.target == "sm_90a" and self.hopper.split_o:  # both warpgroups own the same 64 rows
            return self.positions
        return self.positions * (2 if self.is_depth512 else self.num_q)

    def supported(self) -> Support:
        if self.is_depth512:
            return self.depth512.supported()
        return self.fa4.supported() if self.target == "sm_100a" else self.hopper.supported()

    def describe(self) -> str:
        return (f"AttentionConfig {self.target} {self.dtype} d{self.head_dim} {self.num_q}Q"
                + (" persistent" if self.persistent else "") + (" token-scales" if self.token_scales else "")
                + (" varlen" if self.varlen else "") + (f" paged {self.page_size}" if self.page_size else "")
                + (f" pack_gqa {self.pack_gqa}" if self.pack_gqa else "") + (" split_kv" if self.split_kv else "")
                + (" causal" if self.causal else "") + (f" group {self.group}" if self.group > 1 else "")
                + (f" {self.causal_order} order" if self.causal_order != "sections" else "")
                + (f" {self.kv_stages} K/V stages" if self.kv_stages else "")
                + (" one K/V loop" if self.single_kv_loop else "")
                + (" one consumer role" if self.one_consumer_role else "")
                + (f" {self.exp2_emulation}/32 exp2 by f16x2 polynomial" if self.exp2_f16x2 else ""))
