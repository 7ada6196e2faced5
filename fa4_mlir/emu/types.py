"""PTX types: storage dtype, width and signedness of each type name (without the dot).

Registers and values are NumPy arrays over the 32 lanes of a warp, holding raw bits in an unsigned
dtype of the type's width (predicates are bool). 8-bit types live in 16-bit registers, as in PTX.
"""

from __future__ import annotations

import numpy as np

STORAGE = {
    "pred": np.bool_,
    "b8": np.uint8, "u8": np.uint8, "s8": np.uint8, "e4m3": np.uint8, "e5m2": np.uint8,
    "b16": np.uint16, "u16": np.uint16, "s16": np.uint16, "f16": np.uint16, "bf16": np.uint16,
    "e4m3x2": np.uint16, "e5m2x2": np.uint16,
    "b32": np.uint32, "u32": np.uint32, "s32": np.uint32, "f32": np.uint32, "f16x2": np.uint32,
    "bf16x2": np.uint32, "tf32": np.uint32, "e4m3x4": np.uint32, "u16x2": np.uint32, "s16x2": np.uint32,
    "b64": np.uint64, "u64": np.uint64, "s64": np.uint64, "f64": np.uint64, "f32x2": np.uint64,
    "b128": None,
}
# A register declared with an 8-bit type is 16 bits wide (PTX widens .b8/.u8/.s8 registers).
REGISTER_STORAGE = dict(STORAGE, b8=np.uint16, u8=np.uint16, s8=np.uint16)
SIGNED = {"s8", "s16", "s32", "s64"}
FLOAT = {"f16", "bf16", "f32", "f64", "f16x2", "bf16x2", "f32x2", "tf32", "e4m3", "e5m2", "e4m3x2", "e5m2x2"}
SIGNED_VIEW = {np.uint8: np.int8, np.uint16: np.int16, np.uint32: np.int32, np.uint64: np.int64}


def width(type_name: str) -> int:
    """Bytes of one value of ``type_name``."""
    if type_name == "pred":
        return 1
    if type_name == "b128":
        return 16
    return np.dtype(STORAGE[type_name]).itemsize


def is_type(name: str) -> bool:
    return name in STORAGE


def fit(value: np.ndarray, dtype, signed: bool) -> np.ndarray:
    """``value`` (raw bits) converted to storage ``dtype``: truncated if narrower, zero- or sign-extended
    if wider (``signed`` says which)."""
    if value.dtype == dtype:
        return value
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return value != 0
    if value.dtype == np.bool_:
        return value.astype(dtype)
    if dtype.itemsize > value.dtype.itemsize and signed:
        return value.view(SIGNED_VIEW[value.dtype.type]).astype(SIGNED_VIEW[dtype.type]).view(dtype)
    return value.astype(dtype)
