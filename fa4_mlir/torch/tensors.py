"""From torch tensors to what the runtime launches: checked placement, dtype and layout."""

from __future__ import annotations

import math

import numpy as np
import torch

from fa4_mlir.errors import LaunchError
from fa4_mlir.runtime.tensormap import GlobalTensor

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
ATTENTION_DTYPES = {**DTYPES, torch.float8_e4m3fn: "fp8_e4m3"}  # fp8 Q, K, V: dequantized by scales


def require_tensors(op: str, tensors: dict) -> None:
    """LaunchError naming the first of ``tensors`` (name -> argument) that is not a torch.Tensor: torch's
    schema check lets None through where an op's tensor argument is required."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise LaunchError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")


def fa4_dtype(t: torch.Tensor, what: str, allowed=DTYPES) -> str:
    if not isinstance(t, torch.Tensor):
        raise LaunchError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in allowed:
        names = ", ".join(str(d) for d in allowed)
        raise LaunchError(f"{what} dtype must be one of {names}, got {t.dtype}")
    return allowed[t.dtype]


def require_cuda(t: torch.Tensor, what: str) -> int:
    """The CUDA device index of ``t``; LaunchError when it lives elsewhere."""
    if t.device.type != "cuda":
        raise LaunchError(f"{what} must be a CUDA tensor, got device '{t.device}'; move it with .cuda()")
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def global_tensor(t: torch.Tensor, dtype: str) -> GlobalTensor:
    return GlobalTensor(t.data_ptr(), dtype, tuple(t.shape), tuple(t.stride()), t.device.index)


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # looked up once: the fast path calls it


def current_stream(device: int) -> int:
    """The raw handle of PyTorch's current stream on ``device`` (the cheap accessor, where present)."""
    if _RAW_STREAM is not None:
        return _RAW_STREAM(device)
    return torch.cuda.current_stream(device).cuda_stream


_SMS: dict[int, int] = {}


def sm_count(device: int) -> int:
    """The SMs of CUDA device ``device`` (asked once)."""
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


def positive_float(op: str, name: str, x) -> float:
    """``x`` (a dequantization scale) as a float: a Python number, finite and > 0."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise LaunchError(f"{op}: {name} must be a float, got {type(x).__name__}")
    value = float(x)
    if not math.isfinite(value) or value <= 0:
        raise LaunchError(f"{op}: {name} must be finite and > 0, got {x}")
    return value


def checked_scale(op: str, softmax_scale: float | None, depth: int) -> float:
    """The softmax scale: ``softmax_scale``, or 1 / sqrt(depth) when None; finite and > 0."""
    scale = 1.0 / math.sqrt(depth) if softmax_scale is None else float(softmax_scale)
    if not math.isfinite(scale) or scale <= 0:
        raise LaunchError(f"{op}: softmax_scale must be finite and > 0, got {softmax_scale}")
    return scale


def attention_outputs(out_shape: tuple, out_dtype: torch.dtype, lse_shape: tuple, return_lse: bool,
                      device: torch.device, seq_k: int) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """An attention op's new (out, lse) (lse empty unless ``return_lse``) and whether they are already
    the answer: an empty output, or no keys (the softmax of an empty row, as flash-attn returns it:
    zeros and an LSE of -inf), when no kernel runs."""
    out = torch.empty(out_shape, dtype=out_dtype, device=device)
    lse = torch.empty(lse_shape if return_lse else (0,), dtype=torch.float32, device=device)
    if out.numel() == 0:
        return out, lse, True
    if seq_k == 0:
        out.zero_()
        lse.fill_(-math.inf)
        return out, lse, True
    return out, lse, False


TMA_ALIGN = 16  # bytes: TMA's rule for a tensor's start and every outer stride


def check_tma_operand(op: str, name: str, t: torch.Tensor) -> None:
    """TMA's rules for tensor ``name`` of ``op``: a unit innermost stride, 16-byte outer strides and start."""
    elem, last = t.element_size(), t.dim() - 1
    if t.stride(last) != 1 and t.shape[last] > 1:
        raise LaunchError(f"{op}: {name} must have a unit innermost stride, got strides {tuple(t.stride())}; "
                          f"pass {name}.contiguous()")
    for dim in range(last):
        if t.shape[dim] > 1 and (t.stride(dim) * elem) % TMA_ALIGN:
            raise LaunchError(f"{op}: {name} strides must be multiples of {TMA_ALIGN // elem} elements "
                              f"({TMA_ALIGN} bytes), got strides {tuple(t.stride())}; pass {name}.contiguous()")
    if t.data_ptr() % TMA_ALIGN:
        raise LaunchError(f"{op}: {name} must start {TMA_ALIGN}-byte aligned, got 0x{t.data_ptr():x}; "
                          f"pass {name}.contiguous()")


def tma_operand(t: torch.Tensor, dtype: str) -> GlobalTensor:
    """``t`` as a kernel's 4-D (B, S, H, D) tensor-map operand (``tma_view``). CPU tensors (the
    emulator's operands) are described over host memory."""
    t, strides = tma_view(t)
    if t.device.type == "cpu":
        return host_tensor(t, dtype, strides)
    return GlobalTensor(t.data_ptr(), dtype, tuple(t.shape), strides, t.device.index)


def tma_view(t: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``t`` as 4-D (B, S, H, D) (a 3-D (B, S, D) tensor gets a head dimension of 1) and its strides
    for TMA: a size-1 dimension's stride is arbitrary in torch; it gets the contiguous one, which TMA
    accepts."""
    if t.dim() == 3:
        t = t.unsqueeze(2)
    strides = list(t.stride())
    strides[3] = 1
    for i in (2, 1, 0):
        if t.shape[i] == 1:
            strides[i] = strides[i + 1] * t.shape[i + 1]
    return t, tuple(strides)


def host_array(t: torch.Tensor) -> np.ndarray:
    """A NumPy view of a CPU tensor's memory (its shape and strides); 16-bit floats as uint16 bits,
    fp8 as uint8 bytes: the form the emulator's ``GlobalTensor.host`` takes."""
    t = t.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype == torch.float8_e4m3fn:  # NumPy has no fp8: the bytes
        return t.view(torch.uint8).numpy()
    return t.numpy()


def host_tensor(t: torch.Tensor, dtype: str, strides: tuple[int, ...] | None = None) -> GlobalTensor:
    """``t`` as a host GlobalTensor, optionally described with other ``strides`` (in elements) over
    the same memory, as the GPU path does for size-1 dimensions."""
    array = host_array(t)
    if strides is None:
        return GlobalTensor.host(array, dtype)
    return GlobalTensor(t.data_ptr(), dtype, tuple(t.shape), tuple(strides), None, array)
