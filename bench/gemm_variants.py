"""The sm_90a GEMM configs ``bench/gemm.py --sweep`` times against the default (no torch import:
``test/gpu/build_artifacts.py --bench`` builds their artifacts where the compiler is)."""

SWEEP = [dict(), dict(group_m=16), dict(group_m=4), dict(epi_tile_n=32), dict(epi_tile_n=32, num_stages=3)]
