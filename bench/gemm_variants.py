"""The sm_90a GEMM configs ``bench/gemm.py --sweep`` times against the default (no torch import:
``test/gpu/build_artifacts.py --bench`` builds their artifacts, both B layouts, where the compiler is)."""

PINGPONG = dict(pingpong=True)
PINGPONG_192 = dict(PINGPONG, tile_n=192, epi_tile_n=32)  # the op's pingpong tile (kernels.gemm.SM90_PINGPONG)
CLUSTER = dict(cluster_m=2)  # B multicast over a 2x1 cluster
SWEEP = [dict(), dict(CLUSTER), PINGPONG_192, dict(PINGPONG_192, **CLUSTER), dict(PINGPONG_192, group_m=4, **CLUSTER),
         dict(PINGPONG, tile_n=192, **CLUSTER), dict(PINGPONG, tile_n=128, **CLUSTER)]
