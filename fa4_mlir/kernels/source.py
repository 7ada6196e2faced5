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


def kernel_module(name: str, target: str, args: str, prologue: list[str], roles: list[str], num_warps: int,
                  attributes: str = "", preamble: tuple[str, ...] = ()) -> str:
    """fa4-stage text of a warp-specialised kernel: one ``gpu.module @name`` for ``target`` holding
    ``gpu.func @name(args) kernel`` whose body is ``prologue`` then one ``fa4.warp_specialize`` of
    ``num_warps`` warps holding ``roles`` (``fa4.warp_role`` ops). ``preamble`` lines (type aliases)
    precede the module; ``attributes`` follows ``kernel`` (e.g. the cluster shape)."""
    lines = [
        *preamble,
        f'module attributes {{gpu.container_module, fa4.target = "{target}"}} {{',
        f'  gpu.module @{name} [#nvvm.target<chip = "{target}", features = "+ptx86", O = 3>] {{',
        f"    gpu.func @{name}({args}) kernel{attributes} {{",
        *prologue,
        '      "fa4.warp_specialize"() ({',
        *roles,
        "        gpu.yield",
        f"      }}) {{num_warps = {num_warps}}} : () -> ()",
        "      gpu.return",
        "    }",
        "  }",
        "}",
    ]
    return "\n".join(line for line in lines if line) + "\n"
