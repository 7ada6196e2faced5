"""From torch tensors to what the runtime launches: checked placement, dtype and layout."""

from __future__ import annotations

import torch

from fa4_mlir.errors import LaunchError
from fa4_mlir.runtime.tensormap import GlobalTensor

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
ATTENTION_DTYPES = {**DTYPES, torch.float8_e4m3fn: "fp8_e4m3"}  # fp8 Q, K, V: dequantized by scales


def fa4_dtype(t: torch.Tensor, what: str, allowed=DTYPES) -> str:
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


def current_stream(device: int) -> int:
    """The raw handle of PyTorch's current stream on ``device`` (the cheap accessor, where present)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream
