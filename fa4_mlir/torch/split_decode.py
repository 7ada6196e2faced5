"""Split-KV decode in ``torch.ops.fa4.flash_attn_with_kvcache``: when a call's grid leaves SMs idle (a decode
step of a small batch: one CTA per K/V head and sequence), the keys are cut into ranges over more CTAs
(``AttentionConfig.split_kv``) that write fp32 partials, and the "attention-combine" kernel merges them into
``out`` and the LSE (``fa4_mlir.kernels.attention.splitkv``).

``num_splits`` is FlashAttention's argument: 0 lets the op choose (``split_count``), 1 never splits, n > 1
asks for at most n ranges (fewer when the keys hold fewer tiles).
"""

from __future__ import annotations

import functools

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention import launch_geometry
from fa4_mlir.kernels.attention.splitkv import num_splits, ranges_of, split_arguments, split_geometry, tile_keys
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


@functools.lru_cache(maxsize=1024)
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


@functools.lru_cache(maxsize=64)
def _combine_config(target: str, dtype: str, head_dim: int):
    from fa4_mlir.configs.combine import CombineConfig

    return CombineConfig(target=target, dtype=dtype, head_dim=head_dim)


_combines: dict[tuple, object] = {}  # PackedLaunch by (device, config, FA4_DEBUG, grid, scalar arguments)
_POINTERS = ("o_partial", "lse_partial", "o", "lse")


def combine(where, target: str, o_part: torch.Tensor, lse_part: torch.Tensor, out: torch.Tensor,
            lse: torch.Tensor | None) -> None:
    """``out`` (B, Sq, H, D) and ``lse`` (B, H, Sq, unless None) = the fp32 partials o_part (B, Sq, H, S, D) and
    lse_part (B, H, Sq, S) merged by the attention-combine kernel of ``target``, on the current stream (``where``:
    a device index) or in the emulator; through dense temporaries where ``out`` or ``lse`` has other strides (the
    kernel writes them densely)."""
    from fa4_mlir.kernels.attention.combine import launch_geometry as combine_geometry

    b, sq, h, d = out.shape
    config = _combine_config(target, "fp16" if out.dtype == torch.float16 else "bf16", d)
    dense_out = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    dense_lse = lse if lse is None or lse.is_contiguous() else torch.empty(lse.shape, device=lse.device)
    args = {"batch": b, "seq_q": sq, "num_heads": h, "num_splits": o_part.shape[3], "write_lse": int(lse is not None)}
    grid = combine_geometry(config, b, sq, h)
    if isinstance(where, emulator):
        where.run(where.load("attention-combine", config), grid,
                  {**args, "o_partial": o_part.numpy(), "lse_partial": lse_part.numpy(), "o": host_array(dense_out),
                   "lse": None if lse is None else dense_lse.numpy()})
    else:
        pointers = (o_part.data_ptr(), lse_part.data_ptr(), dense_out.data_ptr(),
                    (dense_lse if lse is not None else out).data_ptr())  # lse is not written without write_lse
        debug = knobs.debug_timeout_ms()
        key = (where, config, debug, grid, *args.values())
        launch = _combines.get(key)
        if launch is None:  # the call's layout: a PackedLaunch, later calls only rewrite the addresses
            kernel = runtime.load("attention-combine", config, device=where, debug=debug or False)
            launch = kernel.packed(grid, {**args, **dict(zip(_POINTERS, pointers))}, _POINTERS)
            if len(_combines) >= 256:
                _combines.clear()
            _combines[key] = launch
        launch.launch(pointers, current_stream(where))
    if dense_out is not out:
        out.copy_(dense_out)
    if lse is not None and dense_lse is not lse:
        lse.copy_(dense_lse)


@functools.lru_cache(maxsize=1024)
def _geometry(config: AttentionConfig, b: int, sq: int, h: int, seq_k: int, splits: int) -> tuple:
    """(grid, split_keys, ranges) of a split launch (``split_geometry``), made once per call layout."""
    grid, keys = split_geometry(config, b, sq, h, seq_k, splits)
    return grid, keys, ranges_of(grid, config, b, sq, h, seq_k)


def launch_split(where, kernel, config: AttentionConfig, args: dict, out: torch.Tensor, lse: torch.Tensor,
                 return_lse: bool, splits: int) -> None:
    """Run the split ``kernel`` (``config.split_kv``) over at most ``splits`` ranges of ``args["seq_k"]`` keys
    into fp32 partials, then the combine into ``out`` (B, Sq, H, D) and ``lse`` (B, H, Sq, when ``return_lse``).
    ``args`` are the paged kernel's other arguments (device pointers, or NumPy arrays in the emulator)."""
    b, sq, h, d = out.shape
    grid, keys, ranges = _geometry(config, b, sq, h, args["seq_k"], splits)
    o_part = torch.empty((b, sq, h, ranges, d), dtype=torch.float32, device=out.device)
    lse_part = torch.empty((b, h, sq, ranges), dtype=torch.float32, device=out.device)
    args = {**args, **split_arguments(config, ranges, keys)}
    if isinstance(where, emulator):
        where.run(kernel, grid, {**args, "o": o_part.numpy(), "lse": lse_part.numpy()})
    else:
        kernel.launch(grid, {**args, "o": o_part.data_ptr(), "lse": lse_part.data_ptr()},
                      stream=current_stream(where))
    combine(where, config.target, o_part, lse_part, out, lse if return_lse else None)
