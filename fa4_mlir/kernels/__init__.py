"""Built-in kernels: name -> (config class, builder). Builders emit fa4-stage MLIR text; no MLIR import."""

from __future__ import annotations

from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.kernels import copy_pipeline, gemm
from fa4_mlir.kernels.source import KernelSource, Param, TensorMapSpec

KERNELS = {
    "copy-pipeline": (CopyPipelineConfig, copy_pipeline.build),
    "gemm": (GemmConfig, gemm.build),
}

__all__ = ["KERNELS", "KernelSource", "Param", "TensorMapSpec"]
