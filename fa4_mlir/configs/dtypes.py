"""Element types of kernel operands, by the names the CLI and configs use. No MLIR import."""

from __future__ import annotations

import dataclasses

from fa4_mlir.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class DType:
    name: str
    bytes: int
    mlir: str  # the MLIR element type

    @property
    def is_half(self) -> bool:
        """bf16/fp16: MMA K step 16 and 128B swizzle; fp8 uses K step 32 and 64B swizzle."""
        return self.bytes == 2 and self.name in ("bf16", "fp16")


DTYPES = {d.name: d for d in (
    DType("bf16", 2, "bf16"),
    DType("fp16", 2, "f16"),
    DType("fp8_e4m3", 1, "f8E4M3FN"),
    DType("fp32", 4, "f32"),
)}
OPERAND_DTYPES = ("bf16", "fp16", "fp8_e4m3")


def dtype(name: str, *, field: str, allowed=OPERAND_DTYPES) -> DType:
    """The DType called ``name``, or a ConfigError naming ``field``."""
    if name not in allowed:
        raise ConfigError(f"{field} must be one of {', '.join(allowed)}, got '{name}'")
    return DTYPES[name]
