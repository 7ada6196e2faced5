"""depth512: the attention forward for head dims 256 and 512 on sm_100a, a CTA pair per tile.

The reference system's depth-256/512 kernel (spec 1.5, 2.2, 2.3, 3.4, 4.7, 4.8) as an fa4 program
built through ``fa4_mlir.dsl``, with its shared memory, barriers and TMEM declared by
``fa4_mlir.dsl.structs.depth512`` (Depth512AttentionSMem / Depth512MBars). A cluster of two CTAs
(cta_group 2) computes one tile of MMA_M query rows (BM per CTA: 128 for d256, 64 for d512); both
CTAs take tile ``block_idx.x >> 1``, the even CTA leads. 12 warps per CTA:

* warps 0-3, softmax (``softmax``, 256 registers): also waits for P_{t-1} @ V before writing P_t
  (P has one shared-memory buffer; the protocol verifier rejects the kernel without that wait);
* warps 4-7, correction (``correction``, 184);
* warp 8, MMA (``mma``, 64): the leader's elected thread issues the pair's tcgen05 MMAs;
* warp 9, TMA load (``load``, 64), in both CTAs;
* warps 10-11 idle (64: ``setmaxnreg`` is warpgroup-wide, so they share warps 8-9's budget, not the
  reference's 24).

256 * 128 + 184 * 128 + 64 * 128 = 64512 <= 65536 registers (d256; d512 keeps 168 everywhere, see
``common.registers``). Q, K, V, O and the LSE are laid out
as for the FA4 kernel (``fa4_mlir.kernels.attention``), with the same parameters (``abi``) and
masking (keys past seq_k; causal: top-left diagonal, tiles past the pair's last row skipped).
The grid is ``fa4_mlir.kernels.attention.launch_geometry``'s (two CTAs per tile). This module
imports no MLIR; ``build`` imports it.

fp8 e4m3 (``dtype="fp8_e4m3"``, spec 4.8; tensor-wise scales, the q and k scales folded into
``scale_log2e`` by the op, ``v_scale`` a parameter): every tile has the 64B swizzle (64 e4m3 per row),
the MMAs are kind::f8f6f4 (32 elements per K step), P is cast to e4m3 with an exp2 bias of 6 and the
lazy-rescale threshold is -2 (``softmax._p_words``), and O * v_scale / row sum is written as bf16
through the dead Q region in column chunks (fp8 Q holds half of bf16 O's bytes).

``mla`` builds the absorbed multi-head latent attention (q/k 512 + 64 rope, v 512, one latent head)
from the same roles: ``Dims.chunks`` adds the rope chunk to Q@K', ``Dims.split_heads`` lets 128
heads share a pair's rows.
"""

from __future__ import annotations

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.kernels.source import KernelSource, TensorMapSpec

NAME = "attention"
NUM_WARPS = 12


def build(config: AttentionConfig) -> KernelSource:
    """The kernel for ``config`` (sm_100a, head dim 256 or 512)."""
    from fa4_mlir import dsl
    from fa4_mlir.kernels.attention.abi import CONFIG_FIELDS, declare
    from fa4_mlir.kernels.attention.depth512.common import BLOCK, Dims, prologue
    from fa4_mlir.kernels.attention.depth512.correction import correction
    from fa4_mlir.kernels.attention.depth512.load import load
    from fa4_mlir.kernels.attention.depth512.mma import mma
    from fa4_mlir.kernels.attention.depth512.softmax import softmax

    if not config.is_depth512:
        raise ValueError(f"config must be an sm_100a AttentionConfig with head_dim 256 or 512, got {config.describe()}")
    config.validate()
    f = config.depth512
    g = config.fused_group
    sw = Dims(config).swizzle  # fp8: 64B (64 e4m3 per swizzle row, spec 1.2 step 4)
    q_box = TensorMapSpec(config.dtype, (BLOCK, g, f.bm // g, 1), sw)
    kv_box = TensorMapSpec(config.dtype, (BLOCK, 1, f.bn // 2, 1), sw)  # BN / 2 K rows = BK1 V keys
    o_box = TensorMapSpec(config.out_dtype, (BLOCK, g, f.bm // g, 1), "128B")  # fp8: bf16 O
    k = dsl.Kernel(NAME, config.target, NUM_WARPS, cluster=(2, 1, 1))
    declare(k, q_box, kv_box, o_box, fp8=config.is_fp8)
    with k.body() as arg:
        x = prologue(k, config, arg)
        softmax(k, x)
        correction(k, x)
        mma(k, x)
        load(k, x)
    return k.source(grid=f"(2 * ceil(Sq / {config.cta_positions}), H / {g}, B) (launch_geometry)",
                    config={f: getattr(config, f) for f in CONFIG_FIELDS})
