"""Kernel configurations: frozen, keyword-only, checked at construction; no MLIR import."""

from fa4_mlir.configs.depth512 import Depth512Config
from fa4_mlir.configs.fa4 import FA4Config, SmemBudget
from fa4_mlir.configs.support import Support
from fa4_mlir.configs.gemm import GemmConfig

__all__ = ["Depth512Config", "FA4Config", "GemmConfig", "SmemBudget", "Support"]
