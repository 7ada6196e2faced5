"""Built-in kernels: name -> (config class, builder). Builders emit fa4-stage MLIR text; no MLIR import."""

from __future__ import annotations

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.combine import CombineConfig
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.configs.mla import MLAConfig
from fa4_mlir.kernels import attention, copy_pipeline, gemm
from fa4_mlir.kernels.attention import combine, mla
from fa4_mlir.kernels.source import KernelSource, Param, TensorMapSpec

KERNELS = {
    "attention": (AttentionConfig, attention.build),
    "attention-combine": (CombineConfig, combine.build),
    "copy-pipeline": (CopyPipelineConfig, copy_pipeline.build),
    "gemm": (GemmConfig, gemm.build),
    "mla-attention": (MLAConfig, mla.build),
}

__all__ = ["KERNELS", "KernelSource", "Param", "TensorMapSpec"]
