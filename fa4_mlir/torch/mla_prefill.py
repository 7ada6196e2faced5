"""``torch.ops.fa4.mla_prefill``: multi-head latent attention (DeepSeek-V3), the prefill form.

``mla_prefill(q_nope, q_rope, k_nope, k_rope, v, causal=False, softmax_scale=None, return_lse=False)``
computes, per batch and query head h (K/V head h / group),

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
"""

from __future__ import annotations

import math

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.mla import NOPE, ROPE, MLAConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.torch.emulated import emulator, placement
from fa4_mlir.torch.mla import launch_prefill
from fa4_mlir.torch.tensors import check_tma_operand, fa4_dtype

_lib = torch.library.Library("fa4", "FRAGMENT")
_lib.define("mla_prefill(Tensor q_nope, Tensor q_rope, Tensor k_nope, Tensor k_rope, Tensor v, bool causal=False, "
            "float? softmax_scale=None, bool return_lse=False) -> (Tensor, Tensor)")
_OP = "mla_prefill"
_kernels: dict[tuple, tuple[MLAConfig, runtime.Kernel]] = {}


def _shapes(q_nope, q_rope, k_nope, k_rope, v) -> tuple[int, int, int, int, int]:
    """(B, Sq, Sk, H, Hk), with the rank, shape and dtype rules checked."""
    named = {"q_nope": q_nope, "q_rope": q_rope, "k_nope": k_nope, "k_rope": k_rope, "v": v}
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
    if len({t.dtype for t in named.values()}) != 1:
        raise LaunchError(f"{_OP}: q_nope, q_rope, k_nope, k_rope and v must have one dtype, got "
                          f"{', '.join(str(t.dtype) for t in named.values())}")
    return b, sq, sk, h, hk


def mla_prefill_op(q_nope, q_rope, k_nope, k_rope, v, causal: bool = False, softmax_scale: float | None = None,
                   return_lse: bool = False):
    tensors = {"q_nope": q_nope, "q_rope": q_rope, "k_nope": k_nope, "k_rope": k_rope, "v": v}
    where = placement(_OP, tensors)
    dtype = fa4_dtype(q_nope, f"{_OP}: q_nope")
    b, sq, sk, h, hk = _shapes(q_nope, q_rope, k_nope, k_rope, v)
    scale = 1.0 / math.sqrt(NOPE + ROPE) if softmax_scale is None else float(softmax_scale)
    if not math.isfinite(scale) or scale <= 0:
        raise LaunchError(f"{_OP}: softmax_scale must be finite and > 0, got {softmax_scale}")
    out = torch.empty((b, sq, h, NOPE), dtype=q_nope.dtype, device=q_nope.device)
    lse = torch.empty((b, h, sq) if return_lse else (0,), dtype=torch.float32, device=q_nope.device)
    if b == 0 or sq == 0 or h == 0:
        return out, lse
    if sk == 0:  # no keys: the softmax of an empty row, as flash_attention returns it
        out.zero_()
        lse.fill_(-math.inf)
        return out, lse
    for name, t in tensors.items():
        check_tma_operand(_OP, name, t)
    lse_out = lse if return_lse else None
    if isinstance(where, emulator):
        config = MLAConfig(target=where.target, form="prefill", dtype=dtype, causal=bool(causal), group=h // hk)
        launch_prefill(config, where.load("mla-attention", config), q_nope, q_rope, k_nope, k_rope, v, out, lse_out,
                       scale, emulated=where)
        return out, lse
    key = (where, dtype, bool(causal), h // hk, knobs.debug_timeout_ms())
    if key not in _kernels:
        config = MLAConfig(target=runtime.device_target(where), form="prefill", dtype=dtype, causal=bool(causal),
                           group=h // hk)
        _kernels[key] = config, runtime.load("mla-attention", config, device=where, debug=key[-1] or False)
    config, kernel = _kernels[key]
    launch_prefill(config, kernel, q_nope, q_rope, k_nope, k_rope, v, out, lse_out, scale)
    return out, lse


def _mla_prefill_fake(q_nope, q_rope, k_nope, k_rope, v, causal=False, softmax_scale=None, return_lse=False):
    fa4_dtype(q_nope, f"{_OP}: q_nope")
    b, sq, _, h, _ = _shapes(q_nope, q_rope, k_nope, k_rope, v)
    return (q_nope.new_empty((b, sq, h, NOPE)),
            q_nope.new_empty((b, h, sq) if return_lse else (0,), dtype=torch.float32))


_lib.impl("mla_prefill", mla_prefill_op, "CompositeExplicitAutograd")
torch.library.register_fake("fa4::mla_prefill", _mla_prefill_fake, lib=_lib)


def mla_prefill(q_nope: torch.Tensor, q_rope: torch.Tensor, k_nope: torch.Tensor, k_rope: torch.Tensor,
                v: torch.Tensor, causal: bool = False, softmax_scale: float | None = None, return_lse: bool = False):
    """The prefill-form MLA forward (see the module docstring); ``(out, lse)`` with ``return_lse``."""
    out, lse = torch.ops.fa4.mla_prefill(q_nope, q_rope, k_nope, k_rope, v, causal, softmax_scale, return_lse)
    return (out, lse) if return_lse else out
