"""Build every artifact the GPU tests and benchmarks load into the runtime's cache (FA4_CACHE_DIR).

Run where the compiler is installed; copy the cache to the GPU machine (same FA4_CACHE_DIR layout):

    FA4_CACHE_DIR=.fa4-cache python test/gpu/build_artifacts.py [--bench]

``--bench`` adds the GEMM variants ``bench/gemm.py --sweep`` times, the attention tiles
``bench/attention.py --block-n`` times and the MLA tiles ``bench/mla.py --sweep`` times; ``--persistent`` only
the persistent attention kernels of ``--bench``.
"""

from __future__ import annotations

import pathlib
import sys

from fa4_mlir import knobs
from fa4_mlir.configs.attention import (
    FP8_HEAD_DIMS, SM90_ONE_CONSUMER_ROLE_KEYS, SM90_PERSISTENT_KEYS, SM90_SHORT_KEYS, SM90_SHORT_TILE,
    SM90_WALK_SHORT_TILE, AttentionConfig)
from fa4_mlir.configs.attention_op import (
    default_exp2, default_num_q, op_fields, paged_config, varlen_config, varlen_head_dims)
from fa4_mlir.configs.combine import CombineConfig
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.configs.mla import MLAConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels.gemm import SM90_PINGPONG
from fa4_mlir.runtime.artifacts import ArtifactKey, fetch

HERE = pathlib.Path(__file__).parent
# the (num_q, block_n) tiles bench/attention.py --block-n times besides the defaults, by dtype and head dim
# (num_q 3: three consumer warpgroups, a 192-row tile; fp8 256 keys at head dim 128 spill)
TILE_SWEEP = {"bf16": {64: ((2, 96), (2, 128), (2, 176), (2, 256), (3, 128), (3, 96), (3, 64)),
                       128: ((2, 96), (2, 144), (2, 176), (2, 192)), 256: ((2, 64),), 512: ((2, 32),)},
              "fp16": {64: ((3, 128),)},
              "fp8_e4m3": {64: ((2, 128), (2, 192), (3, 128), (3, 64)), 128: ((2, 128),), 256: ((2, 64),)}}
# the persistent kernels bench/attention.py --block-n P,P3x0 times, by dtype and head dim: their num_q (default keys)
PERSISTENT_SWEEP = {"bf16": {64: (2, 3), 96: (2,), 128: (2,)}, "fp16": {64: (2, 3), 128: (2,)},
                    "fp8_e4m3": {64: (2, 3), 128: (2,)}}
# the op's causal tiles (num_q, block_n) bench/attention.py --block-n H,H2x128,H3x0 times in each head's order
# (AttentionConfig.causal_order "heads"), by dtype and head dim
HEADS_ORDER_SWEEP = {"bf16": {64: ((2, 0), (2, 128)), 128: ((2, 0),), 256: ((2, 0),)},
                     "fp8_e4m3": {64: ((3, 0),), 128: ((2, 0),), 256: ((2, 0),)}}
MLA_TILE_HEADS = (2, 8, 16, 64)  # the op's tile_heads for test_mla_gpu.py's heads 2, 8, 16, 128
MLA_SWEEP = ((32, 2), (32, 3), (16, 4), (16, 8))  # (block_n, stages) bench/mla.py --sweep times beside the default
# test_kvcache_gpu.py's page sizes (PAGE_SIZES; its non-paged caches run as pages of 256: kvcache.CACHE_PAGES)
KV_PAGE_SIZES = (16, 64, 256, 48)
# test_kvcache_gpu.py's gathered page sizes (GATHER_PAGE_SIZES: AttentionConfig.page_gather, head dims 64 and 128)
# and its head dim 256 gathered cases (GATHER_D256: pages of 100, bf16)
KV_GATHER_PAGE_SIZES = (1, 40, 255)
KV_GATHER_D256 = (256, 100)
KV_PACKED_GROUPS = (4, 8)  # test_kvcache_gpu.py's and bench/decode.py's GQA groups (decode: pack_gqa = group)
# fp8 exponentials per 32 by polynomial (bench/attention.py --exp2-emulation): the f32 form's counts, the packed f16
# form's (AttentionConfig.exp2_f16x2)
FP8_EXP2_SWEEP = tuple((e, False) for e in (0, 2, 4, 6, 8, 12)) + tuple((e, True) for e in (2, 4, 6, 8))


def _walks(causal_only: bool = False, **override) -> list[ArtifactKey]:
    """The op's persistent tile walks (SM90_PERSISTENT_KEYS: at most that many keys) at each length where its
    choice changes (SM90_WALK_SHORT_TILE's steps), with the op's fields (op_fields) but ``override``'s."""
    return list(dict.fromkeys(ArtifactKey.for_config("attention", AttentionConfig(
        target="sm_90a", dtype=dt, head_dim=d, causal=c, **{**op_fields("sm_90a", dt, d, c, sk), **override}))
        for (dt, d, c), most in SM90_PERSISTENT_KEYS.items() if c or not causal_only
        for sk in (1, most, *(keys for keys, _ in SM90_WALK_SHORT_TILE.get((dt, d, c), ())))))


def one_role_variants(wanted: list[ArtifactKey]) -> list[ArtifactKey]:
    """The sm_90a attention kernels among ``wanted`` with ``one_consumer_role``, where their config allows it."""
    out = []
    for key in wanted:
        if key.kernel != "attention" or key.target != "sm_90a" or not key.config:
            continue
        try:
            config = AttentionConfig(**{**dict(key.config), "one_consumer_role": True})
            config.validate()
        except ConfigError:
            continue
        out.append(ArtifactKey.for_config("attention", config, key.debug_timeout_ms))
    return out


def keys() -> list[ArtifactKey]:
    debug = knobs.DEFAULT_DEBUG_TIMEOUT_MS
    wanted = [ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(dtype=d, target=t))
              for t in ("sm_90a", "sm_100a") for d in ("bf16", "fp16")]
    wanted.append(ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a"), debug))
    wanted.append(ArtifactKey.for_file(HERE / "kernels" / "broken_barrier.mlir", "sm_90a", debug))
    wanted.append(ArtifactKey.for_file(HERE.parent.parent / "examples" / "row_center.py", "sm_90a"))  # dsl tutorial
    # the op's GEMMs: the cooperative default and the pingpong tile it takes for large outputs
    wanted += [ArtifactKey.for_config("gemm", GemmConfig(dtype=d, target="sm_90a", b_major=b, **extra))
               for d in ("bf16", "fp16") for b in ("k", "mn") for extra in ({}, SM90_PINGPONG)]
    from test_gemm_gpu import SCHEDULES  # the runtime tests' pingpong schedules (this file's directory)

    wanted += [ArtifactKey.for_config("gemm", GemmConfig(target="sm_90a", b_major=b, **extra))
               for extra in SCHEDULES.values() for b in ("k", "mn")]
    # test_attention_gpu.py: every head dim, both masks, both dtypes; one artifact serves every GQA group
    # (the sm_90a kernel takes the group at launch: AttentionConfig.runtime_group); the op's num_q
    wanted += [ArtifactKey.for_config("attention", AttentionConfig(target="sm_90a", dtype=dt, head_dim=d, causal=c,
                                                                   num_q=default_num_q("sm_90a", dt, d, c)))
               for dt in ("bf16", "fp16") for d in (64, 96, 128, 192, 256, 512) for c in (False, True)]
    # test_attention_fp8_gpu.py and bench/attention.py --dtype fp8: fp8 e4m3, every fp8 head dim, both masks,
    # tensor-wise and per-token scales (every group, as above)
    wanted += [ArtifactKey.for_config("attention", AttentionConfig(
        target="sm_90a", dtype="fp8_e4m3", head_dim=d, causal=c, token_scales=t,
        num_q=default_num_q("sm_90a", "fp8_e4m3", d, c),
        **default_exp2("sm_90a", "fp8_e4m3", d)))
               for d in FP8_HEAD_DIMS["sm_90a"] for c in (False, True) for t in (False, True)]
    # the op's tiles for short sequences (SM90_SHORT_TILE: at most short_keys keys); fp8 with both kinds of scales
    wanted += [ArtifactKey.for_config("attention", AttentionConfig(
        target="sm_90a", dtype=dt, head_dim=d, causal=c, num_q=nq, block_n=bn, token_scales=t,
        **default_exp2("sm_90a", dt, d)))
               for (dt, d, c), (nq, bn) in SM90_SHORT_TILE.items() for t in (False, True)
               if dt == "fp8_e4m3" or not t]
    wanted += _walks()  # the op's persistent tile walks, with their tiles by length and their K/V loops
    # torch.ops.fa4.flash_attn_varlen and test_varlen_gpu.py: the packed kernels of every varlen head dim, both
    # masks, both dtypes, for short and long max_seqlen_k (the op's tile: varlen_config); every group, as above
    wanted += list(dict.fromkeys(
        ArtifactKey.for_config("attention", varlen_config("sm_90a", dt, d, c, 1, sk))
        for dt in ("bf16", "fp16") for d in varlen_head_dims("sm_90a") for c in (False, True)
        for sk in (SM90_SHORT_KEYS, SM90_SHORT_KEYS + 1)))
    # torch.ops.fa4.flash_attn_with_kvcache, test_kvcache_gpu.py and bench/decode.py: the paged kernels of its page
    # sizes, head dims 64 and 128, both masks, both dtypes, for short and long capacities (the op's tile:
    # paged_config); group 1 serves every group that packs none (as above), and decoding (Sq x group <= 128, Sq
    # 1..16 there) packs the groups' heads into a CTA's rows (AttentionConfig.pack_gqa: a kernel per group)
    wanted += list(dict.fromkeys(
        ArtifactKey.for_config("attention", paged_config("sm_90a", dt, d, c, g, p, cap, 1))
        for dt in ("bf16", "fp16") for d in (64, 128) for c in (False, True) for p in KV_PAGE_SIZES
        for cap in (SM90_SHORT_KEYS, max(SM90_SHORT_KEYS + 1, p)) if cap >= p for g in (1, *KV_PACKED_GROUPS)))
    # the same calls' split-KV decode (small batches: the op splits the keys of a grid short of the SMs) and its
    # combine kernels
    wanted += list(dict.fromkeys(
        ArtifactKey.for_config("attention", paged_config("sm_90a", dt, d, c, g, p, cap, 1, split_kv=True))
        for dt in ("bf16", "fp16") for d in (64, 128) for c in (False, True) for p in KV_PAGE_SIZES
        for cap in (SM90_SHORT_KEYS, max(SM90_SHORT_KEYS + 1, p)) if cap >= p for g in (1, *KV_PACKED_GROUPS)))
    wanted += [ArtifactKey.for_config("attention-combine", CombineConfig(target="sm_90a", dtype=dt, head_dim=d))
               for dt in ("bf16", "fp16") for d in (64, 128)]
    # the gathered pages (AttentionConfig.page_gather: sizes TMA cannot load), the same calls with and without
    # split KV; head dim 256: pages of 100, bf16, groups 1 and 4, and its combine kernel
    gathered = [(dt, d, p) for dt in ("bf16", "fp16") for d in (64, 128) for p in KV_GATHER_PAGE_SIZES]
    gathered.append(("bf16", *KV_GATHER_D256))
    wanted += list(dict.fromkeys(
        ArtifactKey.for_config("attention", paged_config("sm_90a", dt, d, c, g, p, cap, 1, split_kv=s))
        for dt, d, p in gathered for c in (False, True) for s in (False, True)
        for cap in (SM90_SHORT_KEYS, SM90_SHORT_KEYS + 1) for g in ((1, *KV_PACKED_GROUPS) if d < 256 else (1, 4))))
    wanted.append(ArtifactKey.for_config("attention-combine", CombineConfig(target="sm_90a", dtype="bf16",
                                                                            head_dim=KV_GATHER_D256[0])))
    # test_mla_gpu.py and bench/mla.py: the MLA op's kernels for its heads, both masks, both dtypes
    wanted += [ArtifactKey.for_config("mla-attention", MLAConfig(dtype=dt, causal=c, tile_heads=th))
               for dt in ("bf16", "fp16") for c in (False, True) for th in MLA_TILE_HEADS]
    wanted += [ArtifactKey.for_config("mla-attention", MLAConfig(dtype=dt, tile_heads=th, split_kv=True))
               for dt in ("bf16", "fp16") for th in MLA_TILE_HEADS]  # decode grids short of the SMs
    wanted += [ArtifactKey.for_config("mla-attention", MLAConfig(form="prefill", dtype=dt, causal=c, group=g))
               for dt in ("bf16", "fp16") for c in (False, True) for g in (1, 4)]  # test_mla_gpu.py's PREFILL
    # the split-KV combine: the MLA op's partials (head dim 512) and the paged decode's (64, 128; issue 26)
    wanted += [ArtifactKey.for_config("attention-combine", CombineConfig(target="sm_90a", dtype=dt, head_dim=d))
               for dt in ("bf16", "fp16") for d in (64, 128, 512)]
    # test_attention_gpu.py's persistent tile walk (its head dims and masks, default tiles)
    wanted += [ArtifactKey.for_config("attention", AttentionConfig(target="sm_90a", head_dim=d, causal=c,
                                                                   persistent=True))
               for d, c in ((128, True), (64, False), (128, False), (96, True))]
    # the op's one-tile kernels with one consumer role (default_one_role: head dims 128 and 256, long keys), beside the
    # separate roles' that the tests building a config themselves run
    wanted += [key for key in one_role_variants(wanted)
               if (dict(key.config)["head_dim"], dict(key.config)["causal"]) in SM90_ONE_CONSUMER_ROLE_KEYS]
    op_kernels = list(wanted)
    if "--bench" in sys.argv:  # the MLA tiles bench/mla.py --sweep times
        wanted += [ArtifactKey.for_config("mla-attention", MLAConfig(causal=c, block_n=bn, stages=st, split_kv=sp,
                                                                     tile_heads=64))  # bench/mla.py's 128 heads
                   for bn, st in MLA_SWEEP for c, sp in ((False, False), (False, True), (True, False))]
    if "--bench" in sys.argv:  # the attention tiles bench/attention.py --block-n times (fp8: tensor-wise scales)
        wanted += [ArtifactKey.for_config("attention", AttentionConfig(
            target="sm_90a", dtype=dt, head_dim=d, causal=c, num_q=nq, block_n=bn,
            **default_exp2("sm_90a", dt, d)))
                   for dt, tiles in TILE_SWEEP.items() for d, pairs in tiles.items() for nq, bn in pairs
                   for c in (False, True)]
    if "--bench" in sys.argv or "--persistent" in sys.argv:  # the persistent kernels (bench/attention.py --block-n P)
        wanted += [ArtifactKey.for_config("attention", AttentionConfig(
            target="sm_90a", dtype=dt, head_dim=d, causal=c, num_q=nq, persistent=True,
            **default_exp2("sm_90a", dt, d)))
                   for dt, dims in PERSISTENT_SWEEP.items() for d, nqs in dims.items() for nq in nqs
                   for c in (False, True)]
    if "--bench" in sys.argv:  # the op's causal walks with the unmasked tiles' own loop (--block-n P2x64,P2x128,P)
        wanted += _walks(causal_only=True, single_kv_loop=False)
    if "--bench" in sys.argv:  # the causal tiles in each head's order (bench/attention.py --block-n H,H2x128,H3x0)
        wanted += [ArtifactKey.for_config("attention", AttentionConfig(
            target="sm_90a", dtype=dt, head_dim=d, causal=True, num_q=nq, block_n=bn, causal_order="heads",
            **default_exp2("sm_90a", dt, d)))
                   for dt, tiles in HEADS_ORDER_SWEEP.items() for d, pairs in tiles.items() for nq, bn in pairs]
    if "--bench" in sys.argv:  # the fp8 exp2 emulation counts bench/attention.py --dtype fp8 --exp2-emulation times
        wanted += [ArtifactKey.for_config("attention", AttentionConfig(target="sm_90a", dtype="fp8_e4m3", head_dim=d,
                                                                       causal=c, exp2_emulation=e, exp2_f16x2=f16,
                                                                       num_q=default_num_q("sm_90a", "fp8_e4m3", d, c)))
                   for d in FP8_HEAD_DIMS["sm_90a"] for e, f16 in FP8_EXP2_SWEEP for c in (False, True)]
    if "--bench" in sys.argv:  # the op's kernels with one consumer role where they allow it (--block-n U)
        wanted += one_role_variants(op_kernels)
    if "--bench" in sys.argv:  # the variants bench/gemm.py --sweep times
        sys.path.insert(0, str(HERE.parent.parent / "bench"))
        from gemm_variants import SWEEP

        wanted += [ArtifactKey.for_config("gemm", GemmConfig(target="sm_90a", b_major=b, **extra))
                   for extra in SWEEP for b in ("k", "mn")]
    return list(dict.fromkeys(wanted))  # one of each (the op's pingpong tile is also a test schedule)


def main() -> int:
    for key in keys():
        artifact = fetch(key)
        print(f"{artifact.path.name}: {artifact.manifest['registers']} registers, "
              f"{artifact.manifest['smem_bytes']} B smem")
    print(f"cache: {knobs.cache_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
