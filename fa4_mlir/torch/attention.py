"""``torch.ops.fa4.flash_attention``: the attention forward, flash-attn's calling convention.

``flash_attention(q, k, v, causal=False, softmax_scale=None, return_lse=False)`` computes
``softmax(softmax_scale * q k') v`` per batch and head for q (B, Sq, H, D) and k, v (B, Sk, Hk, D),
where Hk divides H (GQA / MQA: query head h reads K/V head h // (H / Hk)). ``causal`` masks key j for
query i when j > i (the top-left diagonal, as torch SDPA's ``is_causal``); the default scale is
1 / sqrt(D). With ``return_lse`` it also returns the log-sum-exp of each row's scaled logits
(B, H, Sq) in fp32. bf16 or fp16, head dims 64, 128, 256, 512 on sm_90 (64, 96, 128 on sm_100); any
sequence lengths; each tensor with a unit innermost stride and other strides multiples of 16 bytes
(a slice of a packed QKV tensor works). The output is a new contiguous tensor; no autograd. On CPU
tensors it runs the kernel in the PTX emulator when asked (``fa4_mlir.torch.emulated``).
"""

from __future__ import annotations

import math

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.attention import DEPTH512_HEAD_DIMS, HEAD_DIMS, AttentionConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention import launch_geometry
from fa4_mlir.runtime.tensormap import GlobalTensor
from fa4_mlir.torch.emulated import emulator, host_tensor, placement
from fa4_mlir.torch.tensors import current_stream, fa4_dtype

_lib = torch.library.Library("fa4", "FRAGMENT")
_lib.define("flash_attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? softmax_scale=None, "
            "bool return_lse=False) -> (Tensor, Tensor)")
_kernels: dict[tuple, tuple[AttentionConfig, runtime.Kernel]] = {}
_TMA_ALIGN = 16


def _kernel(device: int, dtype: str, head_dim: int, causal: bool, group: int):
    key = (device, dtype, head_dim, causal, group, knobs.debug_timeout_ms())
    found = _kernels.get(key)
    if found is None:
        config = AttentionConfig(target=runtime.device_target(device), dtype=dtype, head_dim=head_dim,
                                 causal=causal, group=group)
        found = _kernels[key] = (config, runtime.load("attention", config, device=device, debug=key[-1] or False))
    return found


def _shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int, int, int]:
    """(B, Sq, Sk, H, Hk, D), with the shape rules checked."""
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


def _check_layout(name: str, t: torch.Tensor) -> None:
    """TMA's rules, named for attention: a unit head_dim stride, 16-byte outer strides and start."""
    elem = t.element_size()
    if t.stride(3) != 1 and t.shape[3] > 1:
        raise LaunchError(f"flash_attention: {name} must have a unit stride along head_dim, got strides "
                          f"{tuple(t.stride())}; pass {name}.contiguous()")
    for dim in range(3):
        if t.shape[dim] > 1 and (t.stride(dim) * elem) % _TMA_ALIGN:
            raise LaunchError(f"flash_attention: {name} strides must be multiples of {_TMA_ALIGN // elem} elements "
                              f"({_TMA_ALIGN} bytes), got strides {tuple(t.stride())}; pass {name}.contiguous()")
    if t.data_ptr() % _TMA_ALIGN:
        raise LaunchError(f"flash_attention: {name} must start {_TMA_ALIGN}-byte aligned, got 0x{t.data_ptr():x}; "
                          f"pass {name}.contiguous()")


def _map_strides(t: torch.Tensor) -> tuple[int, ...]:
    """The strides of the (B, S, H, D) tensor as the kernel's 4-D tensor-map operand. A size-1
    dimension's stride is arbitrary in torch; it gets the contiguous one, which TMA accepts."""
    strides = list(t.stride())
    strides[3] = 1
    for i in (2, 1, 0):
        if t.shape[i] == 1:
            strides[i] = strides[i + 1] * t.shape[i + 1]
    return tuple(strides)


def _as_map(t: torch.Tensor, dtype: str) -> GlobalTensor:
    if t.device.type == "cpu":  # the emulator's operand: the same description over host memory
        return host_tensor(t, dtype, _map_strides(t))
    return GlobalTensor(t.data_ptr(), dtype, tuple(t.shape), _map_strides(t), t.device.index)


def _check_head_dim(target: str, d: int, where: str) -> None:
    dims = HEAD_DIMS[target] + (DEPTH512_HEAD_DIMS if target == "sm_100a" else ())  # 256/512: the pair kernel
    if d not in dims:
        raise LaunchError(f"flash_attention: head_dim must be one of {', '.join(map(str, dims))} on {where}, got {d}")


def flash_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                       softmax_scale: float | None = None, return_lse: bool = False):
    where = placement("flash_attention", {"q": q, "k": k, "v": v})
    dtype = fa4_dtype(q, "flash_attention: q")
    b, sq, sk, h, hk, d = _shapes(q, k, v)
    if isinstance(where, emulator):
        target = where.target
        _check_head_dim(target, d, f"{target} in the emulator")
    else:
        target = runtime.device_target(where)
        _check_head_dim(target, d, "this GPU")
    scale = 1.0 / math.sqrt(d) if softmax_scale is None else float(softmax_scale)
    if not math.isfinite(scale) or scale <= 0:
        raise LaunchError(f"flash_attention: softmax_scale must be finite and > 0, got {softmax_scale}")
    out = torch.empty((b, sq, h, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, h, sq) if return_lse else (0,), dtype=torch.float32, device=q.device)
    if b == 0 or sq == 0 or h == 0:
        return out, lse
    if sk == 0:  # no keys: the softmax of an empty row; flash-attn returns zeros and -inf
        out.zero_()
        lse.fill_(-math.inf)
        return out, lse
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_layout(name, t)
    if isinstance(where, emulator):
        config = AttentionConfig(target=target, dtype=dtype, head_dim=d, causal=bool(causal), group=h // hk)
        launch(config, where.load("attention", config), q, k, v, out, lse if return_lse else None, scale,
               emulated=where)
        return out, lse
    config, kernel = _kernel(where, dtype, d, bool(causal), h // hk)
    launch(config, kernel, q, k, v, out, lse if return_lse else None, scale)
    return out, lse


def launch(config: AttentionConfig, kernel: runtime.Kernel, q, k, v, out, lse, scale: float,
           emulated: emulator | None = None) -> None:
    """Run ``kernel`` (built for ``config``) on checked (B, S, H, D) tensors into ``out`` (and ``lse``
    unless None) on the current stream, or in ``emulated`` (kernel loaded there, CPU tensors);
    benchmarks use it to time other tile choices."""
    b, sq, h, _ = q.shape
    sk = k.shape[1]
    dtype = fa4_dtype(q, "flash_attention: q")
    grid = launch_geometry(config, b, sq, h, sk)
    args = {"q": _as_map(q, dtype), "k": _as_map(k, dtype), "v": _as_map(v, dtype), "o": _as_map(out, dtype),
            "seq_q": sq, "seq_k": sk, "num_heads": h, "scale_log2e": scale * math.log2(math.e),
            "write_lse": int(lse is not None)}
    if emulated is not None:
        emulated.run(kernel, grid, {**args, "lse": None if lse is None else lse.detach().numpy()})
        return
    kernel.launch(grid, {**args, "lse": (lse if lse is not None else out).data_ptr()},
                  stream=current_stream(q.device.index))


def _flash_attention_fake(q, k, v, causal=False, softmax_scale=None, return_lse=False):
    fa4_dtype(q, "flash_attention: q")
    b, sq, _, h, _, d = _shapes(q, k, v)
    return q.new_empty((b, sq, h, d)), q.new_empty((b, h, sq) if return_lse else (0,), dtype=torch.float32)


_lib.impl("flash_attention", flash_attention_op, "CompositeExplicitAutograd")
torch.library.register_fake("fa4::flash_attention", _flash_attention_fake, lib=_lib)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    softmax_scale: float | None = None, return_lse: bool = False):
    """``softmax(softmax_scale * q k') v`` (see the module docstring); ``(out, lse)`` with ``return_lse``."""
    out, lse = torch.ops.fa4.flash_attention(q, k, v, causal, softmax_scale, return_lse)
    return (out, lse) if return_lse else out
