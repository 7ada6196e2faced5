"""``torch.ops.fa4.flash_attention``: the attention forward, flash-attn's calling convention.

``flash_attention(q, k, v, causal=False, softmax_scale=None, return_lse=False)`` computes
``softmax(softmax_scale * q k') v`` per batch and head for q (B, Sq, H, D) and k, v (B, Sk, Hk, D),
where Hk divides H (GQA / MQA: query head h reads K/V head h // (H / Hk); on sm_90 one compiled kernel
serves every group, passed at launch). ``causal`` masks key j for query i when j > i (the top-left
diagonal, as torch SDPA's ``is_causal``); the default scale is 1 / sqrt(D). With ``return_lse`` it
also returns the log-sum-exp of each row's scaled logits (B, H, Sq) in fp32. bf16 or fp16, head dims
64, 96, 128, 192, 256, 512 on sm_90 (64, 96, 128, 256, 512 on sm_100); any sequence lengths; each
tensor with a unit innermost stride and other strides multiples of 16 bytes (a slice of a packed QKV
tensor works). The output is a new contiguous tensor; no autograd. On CPU tensors it runs the kernel
in the PTX emulator when asked (``fa4_mlir.torch.emulated``).

fp8 (``torch.float8_e4m3fn`` q, k, v; head dims ``FP8_HEAD_DIMS``) computes attention of the
dequantized inputs ``q * q_scale``, ``k * k_scale``, ``v * v_scale`` and returns bf16. ``q_scale`` and
``k_scale`` are tensor-wise (python floats, or None for 1: folded into the softmax scale) or
per-token fp32 tensors broadcastable to (B, H, Sq) and (B, Hk, Sk) (both tensors: the kernel
multiplies each score by its row's q scale and its key's k scale); ``v_scale`` is a float. On sm_90 the
op hands the kernel V transposed (``v_transposed``: one copy of V per call, on the current stream), since
fp8 wgmma reads its B operand K-major only.

A bf16 / fp16 call with a layout seen before (shapes, strides, dtypes, devices, flags, scale) takes
the fast path (``fa4_mlir.torch.fastpath``): the checks were done for that layout, so it checks the
addresses' alignment, allocates the outputs and launches the stored ``PackedLaunch``. Where the C++
host launcher is built (``fa4_mlir.torch.host_launcher``), such a call is launched from C++ without
entering Python, and ``_flash_attention_full`` is the path it defers to.
"""

from __future__ import annotations

import functools
import math

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.attention import DEPTH512_HEAD_DIMS, FP8_HEAD_DIMS, HEAD_DIMS, AttentionConfig
from fa4_mlir.configs.attention_op import op_fields
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention import gqa_arguments, launch_geometry, walk_arguments
from fa4_mlir.runtime.launcher import libcuda
from fa4_mlir.runtime.tensormap import GlobalTensor
from fa4_mlir.torch import host_launcher
from fa4_mlir.torch.emulated import _active, emulator, placement
from fa4_mlir.torch.fastpath import Plan, Plans, env_state
from fa4_mlir.torch.tensors import (ATTENTION_DTYPES, TMA_ALIGN, attention_outputs, check_tma_operand,
                                    checked_scale, current_stream, fa4_dtype, host_tensor, positive_float,
                                    require_tensors, tma_operand)
from fa4_mlir.torch.v_transpose import v_transposed

_SCHEMA = ("(Tensor q, Tensor k, Tensor v, bool causal=False, float? softmax_scale=None, bool return_lse=False, "
           "Tensor? q_scale=None, Tensor? k_scale=None, float? v_scale=None) -> (Tensor, Tensor)")
_lib = torch.library.Library("fa4", "FRAGMENT")
_lib.define("flash_attention" + _SCHEMA)
_lib.define("_flash_attention_full" + _SCHEMA)  # the full path, for fa4_mlir.torch.host_launcher
_kernels: dict[tuple, tuple[AttentionConfig, runtime.Kernel]] = {}
_plans = Plans()  # the fast path's plans (fa4_mlir.torch.fastpath)
_SLOTS = ("q", "k", "v", "o", "lse")  # the order of a plan's addresses


def _config(target: str, dtype: str, head_dim: int, causal: bool, group: int, token_scales: bool,
            seq_k: int, fields: dict | None = None) -> AttentionConfig:
    """The kernel the op runs for these inputs: the tile by head dim, mask and length, the persistent tile walk
    where it is the faster (``op_fields``, or the ``fields`` it gave)."""
    fields = fields or op_fields(target, dtype, head_dim, causal, seq_k)
    return AttentionConfig(target=target, dtype=dtype, head_dim=head_dim, causal=causal, group=group,
                           token_scales=token_scales, **fields)


def _kernel(device: int, target: str, dtype: str, head_dim: int, causal: bool, group: int, token_scales: bool,
            seq_k: int):
    fields = op_fields(target, dtype, head_dim, causal, seq_k)
    key = (device, dtype, head_dim, causal, group, token_scales, tuple(fields.values()), knobs.debug_timeout_ms())
    found = _kernels.get(key)
    if found is None:
        config = _config(target, dtype, head_dim, causal, group, token_scales, seq_k, fields)
        found = _kernels[key] = (config, runtime.load("attention", config, device=device, debug=key[-1] or False))
    return found


def _shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int, int, int]:
    """(B, Sq, Sk, H, Hk, D), with the shape rules checked."""
    require_tensors("flash_attention", {"q": q, "k": k, "v": v})
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise LaunchError(f"flash_attention: {name} must be 4-D (batch, seqlen, heads, head_dim), "
                              f"got shape {tuple(t.shape)}")
    b, sq, h, d = q.shape
    if tuple(k.shape) != tuple(v.shape):
        raise LaunchError(f"flash_attention: k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    bk, sk, hk, dk = k.shape
    if bk != b or dk != d:
        raise LaunchError(f"flash_attention: k and v must be (batch={b}, seqlen_k, heads_k, head_dim={d}) like q, "
                          f"got {tuple(k.shape)}")
    if hk < 1 or h % hk:
        raise LaunchError(f"flash_attention: k/v heads must divide q heads ({h}), got {hk}")
    if not (q.dtype == k.dtype == v.dtype):
        raise LaunchError(f"flash_attention: q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    return b, sq, sk, h, hk, d


def _check_head_dim(target: str, d: int, where: str, dtype: str) -> None:
    if dtype == "fp8_e4m3":
        dims, where = FP8_HEAD_DIMS[target], f"{where} for fp8"
    else:
        dims = HEAD_DIMS[target] + (DEPTH512_HEAD_DIMS if target == "sm_100a" else ())  # 256/512: the pair kernel
    if d not in dims:
        raise LaunchError(f"flash_attention: head_dim must be one of {', '.join(map(str, dims))} on {where}, got {d}")


def _token_scale(t, name: str, shape: tuple[int, int, int]) -> torch.Tensor:
    """A per-token scale as the kernel reads it: fp32 (B, heads, S') with S' = S rounded up to 4
    (16-byte TMA rows), broadcast from ``t``; the padding is 1."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise LaunchError(f"flash_attention: {name} must be a float, None or a floating-point tensor, got "
                          f"{type(t).__name__ if not isinstance(t, torch.Tensor) else t.dtype}")
    try:
        full = t.to(torch.float32).expand(shape)
    except RuntimeError:
        raise LaunchError(f"flash_attention: {name} must broadcast to (batch, heads, seqlen) = {shape}, got shape "
                          f"{tuple(t.shape)}") from None
    out = full.new_ones((*shape[:2], -(-shape[2] // 4) * 4))
    out[..., :shape[2]] = full
    return out


def _scales(dtype: str, q_scale, k_scale, v_scale, shapes) -> tuple[float, torch.Tensor | None,
                                                                     torch.Tensor | None]:
    """(v scale, per-token q scale, per-token k scale) after the rules: scales only with fp8; a missing
    per-token scale (the other one given) is 1."""
    given = [(n, x) for n, x in (("q_scale", q_scale), ("k_scale", k_scale), ("v_scale", v_scale)) if x is not None]
    if dtype != "fp8_e4m3":
        if given:
            raise LaunchError(f"flash_attention: {given[0][0]} must be None for {dtype} inputs (scales "
                              f"dequantize fp8 inputs), got {given[0][1]!r}")
        return 1.0, None, None
    v = 1.0 if v_scale is None else positive_float("flash_attention", "v_scale", v_scale)
    if q_scale is None and k_scale is None:
        return v, None, None
    one = torch.ones((), dtype=torch.float32, device=(q_scale if k_scale is None else k_scale).device)
    return (v, _token_scale(one if q_scale is None else q_scale, "q_scale", shapes[0]),
            _token_scale(one if k_scale is None else k_scale, "k_scale", shapes[1]))


def flash_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                       softmax_scale: float | None = None, return_lse: bool = False,
                       q_scale: torch.Tensor | None = None, k_scale: torch.Tensor | None = None,
                       v_scale: float | None = None, offer_plan: bool = False):
    """The op. ``offer_plan``: skip the fast path and hand a new plan to the host launcher (the
    ``_flash_attention_full`` op, which ``host_launcher.cpp`` calls for a layout it has no plan for)."""
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)):
        require_tensors("flash_attention", {"q": q, "k": k, "v": v})  # inline first: the fast path's cost
    key = None
    if q_scale is None and k_scale is None and v_scale is None:  # the fast path (fa4_mlir.torch.fastpath)
        key = (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, k.dtype, v.dtype,
               q.get_device(), k.get_device(), v.get_device(), causal, softmax_scale, return_lse, env_state(),
               _active.get())
        plan = None if offer_plan else _plans.get(key)
        if plan is not None:
            qp, kp, vp = q.data_ptr(), k.data_ptr(), v.data_ptr()
            if not (qp | kp | vp) % TMA_ALIGN:  # else the full path raises the alignment error
                out, lse = torch.empty_like(plan.out_like), torch.empty_like(plan.aux_like)
                plan.run((qp, kp, vp, out.data_ptr(), lse.data_ptr() if return_lse else plan.unused),
                         current_stream(plan.index))
                return out, lse
    where = placement("flash_attention", {"q": q, "k": k, "v": v, **{
        n: t for n, t in (("q_scale", q_scale), ("k_scale", k_scale)) if isinstance(t, torch.Tensor)}})
    dtype = fa4_dtype(q, "flash_attention: q", ATTENTION_DTYPES)
    b, sq, sk, h, hk, d = _shapes(q, k, v)
    if isinstance(where, emulator):
        target = where.target
        _check_head_dim(target, d, f"{target} in the emulator", dtype)
    else:
        target = runtime.device_target(where)
        _check_head_dim(target, d, "this GPU", dtype)
    v_factor, q_tokens, k_tokens = _scales(dtype, q_scale, k_scale, v_scale, ((b, h, sq), (b, hk, sk)))
    scale = checked_scale("flash_attention", softmax_scale, d)
    out_dtype = torch.bfloat16 if dtype == "fp8_e4m3" else q.dtype
    out, lse, done = attention_outputs((b, sq, h, d), out_dtype, (b, h, sq), return_lse, q.device, sk)
    if done:
        return out, lse
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tma_operand("flash_attention", name, t)
    tokens = q_tokens is not None
    scales = Fp8Scales(v_factor, q_tokens, k_tokens) if dtype == "fp8_e4m3" else None
    if isinstance(where, emulator):
        config = _config(target, dtype, d, bool(causal), h // hk, tokens, sk)
        launch(config, where.load("attention", config), q, k, v, out, lse if return_lse else None, scale,
               emulated=where, scales=scales)
        return out, lse
    config, kernel = _kernel(where, target, dtype, d, bool(causal), h // hk, tokens, sk)
    if key is not None and scales is None and libcuda() is not None:
        grid, args, _ = _arguments(config, q, k, v, out, lse if return_lse else None, scale, None,
                                   kernel.resident_ctas)
        lse_ptr = (lse if return_lse else out).data_ptr()
        # Without return_lse the kernel does not touch its lse pointer: later calls pass this one again
        # (no write), whatever their output's address.
        plan = Plan(kernel.packed(grid, {**args, "lse": lse_ptr}, _SLOTS), out, lse, unused=lse_ptr)
        _plans.put(key, plan)
        if offer_plan:  # the slots q, k, v, o, lse: arguments 0-2, outputs 0 and 1 (lse kept without return_lse)
            host_launcher.offer(plan.launch, (0, 1, 2, -1, -2 if return_lse else None))
        else:
            host_launcher.ensure()
        plan.run((q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse_ptr), current_stream(plan.index))
        return out, lse
    launch(config, kernel, q, k, v, out, lse if return_lse else None, scale, scales=scales)
    return out, lse


class Fp8Scales:
    """What an fp8 launch passes besides the tensors: V's tensor-wise scale and, with per-token scales,
    the padded fp32 (B, heads, S') scale tensors (``_token_scale``)."""

    def __init__(self, v_scale: float, q_tokens: torch.Tensor | None = None, k_tokens: torch.Tensor | None = None):
        self.v_scale, self.q_tokens, self.k_tokens = v_scale, q_tokens, k_tokens


def _v_operand(config: AttentionConfig, v: torch.Tensor) -> torch.Tensor:
    """The tensor the kernel's ``v`` operand describes: V itself, or for fp8 on sm_90a V^T (``v_transposed``,
    with the tile's rows of ones); the caller keeps it alive until the kernel is launched."""
    if config.is_fp8 and config.target == "sm_90a":
        return v_transposed(v, config.hopper.sum_rows)
    return v


def _scale_map(t: torch.Tensor) -> GlobalTensor:
    if t.device.type == "cpu":
        return host_tensor(t, "fp32")
    return GlobalTensor(t.data_ptr(), "fp32", tuple(t.shape), tuple(t.stride()), t.device.index)


def launch(config: AttentionConfig, kernel: runtime.Kernel, q, k, v, out, lse, scale: float,
           emulated: emulator | None = None, scales: Fp8Scales | None = None) -> None:
    """Run ``kernel`` (built for ``config``) on checked (B, S, H, D) tensors into ``out`` (and ``lse``
    unless None) on the current stream, or in ``emulated`` (kernel loaded there, CPU tensors);
    benchmarks use it to time other tile choices. fp8 kernels take ``scales``."""
    grid, args, v_op = _arguments(config, q, k, v, out, lse, scale, scales, kernel.resident_ctas)  # v_op: alive
    if emulated is not None:
        emulated.run(kernel, grid, {**args, "lse": None if lse is None else lse.detach().numpy()})
        return
    kernel.launch(grid, {**args, "lse": (lse if lse is not None else out).data_ptr()},
                  stream=current_stream(q.device.index))


def _arguments(config: AttentionConfig, q, k, v, out, lse, scale: float, scales: Fp8Scales | None, ctas: int):
    """The grid (a persistent kernel's for ``ctas`` resident CTAs), the kernel's arguments but ``lse``
    (tensors as ``GlobalTensor``s), after the checks of ``launch``, and the tensor the ``v`` operand
    describes (``_v_operand``), which the caller keeps alive until the launch: the map holds only its
    address."""
    b, sq, h, _ = q.shape
    sk = k.shape[1]
    dtype = fa4_dtype(q, "flash_attention: q", ATTENTION_DTYPES)
    if config.is_fp8 != (scales is not None) or config.token_scales != bool(scales and scales.q_tokens is not None):
        raise LaunchError(f"flash_attention: scales must be given exactly for fp8 kernels (per-token ones for "
                          f"token_scales), got {scales!r} for {config.describe()}")
    grid = launch_geometry(config, b, sq, h, sk, ctas)
    v_op = _v_operand(config, v)
    args = {"q": tma_operand(q, dtype), "k": tma_operand(k, dtype), "v": tma_operand(v_op, dtype),
            "o": tma_operand(out, config.out_dtype), "seq_q": sq, "seq_k": sk, "num_heads": h,
            **gqa_arguments(config, h, k.shape[2]), **walk_arguments(config, b),
            "scale_log2e": scale * math.log2(math.e), "write_lse": int(lse is not None)}
    if scales is not None:
        args["v_scale"] = scales.v_scale
        if scales.q_tokens is not None:
            args["q_scale"], args["k_scale"] = _scale_map(scales.q_tokens), _scale_map(scales.k_tokens)
    return grid, args, v_op


def _flash_attention_fake(q, k, v, causal=False, softmax_scale=None, return_lse=False, q_scale=None, k_scale=None,
                          v_scale=None):
    dtype = fa4_dtype(q, "flash_attention: q", ATTENTION_DTYPES)
    b, sq, _, h, _, d = _shapes(q, k, v)
    out_dtype = torch.bfloat16 if dtype == "fp8_e4m3" else q.dtype
    return (q.new_empty((b, sq, h, d), dtype=out_dtype),
            q.new_empty((b, h, sq) if return_lse else (0,), dtype=torch.float32))


_lib.impl("flash_attention", flash_attention_op, "CompositeExplicitAutograd")
_lib.impl("_flash_attention_full", functools.partial(flash_attention_op, offer_plan=True), "CompositeExplicitAutograd")
torch.library.register_fake("fa4::flash_attention", _flash_attention_fake, lib=_lib)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    softmax_scale: float | None = None, return_lse: bool = False, q_scale=None, k_scale=None,
                    v_scale: float | None = None):
    """``softmax(softmax_scale * q k') v`` (see the module docstring); ``(out, lse)`` with ``return_lse``.
    fp8 inputs take tensor-wise (float) or per-token (tensor) ``q_scale``/``k_scale`` and a float ``v_scale``."""
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)):
        require_tensors("flash_attention", {"q": q, "k": k, "v": v})  # inline first: the fast path's cost
    tensor_wise = [x for x in (q_scale, k_scale) if x is not None and not isinstance(x, torch.Tensor)]
    if tensor_wise and q.dtype != torch.float8_e4m3fn:
        _scales(fa4_dtype(q, "flash_attention: q", ATTENTION_DTYPES), q_scale, k_scale, v_scale, None)
    if tensor_wise:  # floats: fold them into the softmax scale when no per-token scale is given
        factor = math.prod(positive_float("flash_attention", n, x) for n, x in (("q_scale", q_scale),
                                                                                 ("k_scale", k_scale))
                           if x is not None and not isinstance(x, torch.Tensor))
        if not math.isfinite(factor) or factor <= 0:  # each one is finite and > 0: the product over- or underflowed
            raise LaunchError(f"flash_attention: q_scale * k_scale must be finite and > 0 (it scales the "
                              f"softmax), got {q_scale} * {k_scale} = {factor}")
        if any(isinstance(x, torch.Tensor) for x in (q_scale, k_scale)):  # with a per-token one: broadcast
            q_scale, k_scale = (torch.tensor(float(x), device=q.device)
                                if x is not None and not isinstance(x, torch.Tensor) else x for x in (q_scale, k_scale))
        else:
            softmax_scale = (1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale) * factor
            q_scale = k_scale = None
    out, lse = torch.ops.fa4.flash_attention(q, k, v, causal, softmax_scale, return_lse, q_scale, k_scale, v_scale)
    return (out, lse) if return_lse else out
