"""Host-side references: random bf16/fp16 data as raw bits and the kernel's f32-then-round math."""

from __future__ import annotations

import numpy as np

POISON = {"bf16": 0xFFFF, "fp16": 0xFFFF}  # NaN in both: an element the kernel never wrote


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, rounding to nearest even (what cvt.rn.bf16.f32 does)."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def to_f32(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def from_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return bf16_bits(values)
    return values.astype(np.float16).view(np.uint16)


def random_bits(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    return from_f32(rng.standard_normal(shape, dtype=np.float32) * 4, dtype)


def scaled(bits: np.ndarray, scale: float, dtype: str) -> np.ndarray:
    """The kernel's result: widen to f32, multiply by the f32 scale, round once."""
    return from_f32(to_f32(bits, dtype) * np.float32(scale), dtype)
