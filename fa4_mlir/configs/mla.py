"""MLAConfig: multi-head latent attention (DeepSeek-V2/V3) forward on sm_90a and sm_100a, as users pick it.

Two forms of the same attention (the model's ``q_nope`` / ``k_nope`` depth 128, rope 64, latent 512):

* ``absorbed`` (decode; FlashMLA's form): the K up-projection is absorbed into the query, so the
  logits are ``q_nope . kv_latent' + q_rope . k_rope'`` (depth 512 + 64 = 576) and the values are the
  latent itself (512): K's first 512 columns and V are ONE buffer (``kv_latent``), read once into
  shared memory. One latent head serves every query head (MQA), so a tile's 64 rows pack
  ``tile_heads`` heads x ``64 / tile_heads`` positions (a decode step with Sq = 1 fills the rows with
  heads instead of wasting 63 of 64).
* ``prefill``: per-head ``k_nope`` (128) and ``v`` (128) with ``k_rope`` (64) per K/V head: attention of
  depth 192 with values of 128, the sm_90a attention's 128-row tile (two consumer warpgroups of 64
  rows, each its own O), separate K (192 columns) and V (128) rings.

On sm_100a the absorbed form is the depth-512 pair-CTA kernel with a rope chunk (``depth512``:
``Depth512Config(qk_depth=512, rope_depth=64, group=H)``); its ``tile_heads`` is the query heads H
(0: 128), which the pair packs into its rows (128 / H positions of all H heads when H divides 128).
The prefill form on sm_100a is the FA4 attention kernel's MLA form (``fa4``: the reference
``FA4Config(qk_depth=192, ov_depth=128, is_mla=True, rope_dtype=dtype)``, 256 positions of one head a
CTA, GQA by ``group``; ``attention`` is the kernel's ``AttentionConfig``).
On sm_100a both forms also take fp8 e4m3 (``dtype="fp8_e4m3"``: q_nope and kv_latent, or q_nope, k_nope
and v) with 16-bit rope columns (``rope_dtype`` bf16 or fp16) and a bf16 output; sm_90a is bf16/fp16
only.

No MLIR import.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.dtypes import OPERAND_DTYPES
from fa4_mlir.configs.dtypes import dtype as lookup_dtype
from fa4_mlir.configs.support import Checked, Support
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import Target

FORMS = ("absorbed", "prefill")
LATENT = 512  # kv_latent columns: K's nope part and V in the absorbed form
ROPE = 64  # the rotary part of Q and K, both forms
NOPE = 128  # prefill: q_nope / k_nope / v columns per head
TILE_ROWS = 64  # query rows of one CTA tile (both consumer warpgroups share them: split O)
SM90_SMEM_BYTES = 232448  # the opt-in shared memory of one CTA on sm_90 (227 KiB)
BLOCK_N = {"absorbed": (16, 32), "prefill": (64, 80, 96, 112, 128)}  # keys per tile without spills
DEFAULTS = {"absorbed": (64, 32, 4), "prefill": (1, 128, 2)}  # tile_heads, block_n, stages
PAIR_HEADS = 128  # sm_100a: the most query heads (and the default) of the pair kernel's rows
BARRIER_BYTES = 1024  # the barriers' region, with the 1024-byte alignment of each tile


@dataclasses.dataclass(frozen=True, kw_only=True)
class MLAConfig(Checked):
    """One MLA forward kernel (see the module docstring).

    Absorbed form: q_nope (B, Sq, H, 512), q_rope (B, Sq, H, 64), kv_latent (B, Sk, 512), k_rope
    (B, Sk, 64) -> out (B, Sq, H, 512), LSE (B, H, Sq). A CTA owns 64 rows = ``tile_heads`` consecutive
    heads x ``64 / tile_heads`` consecutive positions; ``block_n`` keys per K tile (576 columns, whose
    first 512 are also the tile's V), ``stages`` K tiles in flight.

    Prefill form: q_nope (B, Sq, H, 128), q_rope (B, Sq, H, 64), k_nope and v (B, Sk, H / group, 128),
    k_rope (B, Sk, H / group, 64) -> out (B, Sq, H, 128); a CTA owns 128 positions of one head.

    ``split_kv`` (decode, when B x H / tile_heads CTAs leave SMs idle): the grid's x also enumerates
    ``num_splits`` key ranges; each CTA writes its rows' O normalised over its keys in fp32 and their LSE,
    which the host combines (``fa4_mlir.torch.mla``).

    ``causal``: key j is visible to query i iff j <= i (the top-left diagonal, as torch SDPA's
    ``is_causal``). ``tile_heads``, ``block_n`` and ``stages`` of 0 take the form's default
    (``heads_per_tile``, ``bn``, ``num_stages``).
    """

    target: str = "sm_90a"
    dtype: str = "bf16"
    form: str = "absorbed"
    causal: bool = False
    tile_heads: int = 0  # absorbed: query heads packed into a tile's 64 rows (a power of 2 dividing H; 0: 64)
    block_n: int = 0  # keys per K tile (0: 32 absorbed, 128 prefill)
    stages: int = 0  # K (and V) tiles in flight (0: 4 absorbed, 2 prefill); absorbed: a stage is freed
    # when the P @ V that read it retired
    group: int = 1  # prefill: query heads per K/V head (absorbed: 1, every head reads the one latent head)
    split_kv: bool = False  # absorbed, not causal: each CTA takes a range of the keys and writes fp32 partials
    rope_dtype: str = ""  # q_rope / k_rope: "" (or dtype) for bf16/fp16; bf16 or fp16 with an fp8_e4m3 latent

    def __post_init__(self):
        lookup_dtype(self.dtype, field="MLAConfig.dtype", allowed=OPERAND_DTYPES)
        Target.parse(self.target)
        absorbed = self.form == "absorbed"
        block_n = ", ".join(map(str, BLOCK_N.get(self.form, ())))
        pair = self.target == "sm_100a"
        half = self.dtype in ("bf16", "fp16")
        rope = ("rope_dtype", lambda: self.rope_dtype in (("", self.dtype) if half else ("bf16", "fp16")),
                f"'' or '{self.dtype}' (the rope columns share the latent's dtype)" if half else
                "bf16 or fp16 with an fp8_e4m3 latent (the rope columns stay 16-bit)")
        pair_rules = (
            rope,
            ("form", lambda: self.form in FORMS, f"one of {', '.join(FORMS)}"),
            ("causal", lambda: isinstance(self.causal, bool), "True or False"),
            ("tile_heads", lambda: _count(self.tile_heads) and self.tile_heads <= PAIR_HEADS,
             f"in [0, {PAIR_HEADS}] on sm_100a: the query heads H, which the pair kernel packs into its rows "
             f"(0: {PAIR_HEADS}, DeepSeek-V3's)") if absorbed else
            ("tile_heads", lambda: self.tile_heads == 0, "0 for the prefill form (a tile holds positions of "
             "one head)"),
            ("block_n", lambda: self.block_n == 0, "0 on sm_100a (the kernel's layout picks BN)"),
            ("stages", lambda: self.stages == 0, "0 on sm_100a (the kernel's layout picks its slots)"),
            ("split_kv", lambda: self.split_kv is False, "False on sm_100a (no split-KV kernel yet)"),
            ("group", lambda: self.group == 1, "1 for the absorbed form (every query head reads the one "
             "latent head)") if absorbed else
            ("group", lambda: _count(self.group) and 1 <= self.group <= 128, "in [1, 128] (query heads per "
             "K/V head)"),
        )
        rules = pair_rules if pair else (
            ("dtype", lambda: half, "bf16 or fp16 on sm_90a (fp8_e4m3 runs on sm_100a)"),
            rope,
            ("form", lambda: self.form in FORMS, f"one of {', '.join(FORMS)}"),
            ("causal", lambda: isinstance(self.causal, bool), "True or False"),
            ("tile_heads", lambda: _count(self.tile_heads) and (self.tile_heads == 0 or absorbed and (
                self.tile_heads <= TILE_ROWS and self.tile_heads & (self.tile_heads - 1) == 0)),
             f"0 or a power of 2 in [1, {TILE_ROWS}] (query heads per 64-row tile)" if absorbed
             else "0 for the prefill form (a tile holds positions of one head)"),
            ("block_n", lambda: _count(self.block_n) and self.block_n in (0, *BLOCK_N[self.form]),
             f"0 or one of {block_n} (keys per K tile; from 48 the consumers' S, P and O spill past 240 "
             f"registers)" if absorbed else f"0 or one of {block_n} (keys per K/V tile)"),
            ("stages", lambda: _count(self.stages) and (self.stages == 0 or 2 <= self.stages <= 8),
             "0 or in [2, 8] (K tiles in flight)"),
            ("split_kv", lambda: isinstance(self.split_kv, bool) and (not self.split_kv or absorbed and not self.causal),
             "False unless the form is absorbed and not causal (a decode step over a cache)"),
            ("group", lambda: _count(self.group) and (self.group == 1 if absorbed else 1 <= self.group <= 128),
             "1 for the absorbed form (every query head reads the one latent head)" if absorbed
             else "in [1, 128] (query heads per K/V head)"),
        )
        for name, ok, expected in rules:  # in order: later rules read the fields earlier ones checked
            if not ok():
                raise ConfigError(f"MLAConfig.{name} must be {expected}, got {getattr(self, name)!r}")

    # -- the tile ------------------------------------------------------------------------------------
    @property
    def heads_per_tile(self) -> int:
        if self.target == "sm_100a":
            return self.tile_heads or (PAIR_HEADS if self.form == "absorbed" else 1)
        return self.tile_heads or DEFAULTS[self.form][0]

    @property
    def bn(self) -> int:
        return self.block_n or DEFAULTS[self.form][1]

    @property
    def num_stages(self) -> int:
        return self.stages or DEFAULTS[self.form][2]

    @property
    def rows(self) -> int:
        """Query rows of a CTA: 64 (absorbed: both warpgroups share them) or 128 (prefill: 64 each)."""
        return TILE_ROWS if self.form == "absorbed" else 2 * TILE_ROWS

    @property
    def qk_depth(self) -> int:
        return LATENT + ROPE if self.form == "absorbed" else NOPE + ROPE

    @property
    def v_depth(self) -> int:
        return LATENT if self.form == "absorbed" else NOPE

    @property
    def positions(self) -> int:
        """Query positions of one CTA tile."""
        return self.rows // self.heads_per_tile

    @property
    def q_bytes(self) -> int:
        """The Q tile (rows x 576 or 192), later holding O over its first blocks."""
        return self.rows * self.qk_depth * 2

    @property
    def k_stage_bytes(self) -> int:
        """One K stage: ``bn`` keys x 576 (absorbed: the latent's 512 columns, then the rope's 64; also
        the tile's V) or x 192 (prefill: k_nope's 128, then k_rope's 64)."""
        return self.bn * self.qk_depth * 2

    @property
    def v_stage_bytes(self) -> int:
        """One V stage of the prefill form (``bn`` keys x 128); 0 absorbed (V is in the K stage)."""
        return 0 if self.form == "absorbed" else self.bn * self.v_depth * 2

    @property
    def smem_bytes(self) -> int:
        return self.q_bytes + self.num_stages * (self.k_stage_bytes + self.v_stage_bytes) + BARRIER_BYTES

    @property
    def depth512(self):
        """sm_100a: the pair kernel's configuration (``tile_heads`` = the query heads)."""
        from fa4_mlir.configs.depth512 import Depth512Config

        if self.target != "sm_100a":
            raise ConfigError(f"MLAConfig.depth512 is the sm_100a pair kernel's layout; target must be sm_100a, "
                              f"got '{self.target}'")
        rope = None if self.dtype in ("bf16", "fp16") else self.rope  # half: the latent's (as before)
        return Depth512Config(dtype=self.dtype, qk_depth=LATENT, rope_depth=ROPE, group=self.heads_per_tile,
                              rope_dtype=rope)

    @property
    def fa4(self):
        """sm_100a prefill: the reference FA4Config of the FA4 kernel's MLA form (spec 1.2: q/k 192 =
        128 nope + 64 rope, v 128, ``is_mla``: one Q@K' sub-stage, rope regions; two Q tiles)."""
        from fa4_mlir.configs.fa4 import FA4Config

        return self.attention.fa4

    @property
    def rope(self) -> str:
        """The rope columns' dtype: the latent's, or ``rope_dtype`` with an fp8 latent."""
        return self.dtype if self.dtype in ("bf16", "fp16") else self.rope_dtype

    @property
    def attention(self):
        """sm_100a prefill: the FA4 attention kernel's config (``MLAPrefillAttention``: head dim 128 with
        ``fa4`` = this config's)."""
        if self.target != "sm_100a" or self.form != "prefill":
            raise ConfigError(f"MLAConfig.fa4 is the sm_100a prefill layout; target and form must be sm_100a and "
                              f"prefill, got '{self.target}' and '{self.form}'")
        return MLAPrefillAttention(dtype=self.dtype, causal=self.causal, group=self.group, rope_dtype=self.rope)

    def supported(self) -> Support:
        if self.target == "sm_100a":
            return self.fa4.supported() if self.form == "prefill" else self.depth512.supported()
        if self.smem_bytes > SM90_SMEM_BYTES:
            return Support(False, f"shared memory must be <= {SM90_SMEM_BYTES} bytes, got {self.smem_bytes}")
        return Support(True)

    def describe(self) -> str:
        rope = f" ({self.rope_dtype} rope)" if self.dtype == "fp8_e4m3" else ""
        if self.target == "sm_100a" and self.form == "prefill":
            return (f"MLAConfig sm_100a {self.dtype}{rope} prefill FA4 kernel" + (f" group {self.group}"
                    if self.group > 1 else "") + (" causal" if self.causal else ""))
        if self.target == "sm_100a":
            return (f"MLAConfig sm_100a {self.dtype}{rope} absorbed pair kernel, {self.heads_per_tile} heads"
                    + (" causal" if self.causal else ""))
        return (f"MLAConfig {self.target} {self.dtype} {self.form} heads/tile {self.heads_per_tile} BN {self.bn} "
                f"x{self.num_stages}" + (f" group {self.group}" if self.group > 1 else "")
                + (" causal" if self.causal else "") + (" split-kv" if self.split_kv else ""))


def _count(x) -> bool:
    """An int >= 0 (not a bool)."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


@dataclasses.dataclass(frozen=True)
class MLAPrefillAttention(AttentionConfig):
    """The sm_100a FA4 attention kernel's config for the MLA prefill form: an ``AttentionConfig`` of head
    dim 128 (V and O) whose ``fa4`` is the MLA FA4Config (Q and K 192 deep: the nope part, then the rope
    block from its own maps and regions, in ``rope_dtype``: the 16-bit rope of an fp8 kernel; "" = dtype).
    Not fused GQA (``FA4Config.fuse_gqa`` is off for MLA)."""

    rope_dtype: str = ""

    @property
    def fa4(self):
        from fa4_mlir.configs.fa4 import FA4Config

        return FA4Config(dtype=self.dtype, qk_depth=NOPE + ROPE, ov_depth=NOPE, is_mla=True,
                         rope_dtype=self.rope_dtype or self.dtype, num_q=self.num_q, group=self.group)
