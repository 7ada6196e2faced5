"""The sm_90a GEMM configs ``bench/gemm.py --sweep`` times against the default (no torch import:
``test/gpu/build_artifacts.py --bench`` builds their artifacts where the compiler is)."""

SWEEP = [dict(), dict(epi_tile_n=64), dict(group_m=4), dict(group_m=16), dict(num_stages=3)]
