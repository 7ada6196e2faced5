"""The ``torch.ops.fa4`` custom ops.

``copy_pipeline(x, scale) -> scale * x``: the copy-pipeline kernel on a 2-D tensor. ``x`` is bf16 or
fp16 on an sm_90 or sm_100 GPU, with a unit innermost stride, a 16-byte aligned start and rows a
multiple of 16 bytes apart (TMA's rules); any number of rows, and columns a multiple of 8. The
result is a new contiguous tensor; math is in f32, rounded once.

The ops are defined with ``torch.library.Library`` (schema, one implementation for every backend,
and a fake implementation) rather than ``torch.library.custom_op``, whose Python autograd wrapper
costs about 17 us per call (bench/launch_overhead.py); they have no autograd formula.
"""

from __future__ import annotations

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.copy_pipeline import launch_geometry
from fa4_mlir.torch.tensors import current_stream, fa4_dtype, global_tensor, require_cuda

_lib = torch.library.Library("fa4", "DEF")
_lib.define("copy_pipeline(Tensor x, float scale) -> Tensor")
_kernels: dict[tuple, tuple[CopyPipelineConfig, runtime.Kernel]] = {}


def _copy_kernel(device: int, dtype: str) -> tuple[CopyPipelineConfig, runtime.Kernel]:
    """The loaded kernel for ``device`` and ``dtype`` (and the FA4_DEBUG setting), memoised."""
    key = (device, dtype, knobs.debug_timeout_ms())
    found = _kernels.get(key)
    if found is None:
        config = CopyPipelineConfig(dtype=dtype, target=runtime.device_target(device))
        found = _kernels[key] = (config, runtime.load("copy-pipeline", config, device=device, debug=key[2] or False))
    return found


def _check_shape(x: torch.Tensor) -> None:
    if x.dim() != 2:
        raise LaunchError(f"copy_pipeline: x must be 2-D, got shape {tuple(x.shape)}")


def copy_pipeline(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale * x`` through the fa4 copy-pipeline kernel (TMA load, smem ring, TMA store)."""
    device = require_cuda(x, "copy_pipeline: x")
    dtype = fa4_dtype(x, "copy_pipeline: x")
    _check_shape(x)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    config, kernel = _copy_kernel(device, dtype)
    grid, tiles = launch_geometry(config, x.shape[0], x.shape[1], kernel.resident_ctas)
    kernel.launch(grid, {"src": global_tensor(x, dtype), "dst": global_tensor(out, dtype), **tiles,
                         "scale": float(scale)}, stream=current_stream(device))
    return out


def _copy_pipeline_fake(x: torch.Tensor, scale: float) -> torch.Tensor:
    fa4_dtype(x, "copy_pipeline: x")
    _check_shape(x)
    return x.new_empty(x.shape)


# CompositeExplicitAutograd: every backend reaches the checks above (a CPU tensor gets our message).
_lib.impl("copy_pipeline", copy_pipeline, "CompositeExplicitAutograd")
torch.library.register_fake("fa4::copy_pipeline", _copy_pipeline_fake, lib=_lib)
