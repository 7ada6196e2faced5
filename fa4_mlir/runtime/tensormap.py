"""CUtensorMap encoding (``cuTensorMapEncodeTiled``) with the rules TMA enforces checked first.

The driver answers a bad tensor map with a bare CUDA_ERROR_INVALID_VALUE; ``check_tiled`` names the
rule instead: the dtype the kernel was built for, the rank, a unit innermost stride, 16-byte aligned
base address and outer strides, dimension limits, and box sizes. Shapes and strides are given
outermost first (as PyTorch and NumPy do); the manifest's boxes are innermost first (as the driver
takes them).
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.configs.dtypes import DTYPES
from fa4_mlir.errors import LaunchError
from fa4_mlir.runtime.driver import check, cu

_DRIVER_DTYPES = {"bf16": "BFLOAT16", "fp16": "FLOAT16", "fp32": "FLOAT32", "fp8_e4m3": "UINT8"}
_SWIZZLES = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}
_SWIZZLE_SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128}
TMA_ALIGN = 16  # bytes: base address and every outer stride
MAX_BOX = 256
MAX_DIM = 1 << 32
MAX_STRIDE = 1 << 40


@dataclasses.dataclass(frozen=True)
class GlobalTensor:
    """A tensor in device memory: its address, element type and layout (in elements, outermost first).

    ``GlobalTensor.host(array, dtype)`` describes a NumPy array instead, for kernels loaded with
    ``device="emulator"``; it keeps the array in ``array`` (not part of equality, hash or repr).
    """

    address: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    device: int | None = None
    array: object = dataclasses.field(default=None, compare=False, hash=False, repr=False)

    @classmethod
    def host(cls, array, dtype: str) -> GlobalTensor:
        """The NumPy ``array`` holding ``dtype`` elements (bf16 as ``uint16`` bit patterns): address =
        its data pointer, shape and strides (in elements) its own."""
        import numpy as np

        if not isinstance(array, np.ndarray):
            raise LaunchError(f"GlobalTensor.host takes a numpy.ndarray, got {type(array).__name__}")
        if dtype not in DTYPES:
            raise LaunchError(f"GlobalTensor.host dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        elem = DTYPES[dtype].bytes
        if array.itemsize != elem:
            raise LaunchError(f"GlobalTensor.host array must have {elem}-byte elements to hold {dtype}, got "
                              f"{array.dtype} ({array.itemsize}-byte); pass the bit patterns, e.g. "
                              f"array.view(np.uint{8 * elem})")
        if any(s % elem for s in array.strides):
            raise LaunchError(f"GlobalTensor.host array strides must be whole elements, got {array.strides} "
                              f"bytes for {elem}-byte elements")
        return cls(int(array.__array_interface__["data"][0]), dtype, tuple(int(n) for n in array.shape),
                   tuple(int(s) // elem for s in array.strides), None, array)

    @classmethod
    def contiguous(cls, address: int, dtype: str, shape, device: int | None = None) -> GlobalTensor:
        strides, step = [], 1
        for size in reversed(tuple(shape)):
            strides.append(step)
            step *= size
        return cls(int(address), dtype, tuple(shape), tuple(reversed(strides)), device)


def check_tiled(tensor: GlobalTensor, spec: dict, what: str) -> None:
    """Raise LaunchError unless ``tensor`` can be encoded with ``spec`` (dtype, box, swizzle)."""
    dtype, box, swizzle = spec["dtype"], list(spec["box"]), spec.get("swizzle", "none")
    if dtype not in _DRIVER_DTYPES:
        raise LaunchError(f"the manifest's tensor map for {what} must have a dtype of "
                          f"{', '.join(_DRIVER_DTYPES)}, got '{dtype}'; rebuild the artifact with fa4-compile")
    if tensor.dtype != dtype:
        raise LaunchError(f"{what} must be {dtype} (the kernel was compiled for it), got {tensor.dtype}")
    elem = DTYPES[dtype].bytes
    if len(tensor.shape) != len(box) or len(tensor.strides) != len(box):
        raise LaunchError(f"{what} must be {len(box)}-D, got shape {tuple(tensor.shape)}")
    for size in tensor.shape:
        if not 1 <= size <= MAX_DIM:
            raise LaunchError(f"{what} dimensions must be in [1, 2^32], got shape {tuple(tensor.shape)}")
    if tensor.strides[-1] != 1:
        raise LaunchError(f"{what} must have a unit innermost stride (TMA reads rows of contiguous elements), "
                          f"got strides {tuple(tensor.strides)}; pass .contiguous()")
    for stride in tensor.strides[:-1]:
        if stride <= 0 or (stride * elem) % TMA_ALIGN or stride * elem >= MAX_STRIDE:
            raise LaunchError(
                f"{what} strides must be multiples of {TMA_ALIGN} bytes (TMA), got strides "
                f"{tuple(tensor.strides)} of {elem}-byte elements; pad the innermost dimension to a multiple "
                f"of {TMA_ALIGN // elem} elements")
    if tensor.address % TMA_ALIGN:
        raise LaunchError(f"{what} address must be {TMA_ALIGN}-byte aligned (TMA), got 0x{tensor.address:x}; "
                          f"a view that starts mid-row is not, pass .contiguous()")
    span = _SWIZZLE_SPAN.get(swizzle, 0)
    if span == 0 or any(not 1 <= b <= MAX_BOX for b in box) or (box[0] * elem) % TMA_ALIGN or \
            (span and box[0] * elem > span):
        raise LaunchError(f"the manifest's tensor map for {what} is invalid (box {box}, swizzle {swizzle}); "
                          f"rebuild the artifact with fa4-compile")


def encode_tiled(tensor: GlobalTensor, spec: dict, what: str = "tensor"):
    """The CUtensorMap of ``tensor`` tiled by ``spec['box']``; out-of-bounds boxes read zeros."""
    check_tiled(tensor, spec, what)
    driver = cu()
    elem = DTYPES[tensor.dtype].bytes
    rank = len(tensor.shape)
    dims = [driver.cuuint64_t(size) for size in reversed(tensor.shape)]
    strides = [driver.cuuint64_t(stride * elem) for stride in reversed(tensor.strides[:-1])]
    box = [driver.cuuint32_t(b) for b in spec["box"]]
    ones = [driver.cuuint32_t(1)] * rank
    return check(driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_DRIVER_DTYPES[tensor.dtype]}"),
        rank, tensor.address, dims, strides, box, ones,
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLES[spec.get('swizzle', 'none')]}"),
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), f"cuTensorMapEncodeTiled({what})")
