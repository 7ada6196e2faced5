"""V^T for the sm_90a fp8 attention: V (B, Sk, Hk, D) e4m3 as (B, Hk, D + R, Sk') with the keys contiguous.

Sk' is Sk rounded up to 16 (zeros past Sk), and inside each 16 keys position ``4q + 2a + b`` holds key
``8a + 2q + b`` (a, b in {0, 1}; q in 0..3): the order in which the kernel's S accumulator holds the keys,
so P's registers are e4m3 A fragments as they stand (``fa4_mlir.kernels.attention.hopper_fp8``). fp8 wgmma
reads its B operand K-major only; FA3 transposes V in the kernel, the op does it here, one copy of V.
The R (``sum_rows``: 8, or 0) rows after V's D are e4m3 ones, over which the kernel's P V wgmmas sum P's
rows (``HopperTile.row_sums``).

On CUDA tensors with Triton installed the copy is a tiled Triton kernel (a tile of 64 keys x 64 columns per
program: rows of V read whole, V^T rows written whole); torch's strided copy of one-byte elements moves
about 340 GB/s on an H200 (0.19 ms for 32 MB of V), a few times below the memory's bandwidth. Without
Triton (and on CPU, where the emulator runs) it is one torch permute.
"""

from __future__ import annotations

import functools
import warnings

import torch

from fa4_mlir.configs.attention import FP8_SUM_ROWS
from fa4_mlir.reference import E4M3_ONE

_KEYS, _COLS = 64, 64  # the Triton tile: keys (a multiple of 16) x head-dim columns
_BROKEN: set = set()  # non-empty once the Triton kernel failed: it is not tried again


def v_transposed(v: torch.Tensor, sum_rows: int = 0) -> torch.Tensor:
    """V^T (B, Hk, D + sum_rows, Sk') of ``v`` (B, Sk, Hk, D), keys permuted within each 16, its last
    ``sum_rows`` rows ones (see the module docstring)."""
    if sum_rows not in (0, FP8_SUM_ROWS):
        raise ValueError(f"v_transposed: sum_rows must be 0 or {FP8_SUM_ROWS} (one n8 wgmma's rows of ones), got "
                         f"{sum_rows!r}")
    kernel = _triton_kernel() if v.is_cuda else None
    if kernel is not None and v.shape[3] % _COLS == 0 and v.stride(3) == 1:
        try:
            return _triton_transposed(kernel, v, sum_rows)
        except Exception as exc:  # a Triton that cannot build it: the torch copy is slower, not wrong
            warnings.warn(f"fa4 flash_attention: the Triton V^T copy failed ({type(exc).__name__}: {exc}); "
                          f"using torch's strided copy", stacklevel=2)
            _triton_kernel.cache_clear()
            _BROKEN.add(True)
    return _torch_transposed(v, sum_rows)


def _torch_transposed(v: torch.Tensor, sum_rows: int = 0) -> torch.Tensor:
    b, sk, hk, d = v.shape
    padded = -(-sk // 16) * 16
    raw = v.view(torch.uint8)
    if padded != sk:
        raw = torch.cat([raw, raw.new_zeros((b, padded - sk, hk, d))], dim=1)
    # key = 16 g + 8 a + 2 q + b -> position 16 g + 4 q + 2 a + b
    t = raw.reshape(b, padded // 16, 2, 4, 2, hk, d).permute(0, 5, 6, 1, 3, 2, 4).reshape(b, hk, d, padded)
    if sum_rows:
        t = torch.cat([t, t.new_full((b, hk, sum_rows, padded), E4M3_ONE)], dim=2)
    return t.view(v.dtype)


def _triton_transposed(kernel, v: torch.Tensor, sum_rows: int = 0) -> torch.Tensor:
    b, sk, hk, d = v.shape
    padded = -(-sk // 16) * 16
    out = torch.empty((b, hk, d + sum_rows, padded), dtype=torch.uint8, device=v.device)
    raw = v.view(torch.uint8)
    grid = (-(-padded // _KEYS), d // _COLS, b * hk)
    kernel[grid](raw, out, sk, padded, hk, raw.stride(0), raw.stride(1), raw.stride(2), KEYS=_KEYS, COLS=_COLS,
                 SUM_ROWS=sum_rows, ONE=E4M3_ONE)
    return out.view(v.dtype)


@functools.cache
def _triton_kernel():
    """The Triton kernel, or None when Triton is not installed (or failed before)."""
    if _BROKEN:
        return None
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def transpose(v, out, sk, padded, hk, stride_b, stride_s, stride_h, KEYS: tl.constexpr, COLS: tl.constexpr,
                  SUM_ROWS: tl.constexpr, ONE: tl.constexpr):
        pos = tl.program_id(0) * KEYS + tl.arange(0, KEYS)  # positions of V^T's row
        col = tl.program_id(1) * COLS + tl.arange(0, COLS)
        bh = tl.program_id(2).to(tl.int64)
        bi, hi = bh // hk, bh % hk
        r = pos % 16  # position 4q + 2a + b holds key 8a + 2q + b
        key = pos - r + 8 * ((r // 2) % 2) + 2 * (r // 4) + r % 2
        src = v + bi * stride_b + hi * stride_h + key[:, None].to(tl.int64) * stride_s + col[None, :]
        tile = tl.load(src, mask=(key < sk)[:, None], other=0)  # (keys, cols): V's rows, read whole
        d = tl.num_programs(1) * COLS
        rows = d + SUM_ROWS  # V^T's rows of a head
        dst = out + (bh * rows + col[:, None]) * padded + pos[None, :]
        tl.store(dst, tl.trans(tile), mask=(pos < padded)[None, :])  # (cols, keys): V^T's rows, written whole
        if SUM_ROWS > 0:
            if tl.program_id(1) == 0:  # the first column tile's programs also write the rows of ones
                ones = tl.full((SUM_ROWS, KEYS), ONE, tl.uint8)
                extra = d + tl.arange(0, SUM_ROWS)
                tl.store(out + (bh * rows + extra[:, None]) * padded + pos[None, :], ones, mask=(pos < padded)[None, :])

    return transpose
