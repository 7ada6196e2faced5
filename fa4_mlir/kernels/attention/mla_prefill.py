"""The MLA prefill form on sm_100a: the FA4 attention kernel (this package) with Q and K 192 deep.

q/k depth 192 = 128 nope + 64 rope, v 128 (DeepSeek-V3's prefill), as the reference's MLA FA4Config
(``MLAConfig.fa4``: ``is_mla``, one Q@K' sub-stage, spec 1.2, 2.1, 4.9): the Q halves' nope blocks in
the Q region (O is written over them, 128 columns), their rope blocks in ``q_rope``; a K tile's
nope part is a ring slot of 128 columns like V's, its rope block a buffer of its own (``rope``,
ceil(nkv / 2) buffers after the fused ring; a split ring keeps it in the K stage after K_nope). Q@K'
is 12 MMA K steps over one S: 8 from the nope blocks, 4 from the rope block. GQA is not fused (a CTA
holds 256 positions of one head; the K/V head is head / group). The parameters are the sm_90a prefill
kernel's (``hopper_mla.params``), so ``fa4_mlir.torch.mla.launch_prefill`` launches either.

fp8 (``dtype="fp8_e4m3"``, ``rope_dtype`` bf16 or fp16): q_nope, k_nope and v are e4m3 with tensor-wise
scales, q_rope and k_rope keep the rope dtype (the reference's ``rope_dtype``, spec 2.1: the q_rope
region and the K stages' rope part sized by it). The kernel is the fp8 FA4 kernel (``kind::f8f6f4``
MMAs, the exp2 bias, bf16 O in 32-column chunks, ``v_scale``) whose Q@K' adds the rope as kind::f16
MMAs into the same S; every tile keeps fp8's 64B swizzle, so a rope row is two 32-column blocks. One S
takes both parts: the host folds q_scale k_scale into ``scale_log2e`` and divides q_rope by it.
"""

from __future__ import annotations

from fa4_mlir.configs.mla import MLAConfig, NOPE, ROPE
from fa4_mlir.kernels.attention import launch_geometry as attention_geometry
from fa4_mlir.kernels.attention.abi import CONFIG_FIELDS
from fa4_mlir.kernels.attention.dims import BLOCK, FP8_OUT_CHUNK
from fa4_mlir.kernels.source import KernelSource, Param, TensorMapSpec

NAME = "mla_attention"
NUM_WARPS = 16


def params(c: MLAConfig) -> tuple[Param, ...]:
    """The parameters in signature order, named as the sm_90a prefill kernel's, with this kernel's boxes
    (a 128-row Q half of one head; BN keys of one K/V head; one swizzle block wide). fp8 (a 16-bit rope):
    the rope boxes are 32 columns (fp8's 64-byte swizzle rows), O is bf16 in 32-column chunks, and
    ``v_scale`` follows (q and k scales are folded into ``scale_log2e`` and the rope by the host)."""
    a = c.attention
    d = a.fa4
    swizzle = f"{d.swizzle_bytes}B"
    q_box = TensorMapSpec(c.dtype, (BLOCK, 1, a.positions, 1), swizzle)
    k_box = TensorMapSpec(c.dtype, (BLOCK, 1, d.bn, 1), swizzle)
    rope_cols = d.swizzle_bytes // d.rope_bytes
    q_rope_box = TensorMapSpec(c.rope, (rope_cols, 1, a.positions, 1), swizzle)
    k_rope_box = TensorMapSpec(c.rope, (rope_cols, 1, d.bn, 1), swizzle)
    o_box = TensorMapSpec(a.out_dtype, (FP8_OUT_CHUNK, 1, a.positions, 1), swizzle) if a.is_fp8 else q_box
    fp8 = (Param("v_scale", "f32", "v's dequantization scale (tensor-wise): O is multiplied by it"),) if a.is_fp8 \
        else ()
    return (
        Param("q_nope", "tensormap", f"q_nope[B, Sq, H, {NOPE}] as dims ({NOPE}, H, Sq, B)", q_box),
        Param("q_rope", "tensormap", f"q_rope[B, Sq, H, {ROPE}] as dims ({ROPE}, H, Sq, B)", q_rope_box),
        Param("k_nope", "tensormap", f"k_nope[B, Sk, H / group, {NOPE}] as dims ({NOPE}, H / group, Sk, B)", k_box),
        Param("k_rope", "tensormap", f"k_rope[B, Sk, H / group, {ROPE}] as dims ({ROPE}, H / group, Sk, B)",
              k_rope_box),
        Param("v", "tensormap", f"v[B, Sk, H / group, {NOPE}] as dims ({NOPE}, H / group, Sk, B)", k_box),
        Param("o", "tensormap", f"O[B, Sq, H, {NOPE}] as dims ({NOPE}, H, Sq, B)", o_box),
        Param("lse", "ptr", "LSE[B, H, Sq] fp32 (written when write_lse != 0)"),
        Param("seq_q", "i32", "query positions Sq"),
        Param("seq_k", "i32", "key positions Sk, >= 1"),
        Param("num_heads", "i32", "query heads H, a multiple of group"),
        Param("scale_log2e", "f32", "softmax scale * log2(e)"),
        Param("write_lse", "i32", "1: write the LSE"),
    ) + fp8


def launch_geometry(config: MLAConfig, batch: int, seq_q: int, heads: int, seq_k: int) -> tuple[int, int, int]:
    """The grid: (256-position tiles, heads, batch), the attention kernel's."""
    return attention_geometry(config.attention, batch, seq_q, heads, seq_k)


def build(config: MLAConfig) -> KernelSource:
    from fa4_mlir import dsl
    from fa4_mlir.kernels.attention import build_roles
    from fa4_mlir.kernels.attention.dims import Dims

    config.validate()
    a = config.attention
    k = dsl.Kernel(NAME, "sm_100a", NUM_WARPS)
    k.declare_params(params(config))
    build_roles(k, Dims(a))
    fields = {f: getattr(a, f) for f in CONFIG_FIELDS}
    rope = {"rope_dtype": config.rope} if a.is_fp8 else {}
    return k.source(grid=f"(ceil(Sq / {a.cta_positions}), H, B) (launch_geometry)",
                    config={"form": "prefill", **fields, **rope})
