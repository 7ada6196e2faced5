"""What a kernel builder hands the compiler: the fa4-stage kernel (built, or MLIR text) plus its launch facts.

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


class KernelSource:
    """An fa4-stage kernel: one gpu.module with one kernel function ``name``, as ``mlir`` text or as
    the ``module`` a ``fa4_mlir.dsl.Kernel`` built (printed to ``mlir``, with the authors' locations,
    only when asked). ``compile_kernel`` compiles a copy of the built module in its own Context, so a
    source compiles any number of times and no text round trip costs compile time."""

    __slots__ = ("name", "target", "params", "grid", "config", "_text", "_module")

    def __init__(self, name: str, target: str, params: tuple[Param, ...], grid: str, config: dict | None = None,
                 *, mlir: str | None = None, module=None):
        if (mlir is None) == (module is None):
            raise ValueError(f"kernel source '{name}' must have exactly one of mlir text and a built module")
        self.name, self.target, self.params, self.grid = name, target, tuple(params), grid
        self.config = dict(config or {})
        self._text, self._module = mlir, module

    @property
    def mlir(self) -> str:
        """The kernel as fa4-stage MLIR text (a built module prints its ops' Python locations and names)."""
        if self._text is None:
            self._text = self._module.operation.get_asm(enable_debug_info=True, use_name_loc_as_prefix=True)
        return self._text

    def built_module(self):
        """A fresh copy of the built ``builtin.module`` operation (in the Context it was built in), or
        None for a text source."""
        return None if self._module is None else self._module.operation.clone()

    def __repr__(self) -> str:
        return f"KernelSource(name={self.name!r}, target={self.target!r}, grid={self.grid!r}, config={self.config!r})"
