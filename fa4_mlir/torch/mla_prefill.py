"""``torch.ops.fa4.mla_prefill``: multi-head latent attention (DeepSeek-V3), the prefill form.

``mla_prefill(q_nope, q_rope, k_nope, k_rope, v, causal=False, softmax_scale=None, return_lse=False,
q_scale=None, k_scale=None, v_scale=None)`` computes, per batch and query head h (K/V head h / group),

    out = softmax(softmax_scale * (q_nope k_nope' + q_rope k_rope')) v

for q_nope (B, Sq, H, 128), q_rope (B, Sq, H, 64), k_nope and v (B, Sk, Hk, 128) and k_rope
(B, Sk, Hk, 64), H a multiple of Hk (GQA; DeepSeek's prefill has Hk = H, the rope broadcast by the
caller): attention of depth 192 with values of 128, the model's per-head K and V. The default scale
is 1 / sqrt(192); ``causal`` hides key j from query i when j > i (the top-left diagonal, torch SDPA's
``is_causal``). With ``return_lse`` it also returns each row's log-sum-exp (B, H, Sq) fp32.

bf16 or fp16 on an sm_90 or sm_100 GPU (or CPU tensors in the PTX emulator): on sm_100 the FA4
kernel's MLA form (``kernels.attention.mla_prefill``), on sm_90 the sm_90a prefill kernel
(``hopper_mla``); one launch (``fa4_mlir.torch.mla.launch_prefill``) serves both. Each tensor needs a
unit innermost stride and 16-byte outer strides. A new contiguous output; no autograd.

fp8 (sm_100 only): q_nope, k_nope and v ``torch.float8_e4m3fn`` with tensor-wise float scales ``q_scale``
(q_nope's), ``k_scale`` (k_nope's) and ``v_scale`` (None: 1), q_rope and k_rope bf16 (unscaled), computes
``softmax(scale * (q_scale k_scale q_nope k_nope' + q_rope k_rope')) (v_scale v)`` into bf16; as in
``mla_attention``, the op folds q_scale k_scale into the softmax scale and divides q_rope by it.
"""

from __future__ import annotations

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.mla import NOPE, ROPE, MLAConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.torch.emulated import emulator, placement
from fa4_mlir.torch.mla import check_dtype_target, check_fp8_rope, check_scales, fold_scales, launch_prefill
from fa4_mlir.torch.tensors import (ATTENTION_DTYPES, attention_outputs, check_tma_operand, checked_scale, fa4_dtype,
                                    require_tensors)

_lib = torch.library.Library("fa4", "FRAGMENT")
_lib.define("mla_prefill(Tensor q_nope, Tensor q_rope, Tensor k_nope, Tensor k_rope, Tensor v, bool causal=False, "
            "float? softmax_scale=None, bool return_lse=False, float? q_scale=None, float? k_scale=None, "
            "float? v_scale=None) -> (Tensor, Tensor)")
_OP = "mla_prefill"
_kernels: dict[tuple, tuple[MLAConfig, runtime.Kernel]] = {}


def _shapes(q_nope, q_rope, k_nope, k_rope, v) -> tuple[int, int, int, int, int]:
    """(B, Sq, Sk, H, Hk), with the rank, shape and dtype rules checked."""
    named = {"q_nope": q_nope, "q_rope": q_rope, "k_nope": k_nope, "k_rope": k_rope, "v": v}
    require_tensors(_OP, named)
    for name, t in named.items():
        if t.dim() != 4:
            raise LaunchError(f"{_OP}: {name} must be 4-D (batch, seqlen, heads, depth), got shape {tuple(t.shape)}")
    b, sq, h, _ = q_nope.shape
    sk, hk = k_nope.shape[1], k_nope.shape[2]
    expected = {"q_nope": (b, sq, h, NOPE), "q_rope": (b, sq, h, ROPE), "k_nope": (b, sk, hk, NOPE),
                "k_rope": (b, sk, hk, ROPE), "v": (b, sk, hk, NOPE)}
    for name, t in named.items():
        if tuple(t.shape) != expected[name]:
            raise LaunchError(f"{_OP}: {name} must have shape {expected[name]}, got {tuple(t.shape)}")
    if hk == 0 or h % hk:
        raise LaunchError(f"{_OP}: the query heads must be a multiple of the K/V heads, got {h} and {hk}")
    if q_nope.dtype == torch.float8_e4m3fn:  # e4m3 q_nope, k_nope, v with a bf16 rope
        for name in ("k_nope", "v"):
            if named[name].dtype != q_nope.dtype:
                raise LaunchError(f"{_OP}: {name} dtype must be torch.float8_e4m3fn with an fp8 q_nope, got "
                                  f"{named[name].dtype}")
        check_fp8_rope(_OP, {"q_rope": q_rope, "k_rope": k_rope})
    elif len({t.dtype for t in named.values()}) != 1:
        raise LaunchError(f"{_OP}: q_nope, q_rope, k_nope, k_rope and v must have one dtype, got "
                          f"{', '.join(str(t.dtype) for t in named.values())}")
    return b, sq, sk, h, hk


def mla_prefill_op(q_nope, q_rope, k_nope, k_rope, v, causal: bool = False, softmax_scale: float | None = None,
                   return_lse: bool = False, q_scale: float | None = None, k_scale: float | None = None,
                   v_scale: float | None = None):
    tensors = {"q_nope": q_nope, "q_rope": q_rope, "k_nope": k_nope, "k_rope": k_rope, "v": v}
    require_tensors(_OP, tensors)
    where = placement(_OP, tensors)
    dtype = fa4_dtype(q_nope, f"{_OP}: q_nope", ATTENTION_DTYPES)
    b, sq, sk, h, hk = _shapes(q_nope, q_rope, k_nope, k_rope, v)
    check_dtype_target(dtype, where.target if isinstance(where, emulator) else runtime.device_target(where), _OP)
    scales = check_scales(dtype, q_scale, k_scale, v_scale, _OP)
    scale = checked_scale(_OP, softmax_scale, NOPE + ROPE)
    fp8 = dtype == "fp8_e4m3"
    out, lse, done = attention_outputs((b, sq, h, NOPE), torch.bfloat16 if fp8 else q_nope.dtype, (b, h, sq),
                                       return_lse, q_nope.device, sk)
    if done:
        return out, lse
    for name, t in tensors.items():
        check_tma_operand(_OP, name, t)
    lse_out = lse if return_lse else None
    scale, q_rope, v_factor = fold_scales(dtype, scale, q_rope, scales)
    rope = "bf16" if fp8 else ""
    if isinstance(where, emulator):
        config = MLAConfig(target=where.target, form="prefill", dtype=dtype, causal=bool(causal), group=h // hk,
                           rope_dtype=rope)
        launch_prefill(config, where.load("mla-attention", config), q_nope, q_rope, k_nope, k_rope, v, out, lse_out,
                       scale, emulated=where, v_scale=v_factor)
        return out, lse
    key = (where, dtype, bool(causal), h // hk, knobs.debug_timeout_ms())
    if key not in _kernels:
        config = MLAConfig(target=runtime.device_target(where), form="prefill", dtype=dtype, causal=bool(causal),
                           group=h // hk, rope_dtype=rope)
        _kernels[key] = config, runtime.load("mla-attention", config, device=where, debug=key[-1] or False)
    config, kernel = _kernels[key]
    launch_prefill(config, kernel, q_nope, q_rope, k_nope, k_rope, v, out, lse_out, scale, v_scale=v_factor)
    return out, lse


def _mla_prefill_fake(q_nope, q_rope, k_nope, k_rope, v, causal=False, softmax_scale=None, return_lse=False,
                      q_scale=None, k_scale=None, v_scale=None):
    dtype = fa4_dtype(q_nope, f"{_OP}: q_nope", ATTENTION_DTYPES)
    b, sq, _, h, _ = _shapes(q_nope, q_rope, k_nope, k_rope, v)
    check_scales(dtype, q_scale, k_scale, v_scale, _OP)
    return (q_nope.new_empty((b, sq, h, NOPE), dtype=torch.bfloat16 if dtype == "fp8_e4m3" else q_nope.dtype),
            q_nope.new_empty((b, h, sq) if return_lse else (0,), dtype=torch.float32))


_lib.impl("mla_prefill", mla_prefill_op, "CompositeExplicitAutograd")
torch.library.register_fake("fa4::mla_prefill", _mla_prefill_fake, lib=_lib)


def mla_prefill(q_nope: torch.Tensor, q_rope: torch.Tensor, k_nope: torch.Tensor, k_rope: torch.Tensor,
                v: torch.Tensor, causal: bool = False, softmax_scale: float | None = None, return_lse: bool = False,
                q_scale: float | None = None, k_scale: float | None = None, v_scale: float | None = None):
    """The prefill-form MLA forward (see the module docstring); ``(out, lse)`` with ``return_lse``. fp8
    inputs (sm_100) take tensor-wise float ``q_scale``, ``k_scale``, ``v_scale``."""
    out, lse = torch.ops.fa4.mla_prefill(q_nope, q_rope, k_nope, k_rope, v, causal, softmax_scale, return_lse,
                                         q_scale, k_scale, v_scale)
    return (out, lse) if return_lse else out
