"""``torch.ops.fa4.mla_attention``: multi-head latent attention (DeepSeek-V3), the absorbed form.

``mla_attention(q_nope, q_rope, kv_latent, k_rope, causal=False, softmax_scale=None, return_lse=False,
q_scale=None, k_scale=None, v_scale=None)``
computes, per batch and query head,

    out = softmax(softmax_scale * (q_nope kv_latent' + q_rope k_rope')) kv_latent

for q_nope (B, Sq, H, 512), q_rope (B, Sq, H, 64), kv_latent (B, Sk, 512) and k_rope (B, Sk, 64): the
K up-projection absorbed into the query, as serving stacks run MLA decode (FlashMLA's
``flash_mla_with_kvcache`` and vLLM's MLA backends take q = [q_nope | q_pe] of depth 576 against the
cache's [kv_c | k_pe] with v = kv_c of 512). Every query head reads the one latent head (MQA). The
default scale is 1 / sqrt(576); ``causal`` hides key j from query i when j > i (the top-left diagonal,
as torch SDPA's ``is_causal``; a decode step with a KV cache passes ``causal=False``). With
``return_lse`` it also returns the log-sum-exp of each row's scaled logits (B, H, Sq) in fp32.

bf16 or fp16 on an sm_90 or sm_100 GPU (or CPU tensors in the PTX emulator, ``fa4_mlir.torch.emulated``);
any lengths; each tensor with a unit innermost stride and other strides multiples of 16 bytes. On
sm_100 the kernel is the depth-512 pair-CTA kernel with a rope chunk, built for H (128 / H positions
of all H heads per pair when H divides 128; no split KV yet). On sm_90 the kernel
packs up to 64 heads (the largest power of 2 dividing H) into a tile's 64 rows; when the B x H / 64 CTAs
of a decode step leave SMs idle (not causal), it splits the keys into ranges over more CTAs, which
write fp32 partials that the attention-combine kernel merges (``num_splits``). The output is a new
contiguous tensor; no autograd. The prefill form (q/k 192, v 128) is ``torch.ops.fa4.mla_prefill``
(``fa4_mlir.torch.mla_prefill``), which runs its kernel (sm_90a's or sm_100a's: the same parameters)
through ``launch_prefill``.

fp8 (sm_100 only): q_nope and kv_latent ``torch.float8_e4m3fn`` with tensor-wise float scales
``q_scale``, ``k_scale`` (kv_latent's as K) and ``v_scale`` (kv_latent's as V; None: 1), q_rope and
k_rope bf16 (unscaled), computes ``softmax(scale * (q_scale k_scale q_nope kv' + q_rope k_rope'))
(v_scale kv_latent)`` into bf16. The kernel has one S accumulator for both parts, so the op folds
q_scale k_scale into the softmax scale and hands it q_rope / (q_scale k_scale), rounded to bf16 (one
more rounding of the rope; bf16 rather than fp16 so that small scales cannot overflow it).
"""

from __future__ import annotations

import math

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.mla import LATENT, ROPE, TILE_ROWS, MLAConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention import splitkv
from fa4_mlir.kernels.attention.hopper_mla import split_geometry
from fa4_mlir.kernels.attention.mla import launch_geometry
from fa4_mlir.torch.emulated import emulator, placement
from fa4_mlir.torch.split_decode import EMULATOR_SMS, combine
from fa4_mlir.torch.tensors import (ATTENTION_DTYPES, attention_outputs, check_tma_operand, checked_scale,
                                   current_stream, fa4_dtype, positive_float, require_tensors, sm_count,
                                   tma_operand)

_lib = torch.library.Library("fa4", "FRAGMENT")
_lib.define("mla_attention(Tensor q_nope, Tensor q_rope, Tensor kv_latent, Tensor k_rope, bool causal=False, "
            "float? softmax_scale=None, bool return_lse=False, float? q_scale=None, float? k_scale=None, "
            "float? v_scale=None) -> (Tensor, Tensor)")
_kernels: dict[tuple, tuple[MLAConfig, runtime.Kernel]] = {}
_OP = "mla_attention"
# a key range of at least 32 tiles (1024 keys): with the combine kernel (it was torch's logsumexp and einsum,
# which needed ranges of 4096 keys) on the H100 (docs/PERF.md, H 128) B 32 x 4096 keys in 2 ranges ran at
# 2.1x the unsplit kernel and B 4 x 4096 in 4 at 2.0x, while B 32 x 1024 keys split in 2 (16 tiles) ran
# slower than unsplit
MIN_SPLIT_TILES = 32


def num_splits(ctas: int, tiles: int, sms: int) -> int:
    """Key ranges per CTA tile for a grid of ``ctas`` over ``tiles`` key tiles on ``sms`` SMs
    (``splitkv.num_splits`` with ranges of at least ``MIN_SPLIT_TILES``; decode: B x H / 64 CTAs are often
    far fewer than the SMs)."""
    return splitkv.num_splits(ctas, tiles, sms, MIN_SPLIT_TILES)


def tile_heads(heads: int) -> int:
    """Heads packed into a 64-row tile: the largest power of 2 dividing ``heads``, at most 64."""
    return math.gcd(heads, TILE_ROWS)


def _shapes(q_nope, q_rope, kv, k_rope) -> tuple[int, int, int, int]:
    """(B, Sq, Sk, H), with the rank, shape and dtype rules checked."""
    require_tensors(_OP, {"q_nope": q_nope, "q_rope": q_rope, "kv_latent": kv, "k_rope": k_rope})
    forms = (("q_nope", q_nope, 4, f"(batch, seqlen_q, heads, {LATENT})"),
             ("q_rope", q_rope, 4, f"(batch, seqlen_q, heads, {ROPE})"),
             ("kv_latent", kv, 3, f"(batch, seqlen_k, {LATENT})"), ("k_rope", k_rope, 3, f"(batch, seqlen_k, {ROPE})"))
    for name, t, rank, form in forms:
        if t.dim() != rank:
            raise LaunchError(f"{_OP}: {name} must be {rank}-D {form}, got shape {tuple(t.shape)}")
    b, sq, h, d = q_nope.shape
    sk = kv.shape[1]
    expected = {"q_nope": (b, sq, h, LATENT), "q_rope": (b, sq, h, ROPE), "kv_latent": (b, sk, LATENT),
                "k_rope": (b, sk, ROPE)}
    for (name, t, _, form) in forms:
        if tuple(t.shape) != expected[name]:
            raise LaunchError(f"{_OP}: {name} must be {form} = {expected[name]}, got shape {tuple(t.shape)}")
    if q_nope.dtype == torch.float8_e4m3fn:  # the fp8 latent with 16-bit rope columns
        if kv.dtype != q_nope.dtype:
            raise LaunchError(f"{_OP}: kv_latent dtype must be torch.float8_e4m3fn with an fp8 q_nope, got {kv.dtype}")
        check_fp8_rope(_OP, {"q_rope": q_rope, "k_rope": k_rope})
    elif not (q_nope.dtype == q_rope.dtype == kv.dtype == k_rope.dtype):
        raise LaunchError(f"{_OP}: q_nope, q_rope, kv_latent and k_rope must have one dtype, got {q_nope.dtype}, "
                          f"{q_rope.dtype}, {kv.dtype}, {k_rope.dtype}")
    return b, sq, sk, h


def check_scales(dtype: str, q_scale, k_scale, v_scale, op: str = _OP) -> tuple[float, float, float]:
    """(q_scale, k_scale, v_scale) as floats (None: 1): given only with fp8 inputs, finite and > 0."""
    named = (("q_scale", q_scale), ("k_scale", k_scale), ("v_scale", v_scale))
    if dtype != "fp8_e4m3":
        for name, x in named:
            if x is not None:
                raise LaunchError(f"{op}: {name} must be None for {dtype} inputs (scales dequantize fp8 inputs), "
                                  f"got {x!r}")
    out = [1.0 if x is None else positive_float(op, name, x) for name, x in named]
    return out[0], out[1], out[2]


def check_dtype_target(dtype: str, target: str, op: str = _OP) -> None:
    if dtype == "fp8_e4m3" and target != "sm_100a":
        raise LaunchError(f"{op}: q_nope dtype must be torch.bfloat16 or torch.float16 on {target} (fp8 "
                          f"runs on sm_100a), got torch.float8_e4m3fn")


def check_fp8_rope(op: str, ropes: dict) -> None:
    """With fp8 inputs the rope tensors must be bf16 (the op rescales q_rope by 1 / (q_scale k_scale))."""
    for name, t in ropes.items():
        if t.dtype != torch.bfloat16:
            raise LaunchError(f"{op}: {name} dtype must be torch.bfloat16 with fp8 inputs (rescaled by "
                              f"1 / (q_scale k_scale), which could overflow fp16), got {t.dtype}")


def fold_scales(dtype: str, scale: float, q_rope: torch.Tensor, scales: tuple[float, float, float]) \
        -> tuple[float, torch.Tensor, float | None]:
    """What the kernel takes: (softmax scale, q_rope, v_scale), the latter None for 16-bit inputs. fp8: one
    S accumulator takes both parts, so S is in the e4m3 parts' units: q_scale k_scale goes into the softmax
    scale and q_rope is divided by it (rounded to bf16: one more rounding of the rope)."""
    if dtype != "fp8_e4m3":
        return scale, q_rope, None
    q_scale, k_scale, v_scale = scales
    factor = q_scale * k_scale
    if factor != 1.0:
        q_rope = (q_rope.float() / factor).to(torch.bfloat16)
    return scale * factor, q_rope, v_scale


def _config(target: str, dtype: str, causal: bool, heads: int, split: bool) -> MLAConfig:
    """The op's kernel for ``heads`` query heads: sm_90a packs ``tile_heads(heads)`` of them into a tile;
    the sm_100a pair kernel is built for the heads themselves (fp8: with bf16 rope columns)."""
    return MLAConfig(target=target, dtype=dtype, causal=causal, split_kv=split,
                     tile_heads=heads if target == "sm_100a" else tile_heads(heads),
                     rope_dtype="bf16" if dtype == "fp8_e4m3" else "")


def _kernel(device: int, dtype: str, causal: bool, heads: int, split: bool):
    key = (device, dtype, causal, heads, split, knobs.debug_timeout_ms())
    found = _kernels.get(key)
    if found is None:
        config = _config(runtime.device_target(device), dtype, causal, heads, split)
        found = _kernels[key] = (config, runtime.load("mla-attention", config, device=device, debug=key[-1] or False))
    return found


def split_count(b: int, sq: int, sk: int, h: int, causal: bool, sms: int) -> int:
    """Key ranges the op runs a (B, Sq, H) x Sk problem with on ``sms`` SMs (1: the kernel without split
    KV; causal problems are not split)."""
    if causal:
        return 1
    x, ys, _ = launch_geometry(MLAConfig(tile_heads=tile_heads(h)), b, sq, h, sk)
    return num_splits(x * ys * b, -(-sk // MLAConfig().bn), sms)


def mla_attention_op(q_nope: torch.Tensor, q_rope: torch.Tensor, kv_latent: torch.Tensor, k_rope: torch.Tensor,
                     causal: bool = False, softmax_scale: float | None = None, return_lse: bool = False,
                     q_scale: float | None = None, k_scale: float | None = None, v_scale: float | None = None):
    tensors = {"q_nope": q_nope, "q_rope": q_rope, "kv_latent": kv_latent, "k_rope": k_rope}
    require_tensors(_OP, tensors)
    where = placement(_OP, tensors)
    dtype = fa4_dtype(q_nope, f"{_OP}: q_nope", ATTENTION_DTYPES)
    b, sq, sk, h = _shapes(q_nope, q_rope, kv_latent, k_rope)
    target = where.target if isinstance(where, emulator) else runtime.device_target(where)
    check_dtype_target(dtype, target)
    scales = check_scales(dtype, q_scale, k_scale, v_scale)
    scale = checked_scale(_OP, softmax_scale, LATENT + ROPE)
    fp8 = dtype == "fp8_e4m3"
    out, lse, done = attention_outputs((b, sq, h, LATENT), torch.bfloat16 if fp8 else q_nope.dtype, (b, h, sq),
                                       return_lse, q_nope.device, sk)
    if done:
        return out, lse
    for name, t in tensors.items():
        check_tma_operand(_OP, name, t)
    lse_out = lse if return_lse else None
    scale, q_rope, v_factor = fold_scales(dtype, scale, q_rope, scales)
    if isinstance(where, emulator):
        splits = split_count(b, sq, sk, h, bool(causal), EMULATOR_SMS) if target == "sm_90a" else 1
        config = _config(target, dtype, bool(causal), h, splits > 1)
        launch(config, where.load("mla-attention", config), q_nope, q_rope, kv_latent, k_rope, out, lse_out, scale,
               emulated=where, splits=splits, v_scale=v_factor)
        return out, lse
    splits = split_count(b, sq, sk, h, bool(causal), sm_count(where)) if target == "sm_90a" else 1
    config, kernel = _kernel(where, dtype, bool(causal), h, splits > 1)
    launch(config, kernel, q_nope, q_rope, kv_latent, k_rope, out, lse_out, scale, splits=splits, v_scale=v_factor)
    return out, lse


def launch(config: MLAConfig, kernel: runtime.Kernel, q_nope, q_rope, kv_latent, k_rope, out, lse, scale: float,
           emulated: emulator | None = None, splits: int = 1, v_scale: float | None = None) -> None:
    """Run ``kernel`` (built for ``config``) on checked tensors into ``out`` (and ``lse`` unless None) on
    the current stream, or in ``emulated`` (CPU tensors); benchmarks use it to time other tiles. A
    ``split_kv`` kernel runs over (at most) ``splits`` key ranges into fp32 partials, combined here.
    fp8 kernels take ``v_scale`` and tensors in the kernel's units (``scale`` with q_scale k_scale folded
    in, q_rope divided by them: the module docstring)."""
    b, sq, h, _ = q_nope.shape
    sk = kv_latent.shape[1]
    fp8 = config.dtype == "fp8_e4m3"
    if fp8 != (v_scale is not None):
        raise LaunchError(f"{_OP}: v_scale must be given exactly for fp8 kernels, got {v_scale!r} for "
                          f"{config.describe()}")
    dtype = fa4_dtype(q_nope, f"{_OP}: q_nope", ATTENTION_DTYPES)
    rope = fa4_dtype(q_rope, f"{_OP}: q_rope")
    args = {"q_nope": tma_operand(q_nope, dtype), "q_rope": tma_operand(q_rope, rope),
            "kv": tma_operand(kv_latent, dtype), "k_rope": tma_operand(k_rope, rope), "seq_q": sq, "seq_k": sk,
            "num_heads": h, "scale_log2e": scale * math.log2(math.e)}
    if config.target == "sm_100a":  # the pair kernel reads V through a second map of the latent
        args["kv_v"] = args["kv"]
    if fp8:
        args["v_scale"] = float(v_scale)
    if config.split_kv:
        _launch_split(config, kernel, args, out, lse, splits, emulated)
        return
    grid = launch_geometry(config, b, sq, h, sk)
    args.update(o=tma_operand(out, fa4_dtype(out, f"{_OP}: out")), write_lse=int(lse is not None))
    if emulated is not None:
        emulated.run(kernel, grid, {**args, "lse": None if lse is None else lse.detach().numpy()})
        return
    kernel.launch(grid, {**args, "lse": (lse if lse is not None else out).data_ptr()},
                  stream=current_stream(q_nope.device.index))


def _launch_split(config: MLAConfig, kernel, args: dict, out, lse, splits: int, emulated) -> None:
    """The split-KV launch: fp32 O and LSE partials per key range, then the attention-combine kernel:
    ``lse = log sum_s exp(lse_s)`` and ``O = sum_s exp(lse_s - lse) O_s`` (rounded once, into ``out``)."""
    b, sq, h, _ = out.shape
    grid, split_keys = split_geometry(config, b, sq, h, args["seq_k"], splits)
    ranges = grid[0] // launch_geometry(config, b, sq, h, args["seq_k"])[0]
    if b * sq * h * ranges * LATENT >= 1 << 31:  # the kernel's 32-bit element indices
        raise LaunchError(f"{_OP}: split KV partials must have < 2^31 elements, got {b * sq * h * ranges * LATENT}")
    o_acc = torch.empty((b, sq, h, ranges, LATENT), dtype=torch.float32, device=out.device)
    lse_acc = torch.empty((b, h, sq, ranges), dtype=torch.float32, device=out.device)
    args = {**args, "num_splits": ranges, "split_keys": split_keys}
    if emulated is not None:
        emulated.run(kernel, grid, {**args, "o": o_acc.numpy(), "lse": lse_acc.numpy()})
    else:
        kernel.launch(grid, {**args, "o": o_acc.data_ptr(), "lse": lse_acc.data_ptr()},
                      stream=current_stream(out.device.index))
    combine(emulated if emulated is not None else out.device.index, "sm_90a", o_acc, lse_acc, out, lse)


def launch_prefill(config: MLAConfig, kernel: runtime.Kernel, q_nope, q_rope, k_nope, k_rope, v, out, lse,
                   scale: float, emulated: emulator | None = None, v_scale: float | None = None) -> None:
    """The prefill form's kernel (``config.form == "prefill"``, either target) on (B, S, H, D) tensors:
    q_nope (.., 128), q_rope (.., 64), k_nope and v (B, Sk, H / group, 128), k_rope (B, Sk, H / group, 64),
    into ``out`` (B, Sq, H, 128) and ``lse`` (B, H, Sq) unless None; benchmarks and tests use it. fp8
    kernels take ``v_scale`` and tensors in the kernel's units (as ``launch``)."""
    b, sq, h, _ = q_nope.shape
    sk = k_nope.shape[1]
    fp8 = config.dtype == "fp8_e4m3"
    if fp8 != (v_scale is not None):
        raise LaunchError(f"mla_prefill: v_scale must be given exactly for fp8 kernels, got {v_scale!r} for "
                          f"{config.describe()}")
    named = {"q_nope": q_nope, "q_rope": q_rope, "k_nope": k_nope, "k_rope": k_rope, "v": v, "o": out}
    args = {**{n: tma_operand(t, fa4_dtype(t, f"mla_prefill: {n}", ATTENTION_DTYPES)) for n, t in named.items()},
            "seq_q": sq, "seq_k": sk, "num_heads": h, "scale_log2e": scale * math.log2(math.e),
            "write_lse": int(lse is not None)}
    if fp8:
        args["v_scale"] = float(v_scale)
    grid = launch_geometry(config, b, sq, h, sk)
    if emulated is not None:
        emulated.run(kernel, grid, {**args, "lse": None if lse is None else lse.detach().numpy()})
        return
    kernel.launch(grid, {**args, "lse": (lse if lse is not None else out).data_ptr()},
                  stream=current_stream(q_nope.device.index))


def _mla_attention_fake(q_nope, q_rope, kv_latent, k_rope, causal=False, softmax_scale=None, return_lse=False,
                        q_scale=None, k_scale=None, v_scale=None):
    dtype = fa4_dtype(q_nope, f"{_OP}: q_nope", ATTENTION_DTYPES)
    b, sq, _, h = _shapes(q_nope, q_rope, kv_latent, k_rope)
    check_scales(dtype, q_scale, k_scale, v_scale)
    out_dtype = torch.bfloat16 if dtype == "fp8_e4m3" else q_nope.dtype
    return (q_nope.new_empty((b, sq, h, LATENT), dtype=out_dtype),
            q_nope.new_empty((b, h, sq) if return_lse else (0,), dtype=torch.float32))


_lib.impl("mla_attention", mla_attention_op, "CompositeExplicitAutograd")
torch.library.register_fake("fa4::mla_attention", _mla_attention_fake, lib=_lib)


def mla_attention(q_nope: torch.Tensor, q_rope: torch.Tensor, kv_latent: torch.Tensor, k_rope: torch.Tensor,
                  causal: bool = False, softmax_scale: float | None = None, return_lse: bool = False,
                  q_scale: float | None = None, k_scale: float | None = None, v_scale: float | None = None):
    """The absorbed-form MLA forward (see the module docstring); ``(out, lse)`` with ``return_lse``. fp8
    latents (sm_100) take tensor-wise float ``q_scale``, ``k_scale``, ``v_scale``."""
    out, lse = torch.ops.fa4.mla_attention(q_nope, q_rope, kv_latent, k_rope, causal, softmax_scale, return_lse,
                                           q_scale, k_scale, v_scale)
    return (out, lse) if return_lse else out
