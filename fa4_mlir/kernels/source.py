"""What a kernel builder hands the compiler: fa4-stage MLIR text plus the launch facts it implies.

No MLIR import: the runtime reads the same facts from the manifest on machines without MLIR.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TensorMapSpec:
    """How the host must encode a kernel's CUtensorMap parameter (cuTensorMapEncodeTiled)."""

    dtype: str  # "bf16", "fp16", ...
    box: tuple[int, ...]  # box size, innermost dimension first
    swizzle: str = "none"  # "none", "32B", "64B", "128B"

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "box": list(self.box), "swizzle": self.swizzle}


@dataclasses.dataclass(frozen=True)
class Param:
    """A kernel parameter: its name, what the host passes, and for tensor maps how to encode it."""

    name: str
    kind: str  # "tensormap" | "i32" | "f32" | "ptr"
    doc: str = ""
    tensor_map: TensorMapSpec | None = None


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """An fa4-stage kernel: ``mlir`` holds one gpu.module with one kernel function ``name``."""

    name: str
    target: str
    mlir: str
    params: tuple[Param, ...]
    grid: str  # how the host computes the grid, e.g. "(ceil(M / 128), 1, 1)"
    config: dict = dataclasses.field(default_factory=dict)
