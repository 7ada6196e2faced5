"""Split KV (``AttentionConfig.split_kv``): a decode step's grid over key ranges, host side (no MLIR import).

A decode step (a few queries a sequence against a long cache) has one CTA per (query tile, head or K/V head,
sequence): batch 8 x 8 K/V heads is 64 CTAs, half an H100's SMs. The split kernel also cuts each sequence's
keys into ``num_splits`` ranges of ``split_keys`` (whole K/V tiles), one CTA each (grid x = query tile x
num_splits + split); each writes its rows' O normalised over its range and the range's LSE, in fp32, and
the "attention-combine" kernel merges them: ``lse = ln sum_s exp(lse_s)``, ``O = sum_s exp(lse_s - lse) O_s``.
"""

from __future__ import annotations

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import LaunchError

# a grid that fills this much of its last wave of SMs needs no more ranges
GOOD_WAVES = 0.9


def tile_keys(config: AttentionConfig) -> int:
    """Keys a K/V tile of the kernel holds (a range is whole tiles)."""
    return config.hopper.bn if config.target == "sm_90a" else config.fa4.bn


def split_geometry(config: AttentionConfig, batch: int, seq_q: int, heads: int, seq_k: int,
                   num_splits: int) -> tuple[tuple[int, int, int], int]:
    """The grid of a ``split_kv`` kernel over (at most) ``num_splits`` ranges of the longest sequence's
    ``seq_k`` keys, and the keys of a range (whole tiles, re-counted so that none of the longest sequence's
    ranges is empty): (grid, split_keys). The grid's x is ``launch_geometry``'s times the ranges."""
    from fa4_mlir.kernels.attention import launch_geometry

    if not config.split_kv:
        raise LaunchError(f"attention: split_geometry needs a split_kv kernel, got {config.describe()}")
    if not isinstance(num_splits, int) or isinstance(num_splits, bool) or num_splits < 1:
        raise LaunchError(f"attention: num_splits must be an int >= 1, got {num_splits!r}")
    x, ys, b = launch_geometry(config, batch, seq_q, heads, seq_k)
    bn = tile_keys(config)
    tiles = -(-seq_k // bn)
    per = -(-tiles // min(num_splits, tiles))
    splits = -(-tiles // per)
    if x * splits >= 2 ** 31:
        raise LaunchError(f"attention: query tiles x num_splits must be < 2^31, got {x} x {splits}")
    return (x * splits, ys, b), per * bn


def split_arguments(config: AttentionConfig, num_splits: int, split_keys: int) -> dict[str, int]:
    """The split kernel's two launch arguments (``split_geometry``'s re-counted ranges and keys a range);
    ``{}`` for other kernels."""
    if not config.split_kv:
        return {}
    return {"num_splits": num_splits, "split_keys": split_keys}


def ranges_of(grid: tuple[int, int, int], config: AttentionConfig, batch: int, seq_q: int, heads: int,
              seq_k: int) -> int:
    """The ranges a ``split_geometry`` grid holds (the partials' S dimension)."""
    from fa4_mlir.kernels.attention import launch_geometry

    return grid[0] // launch_geometry(config, batch, seq_q, heads, seq_k)[0]


def num_splits(ctas: int, tiles: int, sms: int, min_tiles: int) -> int:
    """Key ranges for a grid of ``ctas`` CTAs over ``tiles`` key tiles on ``sms`` SMs, each range at least
    ``min_tiles`` tiles: 1 when the grid fills ``GOOD_WAVES`` of the SMs; else the fewest ranges whose grid
    fills ``GOOD_WAVES`` of its last wave, or the fullest grid when none does."""
    if ctas >= GOOD_WAVES * sms:  # the grid fills the SMs already (B16 x 8 K/V heads: 128 CTAs of 132)
        return 1
    best, best_fill = 1, ctas / sms
    for s in range(2, min(sms, tiles // max(1, min_tiles)) + 1):
        n = ctas * s
        fill = n / (-(-n // sms) * sms)
        if fill >= GOOD_WAVES:
            return s
        if fill > best_fill:
            best, best_fill = s, fill
    return best
