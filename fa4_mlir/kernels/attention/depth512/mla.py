"""mla: the absorbed multi-head latent attention forward (DeepSeek-V3 decode form) on sm_100a, the
depth-512 pair kernel with a rope chunk.

    S = scale * (q_nope kv' + q_rope k_rope'),  O = softmax(S) kv

q_nope (B, Sq, H, 512), q_rope (B, Sq, H, 64), one latent head kv (B, Sk, 512) and its rope keys
k_rope (B, Sk, 64) shared by all H query heads (MQA), out (B, Sq, H, 512), LSE (B, H, Sq) fp32. The
kernel is ``depth512``'s (spec 1.5, 4.8, 4.9) for ``Depth512Config(qk_depth=512, rope_depth=64,
group=H)``: split O (MMA_M 128, 64 rows per CTA), BN 256, a ring of 3 KV slots; Q's five depth
chunks (four latent chunks of 128 columns from q_nope, one of 64 from q_rope) stay resident, K's
arrive one slot each (the rope chunk from k_rope fills half a slot), Q@K' runs over the latent
chunks then the rope chunk (4 MMA k-steps), and V is read from the same latent through ``kv_v``
as the pair kernel reads V. The heads share the pair's rows (fused GQA with group = H, when H
divides 128): ``128 / H`` positions x H heads per pair, so decode (Sq = 1) fills the tile from 128
heads down to 16 (8 positions); at H = 128 the leader holds heads 0-63 and the peer 64-127 of one
position. Other H run one head per row block (64 positions per CTA). Causal is the top-left
diagonal (key j visible to query i iff j <= i).

fp8 (``dtype="fp8_e4m3"``, ``rope_dtype`` bf16 or fp16): q_nope and kv are e4m3 with tensor-wise
scales, q_rope and k_rope keep the rope dtype. One S accumulator takes both parts, so the caller folds
the q and k scales into ``scale_log2e`` and gives the rope parts in the same scaled units (q_rope /
q_scale, k_rope / k_scale); ``v_scale`` (kv's scale) multiplies O. The latent chunks are kind::f8f6f4
MMAs and the rope chunk a kind::f16 MMA into the same S; every tile has fp8's 64B swizzle, so a rope row
of 64 columns is two 32-column boxes; O is bf16.
This module imports no MLIR; ``build`` imports it.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.configs.depth512 import Depth512Config
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels.source import KernelSource, Param, TensorMapSpec

NAME = "mla_attention"
NUM_WARPS = 12
LATENT = 512
ROPE = 64
MAX_GRID_YZ = 65535


@dataclasses.dataclass(frozen=True)
class Spec:
    """What the pair kernel's roles read of an ``AttentionConfig``, for an MLA ``Depth512Config``
    (``rope_depth`` 64; ``group`` = the query heads) and the mask."""

    depth512: Depth512Config
    causal: bool = False

    def __post_init__(self):
        if not isinstance(self.depth512, Depth512Config):
            raise TypeError(f"config must be a Depth512Config, got {type(self.depth512).__name__}")
        if self.depth512.rope_depth != ROPE:
            raise ConfigError(f"mla config's rope_depth must be {ROPE} (absorbed MLA), got "
                              f"{self.depth512.rope_depth}; Depth512Config(rope_depth={ROPE}, group=heads)")
        if not isinstance(self.causal, bool):
            raise ConfigError(f"mla causal must be True or False, got {self.causal!r}")
        self.depth512.validate()

    @property
    def dtype(self) -> str:
        return self.depth512.dtype

    @property
    def group(self) -> int:
        return self.depth512.group

    @property
    def fused_group(self) -> int:
        """Heads sharing the pair's rows: all H when H divides MMA_M (128), else 1."""
        return self.group if self.depth512.fuse_gqa else 1

    @property
    def pair_positions(self) -> int:
        """Sequence positions of one pair's tile."""
        f, g = self.depth512, self.fused_group
        return f.mma_m // g if g > 1 else 2 * f.bm

    @property
    def cta_heads(self) -> int:
        """Heads in one CTA's rows (the TMA boxes' head extent)."""
        return min(self.fused_group, self.depth512.bm)


def params(q_box: TensorMapSpec, kv_box: TensorMapSpec, rope_boxes: tuple[TensorMapSpec, TensorMapSpec] | None = None,
           o_box: TensorMapSpec | None = None, fp8: bool = False) -> tuple[Param, ...]:
    """The kernel's parameters in signature order. The latent and rope tensors are 4-D maps with a unit
    head axis (kv (B, Sk, 512) as dims (512, 1, Sk, B)) so that every box is [64 columns, heads, rows, 1]
    (fp8: the rope maps' ``rope_boxes`` are 32 columns wide, O's ``o_box`` is bf16); fp8 adds ``v_scale``."""
    q_rope_box, k_rope_box = rope_boxes or (q_box, kv_box)
    fp8_params = (Param("v_scale", "f32", "the latent's dequantization scale as V (tensor-wise): O is multiplied "
                        "by it"),) if fp8 else ()
    return (
        Param("q_nope", "tensormap", "Q latent part [B, Sq, H, 512] as dims (512, H, Sq, B)", q_box),
        Param("q_rope", "tensormap", "Q rope part [B, Sq, H, 64] as dims (64, H, Sq, B)", q_rope_box),
        Param("kv", "tensormap", "the latent [B, Sk, 512] as dims (512, 1, Sk, B): K's latent chunks", kv_box),
        Param("kv_v", "tensormap", "the same latent tensor, read as V (BK1 keys x 64 columns boxes)", kv_box),
        Param("k_rope", "tensormap", "K rope part [B, Sk, 64] as dims (64, 1, Sk, B)", k_rope_box),
        Param("o", "tensormap", "O[B, Sq, H, 512] as dims (512, H, Sq, B)", o_box or q_box),
        Param("lse", "ptr", "LSE[B, H, Sq] fp32 (natural log; written when write_lse != 0)"),
        Param("seq_q", "i32", "query positions Sq"),
        Param("seq_k", "i32", "key positions Sk, >= 1"),
        Param("num_heads", "i32", "query heads H (the config's group)"),
        Param("scale_log2e", "f32", "softmax scale * log2(e)"),
        Param("write_lse", "i32", "1: write the LSE"),
    ) + fp8_params


def declare(kernel, *boxes, **kw) -> None:
    """Declare ``params(*boxes, **kw)`` on a ``fa4_mlir.dsl.Kernel`` (signature and manifest ABI from one list)."""
    kernel.declare_params(params(*boxes, **kw))


def boxes(spec: Spec) -> tuple[TensorMapSpec, TensorMapSpec]:
    """The Q/O box (64 columns x the CTA's heads x its positions) and the K/V box (64 x BN / 2 rows)."""
    from fa4_mlir.kernels.attention.depth512.common import BLOCK

    f, g = spec.depth512, spec.cta_heads
    sw = f"{f.swizzle_bytes}B"
    return (TensorMapSpec(f.dtype, (BLOCK, g, f.bm // g, 1), sw),
            TensorMapSpec(f.dtype, (BLOCK, 1, f.bn // 2, 1), sw))


def fp8_boxes(spec: Spec) -> tuple[tuple[TensorMapSpec, TensorMapSpec], TensorMapSpec]:
    """fp8: the rope maps' boxes (one 64B swizzle row: 32 rope columns) and O's (bf16, 64 columns, 128B)."""
    from fa4_mlir.kernels.attention.depth512.common import BLOCK

    f, g = spec.depth512, spec.cta_heads
    cols = f.swizzle_bytes // f.rope.bytes
    rope = f.rope.name
    return ((TensorMapSpec(rope, (cols, g, f.bm // g, 1), f"{f.swizzle_bytes}B"),
             TensorMapSpec(rope, (cols, 1, f.bn // 2, 1), f"{f.swizzle_bytes}B")),
            TensorMapSpec("bf16", (BLOCK, g, f.bm // g, 1), "128B"))


def launch_geometry(config: Depth512Config, batch: int, seq_q: int, heads: int, seq_k: int) -> tuple[int, int, int]:
    """The grid: (2 CTAs x query tiles, H / fused heads, batch); ``heads`` must be the config's group."""
    spec = Spec(config)
    if min(batch, seq_q, heads, seq_k) < 1:
        raise LaunchError(f"mla_attention: batch, seq_q, heads and seq_k must be >= 1, got "
                          f"{batch}, {seq_q}, {heads}, {seq_k}")
    if heads != config.group:
        raise LaunchError(f"mla_attention: heads must be the config's group ({config.group}; the kernel packs "
                          f"the heads into its rows), got {heads}")
    ys = heads // spec.fused_group
    if ys > MAX_GRID_YZ or batch > MAX_GRID_YZ:
        raise LaunchError(f"mla_attention: heads / fused heads and batch must be <= {MAX_GRID_YZ}, got {ys}, {batch}")
    return 2 * -(-seq_q // spec.pair_positions), ys, batch


def build(config: Depth512Config, causal: bool = False) -> KernelSource:
    """The absorbed-MLA kernel for ``config`` (a ``Depth512Config`` with ``rope_depth`` 64 and ``group``
    the number of query heads) and the mask."""
    from fa4_mlir import dsl
    from fa4_mlir.kernels.attention.depth512.common import prologue
    from fa4_mlir.kernels.attention.depth512.correction import correction
    from fa4_mlir.kernels.attention.depth512.load import load
    from fa4_mlir.kernels.attention.depth512.mma import mma
    from fa4_mlir.kernels.attention.depth512.softmax import softmax

    spec = Spec(config, causal)
    q_box, kv_box = boxes(spec)
    k = dsl.Kernel(NAME, "sm_100a", NUM_WARPS, cluster=(2, 1, 1))
    if config.qkv.is_half:
        declare(k, q_box, kv_box)
    else:
        rope_boxes, o_box = fp8_boxes(spec)
        declare(k, q_box, kv_box, rope_boxes, o_box, fp8=True)
    with k.body() as arg:
        x = prologue(k, spec, arg)
        softmax(k, x)
        correction(k, x)
        mma(k, x)
        load(k, x)
    g = spec.fused_group
    return k.source(grid=f"(2 * ceil(Sq / {spec.pair_positions}), H / {g}, B) (launch_geometry)",
                    config={"dtype": config.dtype, "qk_depth": config.qk_depth, "rope_depth": config.rope_depth,
                            "group": config.group, "causal": causal,
                            **({} if config.rope_dtype is None else {"rope_dtype": config.rope_dtype})})
