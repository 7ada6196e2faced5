"""The ``torch.ops.fa4`` custom ops.

``gemm_residual(a, b, c, alpha, beta) -> alpha * a @ b + beta * c``: the warp-specialised GEMM with
its residual epilogue (see ``gemm_residual``).

``copy_pipeline(x, scale) -> scale * x``: the copy-pipeline kernel on a 2-D tensor. ``x`` is bf16 or
fp16 on an sm_90 or sm_100 GPU (or on the CPU in the PTX emulator, when asked: see
``fa4_mlir.torch.emulated``), with a unit innermost stride, a 16-byte aligned start and rows a
multiple of 16 bytes apart (TMA's rules); any number of rows, and columns a multiple of 8. The
result is a new contiguous tensor; math is in f32, rounded once.

The ops are defined with ``torch.library.Library`` (schema, one implementation for every backend,
and a fake implementation) rather than ``torch.library.custom_op``, whose Python autograd wrapper
costs about 17 us per call (bench/launch_overhead.py); they have no autograd formula. A
``gemm_residual`` call with a layout seen before takes the fast path (``fa4_mlir.torch.fastpath``):
its stored plan, the new addresses written into pre-packed parameters, a ctypes launch; where the C++
host launcher is built (``fa4_mlir.torch.host_launcher``), such a call is launched from C++ without
entering Python, and ``_gemm_residual_full`` is the path it defers to.
"""

from __future__ import annotations

import functools

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels import gemm
from fa4_mlir.kernels.copy_pipeline import launch_geometry
from fa4_mlir.runtime.launcher import libcuda
from fa4_mlir.torch import host_launcher
from fa4_mlir.torch.emulated import _active, emulator, placement
from fa4_mlir.torch.fastpath import Plan, Plans, env_state
from fa4_mlir.torch.tensors import TMA_ALIGN, current_stream, fa4_dtype, global_tensor, host_tensor, require_tensors

_lib = torch.library.Library("fa4", "DEF")
_lib.define("copy_pipeline(Tensor x, float scale) -> Tensor")
_GEMM_SCHEMA = "(Tensor a, Tensor b, Tensor c, float alpha=1.0, float beta=1.0) -> Tensor"
_lib.define("gemm_residual" + _GEMM_SCHEMA)
_lib.define("_gemm_residual_full" + _GEMM_SCHEMA)  # the full path, for fa4_mlir.torch.host_launcher
_kernels: dict[tuple, tuple[object, runtime.Kernel]] = {}
_plans = Plans()  # gemm_residual's fast-path plans (fa4_mlir.torch.fastpath)


def _copy_kernel(device: int, dtype: str) -> tuple[CopyPipelineConfig, runtime.Kernel]:
    """The loaded kernel for ``device`` and ``dtype`` (and the FA4_DEBUG setting), memoised."""
    key = (device, dtype, knobs.debug_timeout_ms())
    found = _kernels.get(key)
    if found is None:
        config = CopyPipelineConfig(dtype=dtype, target=runtime.device_target(device))
        found = _kernels[key] = (config, runtime.load("copy-pipeline", config, device=device, debug=key[2] or False))
    return found


def _check_shape(x: torch.Tensor) -> None:
    require_tensors("copy_pipeline", {"x": x})
    if x.dim() != 2:
        raise LaunchError(f"copy_pipeline: x must be 2-D, got shape {tuple(x.shape)}")


def copy_pipeline(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale * x`` through the fa4 copy-pipeline kernel (TMA load, smem ring, TMA store)."""
    require_tensors("copy_pipeline", {"x": x})
    where = placement("copy_pipeline", {"x": x})
    dtype = fa4_dtype(x, "copy_pipeline: x")
    _check_shape(x)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    if isinstance(where, emulator):
        config = CopyPipelineConfig(dtype=dtype, target=where.target)
        kernel = where.load("copy-pipeline", config)
        grid, tiles = launch_geometry(config, x.shape[0], x.shape[1], kernel.resident_ctas)
        where.run(kernel, grid, {"src": host_tensor(x, dtype), "dst": host_tensor(out, dtype), **tiles,
                                 "scale": float(scale)})
        return out
    config, kernel = _copy_kernel(where, dtype)
    grid, tiles = launch_geometry(config, x.shape[0], x.shape[1], kernel.resident_ctas)
    kernel.launch(grid, {"src": global_tensor(x, dtype), "dst": global_tensor(out, dtype), **tiles,
                         "scale": float(scale)}, stream=current_stream(where))
    return out


def _copy_pipeline_fake(x: torch.Tensor, scale: float) -> torch.Tensor:
    fa4_dtype(x, "copy_pipeline: x")
    _check_shape(x)
    return x.new_empty(x.shape)


# CompositeExplicitAutograd: every backend reaches the checks above (a CPU tensor gets our message).
_lib.impl("copy_pipeline", copy_pipeline, "CompositeExplicitAutograd")
torch.library.register_fake("fa4::copy_pipeline", _copy_pipeline_fake, lib=_lib)


# ---------------------------------------------------------------------------------------------------
# gemm_residual
# ---------------------------------------------------------------------------------------------------


def _gemm_kernel(device: int, dtype: str, b_major: str, m: int, n: int) -> tuple[GemmConfig, runtime.Kernel]:
    """The kernel for an (m, n) output: the target's default config or, where it is faster
    (``gemm.choose_schedule``), the pingpong one."""
    debug = knobs.debug_timeout_ms()

    def load(config: GemmConfig) -> tuple[GemmConfig, runtime.Kernel]:
        key = ("gemm", device, config, debug)
        found = _kernels.get(key)
        if found is None:
            found = _kernels[key] = (config, runtime.load("gemm", config, device=device, debug=debug or False))
        return found

    config, kernel = load(GemmConfig(dtype=dtype, target=runtime.device_target(device), b_major=b_major))
    chosen = gemm.choose_schedule(config, m, n, kernel.resident_ctas)
    return (config, kernel) if chosen is config else load(chosen)


def _gemm_shapes(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[int, int, int]:
    require_tensors("gemm_residual", {"a": a, "b": b, "c": c})
    for name, t in (("a", a), ("b", b), ("c", c)):
        if t.dim() != 2:
            raise LaunchError(f"gemm_residual: {name} must be 2-D, got shape {tuple(t.shape)}")
    (m, k), (kb, n) = a.shape, b.shape
    if kb != k:
        raise LaunchError(f"gemm_residual: b must be (K, N) with K = a.shape[1] = {k}, got shape {tuple(b.shape)}")
    if tuple(c.shape) != (m, n):
        raise LaunchError(f"gemm_residual: c must be (M, N) = ({m}, {n}), got shape {tuple(c.shape)}; "
                          f"expand a broadcast residual with .expand({m}, {n}).contiguous()")
    if not (a.dtype == b.dtype == c.dtype):
        raise LaunchError(f"gemm_residual: a, b and c must have one dtype, got {a.dtype}, {b.dtype}, {c.dtype}")
    return m, n, k


def _b_operand(b: torch.Tensor) -> tuple[str, torch.Tensor]:
    """How the kernel reads B (K, N): row-major as is ("mn"), or as the (N, K) row-major tensor
    whose transpose it is ("k")."""
    if b.stride(1) == 1 and (b.shape[1] > 1 or b.stride(0) != 1):
        return "mn", b
    if b.stride(0) == 1:
        return "k", b.t()
    raise LaunchError(f"gemm_residual: b must be row-major (K, N) or the transpose of a row-major (N, K) "
                      f"tensor, got strides {tuple(b.stride())}; pass b.contiguous()")


def gemm_residual(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, alpha: float = 1.0,
                  beta: float = 1.0, offer_plan: bool = False) -> torch.Tensor:
    """``alpha * a @ b + beta * c`` (``torch.addmm(c, a, b, beta=beta, alpha=alpha)``) in one kernel.

    ``a`` is (M, K) row-major; ``b`` is (K, N), row-major or the transpose of a row-major (N, K)
    tensor (an ``nn.Linear`` weight ``w`` as ``w.t()``); ``c`` is (M, N) with a unit column stride;
    all bf16 or all fp16 on one sm_90 / sm_100 GPU. Rows must start 16-byte aligned (K and N
    multiples of 8 for contiguous tensors): TMA's rule. The product accumulates in f32 and the
    epilogue rounds once; with ``beta = 0``, ``c`` is not read (NaN in it does not propagate).
    ``offer_plan``: skip the fast path and hand a new plan to the host launcher (``_gemm_residual_full``).
    """
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and isinstance(c, torch.Tensor)):
        require_tensors("gemm_residual", {"a": a, "b": b, "c": c})  # inline first: the fast path's cost
    key = (a.shape, a.stride(), b.shape, b.stride(), c.shape, c.stride(), a.dtype, b.dtype, c.dtype, a.get_device(),
           b.get_device(), c.get_device(), alpha, beta, env_state(), _active.get())  # fa4_mlir.torch.fastpath
    plan = None if offer_plan else _plans.get(key)
    if plan is not None:
        ap, bp, cp = a.data_ptr(), b.data_ptr(), c.data_ptr()
        if not (ap | bp | cp) % TMA_ALIGN:  # else the full path raises the alignment error
            out = torch.empty_like(plan.out_like)
            plan.run((ap, bp, cp, out.data_ptr()), current_stream(plan.index))
            return out
    where = placement("gemm_residual", {"a": a, "b": b, "c": c})
    dtype = fa4_dtype(a, "gemm_residual: a")
    m, n, k = _gemm_shapes(a, b, c)
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return out
    if k == 0:  # no product: D = beta * C, which TMA cannot tile (a zero-sized dimension)
        return out.copy_(c * beta if beta != 0 else torch.zeros_like(c))
    b_major, b_mem = _b_operand(b)
    scalars = {"alpha": float(alpha), "beta": float(beta), "has_c": int(beta != 0)}
    if isinstance(where, emulator):
        from fa4_mlir.runtime.emulated import RESIDENT_CTAS  # the emulator's, imported with it

        config = gemm.choose_schedule(GemmConfig(dtype=dtype, target=where.target, b_major=b_major), m, n,
                                      RESIDENT_CTAS)
        kernel = where.load("gemm", config)
        grid, tiles = gemm.launch_geometry(config, m, n, k, kernel.resident_ctas)
        where.run(kernel, grid, {"a": host_tensor(a, dtype), "b": host_tensor(b_mem, dtype),
                                 "c": host_tensor(c, dtype), "d": host_tensor(out, dtype), **tiles, **scalars})
        return out
    config, kernel = _gemm_kernel(where, dtype, b_major, m, n)
    grid, tiles = gemm.launch_geometry(config, m, n, k, kernel.resident_ctas)
    args = {"a": global_tensor(a, dtype), "b": global_tensor(b_mem, dtype), "c": global_tensor(c, dtype),
            "d": global_tensor(out, dtype), **tiles, **scalars}
    if libcuda() is None:
        kernel.launch(grid, args, stream=current_stream(where))
        return out
    plan = Plan(kernel.packed(grid, args, ("a", "b", "c", "d")), out)
    _plans.put(key, plan)
    if offer_plan:  # the slots a, b, c, d: arguments 0-2 (b's address is b_mem's), output 0
        host_launcher.offer(plan.launch, (0, 1, 2, -1))
    else:
        host_launcher.ensure()
    plan.run((a.data_ptr(), b.data_ptr(), c.data_ptr(), out.data_ptr()), current_stream(where))
    return out


def _gemm_residual_fake(a, b, c, alpha=1.0, beta=1.0):
    fa4_dtype(a, "gemm_residual: a")
    m, n, _ = _gemm_shapes(a, b, c)
    return a.new_empty((m, n))


_lib.impl("gemm_residual", gemm_residual, "CompositeExplicitAutograd")
_lib.impl("_gemm_residual_full", functools.partial(gemm_residual, offer_plan=True), "CompositeExplicitAutograd")
torch.library.register_fake("fa4::gemm_residual", _gemm_residual_fake, lib=_lib)
