"""Split-KV decode in ``torch.ops.fa4.flash_attn_with_kvcache``: when a call's grid leaves SMs idle (a decode
step of a small batch: one CTA per K/V head and sequence), the keys are cut into ranges over more CTAs
(``AttentionConfig.split_kv``) that write fp32 partials, and the "attention-combine" kernel merges them into
``out`` and the LSE (``fa4_mlir.kernels.attention.splitkv``).

``num_splits`` is FlashAttention's argument: 0 lets the op choose (``split_count``), 1 never splits, n > 1
asks for at most n ranges (fewer when the keys hold fewer tiles).
"""

from __future__ import annotations

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention import launch_geometry
from fa4_mlir.kernels.attention.splitkv import num_splits, split_arguments, split_geometry, tile_keys
from fa4_mlir.torch.emulated import emulator
from fa4_mlir.torch.tensors import current_stream, host_array, sm_count

EMULATOR_SMS = 132  # the emulator splits as an H100 would
# a range of at least this many K/V tiles: shorter ranges cost more in partials and their combine than the
# SMs they fill gain (docs/PERF.md, the decode sweep)
MIN_SPLIT_TILES = 4
MAX_SPLITS = 128  # FlashAttention's bound of num_splits


def check_num_splits(op: str, requested) -> int:
    """The op's ``num_splits`` argument: an int in [0, MAX_SPLITS]."""
    if not isinstance(requested, int) or isinstance(requested, bool) or not 0 <= requested <= MAX_SPLITS:
        raise LaunchError(f"{op}: num_splits must be an int in [0, {MAX_SPLITS}] (0: the op chooses, 1: no split), "
                          f"got {requested!r}")
    return requested


def split_count(config: AttentionConfig, batch: int, seq_q: int, heads: int, seq_k: int, sms: int,
                requested: int) -> int:
    """Key ranges for the (unsplit) paged ``config`` on a (batch, seq_q, heads) x seq_k call on ``sms`` SMs:
    ``requested`` when > 0 (1: no split), else 1 when the grid fills the SMs, else ``splitkv.num_splits`` with
    ranges of at least ``MIN_SPLIT_TILES`` tiles."""
    if requested:
        return requested
    x, ys, b = launch_geometry(config, batch, seq_q, heads, seq_k)
    return num_splits(x * ys * b, -(-seq_k // tile_keys(config)), sms, MIN_SPLIT_TILES)


def sms_of(where) -> int:
    return EMULATOR_SMS if isinstance(where, emulator) else sm_count(where)


_combines: dict[tuple, runtime.Kernel] = {}


def combine(where, target: str, o_part: torch.Tensor, lse_part: torch.Tensor, out: torch.Tensor,
            lse: torch.Tensor | None) -> None:
    """``out`` (B, Sq, H, D) and ``lse`` (B, H, Sq, unless None) = the fp32 partials o_part (B, Sq, H, S, D) and
    lse_part (B, H, Sq, S) merged by the attention-combine kernel of ``target``, on the current stream (``where``:
    a device index) or in the emulator; through dense temporaries where ``out`` or ``lse`` has other strides (the
    kernel writes them densely)."""
    from fa4_mlir.configs.combine import CombineConfig
    from fa4_mlir.kernels.attention.combine import launch_geometry

    b, sq, h, d = out.shape
    config = CombineConfig(target=target, dtype="fp16" if out.dtype == torch.float16 else "bf16", head_dim=d)
    dense_out = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    dense_lse = lse if lse is None or lse.is_contiguous() else torch.empty(lse.shape, device=lse.device)
    args = {"batch": b, "seq_q": sq, "num_heads": h, "num_splits": o_part.shape[3], "write_lse": int(lse is not None)}
    grid = launch_geometry(config, b, sq, h)
    if isinstance(where, emulator):
        where.run(where.load("attention-combine", config), grid,
                  {**args, "o_partial": o_part.numpy(), "lse_partial": lse_part.numpy(), "o": host_array(dense_out),
                   "lse": None if lse is None else dense_lse.numpy()})
    else:
        key = (where, config, knobs.debug_timeout_ms())
        if key not in _combines:
            _combines[key] = runtime.load("attention-combine", config, device=where, debug=key[-1] or False)
        pointers = {"o_partial": o_part.data_ptr(), "lse_partial": lse_part.data_ptr(), "o": dense_out.data_ptr(),
                    "lse": (dense_lse if lse is not None else out).data_ptr()}  # not written without write_lse
        _combines[key].launch(grid, {**args, **pointers}, stream=current_stream(where))
    if dense_out is not out:
        out.copy_(dense_out)
    if lse is not None and dense_lse is not lse:
        lse.copy_(dense_lse)


def launch_split(where, kernel, config: AttentionConfig, args: dict, out: torch.Tensor, lse: torch.Tensor,
                 return_lse: bool, splits: int) -> None:
    """Run the split ``kernel`` (``config.split_kv``) over at most ``splits`` ranges of ``args["seq_k"]`` keys
    into fp32 partials, then the combine into ``out`` (B, Sq, H, D) and ``lse`` (B, H, Sq, when ``return_lse``).
    ``args`` are the paged kernel's other arguments (device pointers, or NumPy arrays in the emulator)."""
    b, sq, h, d = out.shape
    grid, keys = split_geometry(config, b, sq, h, args["seq_k"], splits)
    ranges = grid[0] // launch_geometry(config, b, sq, h, args["seq_k"])[0]
    o_part = torch.empty((b, sq, h, ranges, d), dtype=torch.float32, device=out.device)
    lse_part = torch.empty((b, h, sq, ranges), dtype=torch.float32, device=out.device)
    args = {**args, **split_arguments(config, ranges, keys)}
    if isinstance(where, emulator):
        where.run(kernel, grid, {**args, "o": o_part.numpy(), "lse": lse_part.numpy()})
    else:
        kernel.launch(grid, {**args, "o": o_part.data_ptr(), "lse": lse_part.data_ptr()},
                      stream=current_stream(where))
    combine(where, config.target, o_part, lse_part, out, lse if return_lse else None)
