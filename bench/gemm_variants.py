"""The sm_90a GEMM configs ``bench/gemm.py --sweep`` times against the default (no torch import:
``test/gpu/build_artifacts.py --bench`` builds their artifacts, both B layouts, where the compiler is)."""

PINGPONG = dict(pingpong=True)
SWEEP = [dict(), dict(PINGPONG, tile_n=192, epi_tile_n=32), dict(PINGPONG, tile_n=192),
         dict(PINGPONG, tile_n=128), dict(PINGPONG, tile_n=128, epi_tile_n=32), dict(PINGPONG, tile_m=64),
         dict(PINGPONG, tile_n=192, epi_tile_n=32, group_m=16)]
