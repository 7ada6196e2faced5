"""Split KV in the sm_100a attention kernel (``AttentionConfig(page_size=P, split_kv=True)``, issue 26): each CTA
takes one range of a sequence's keys and writes its rows' fp32 O partial and LSE (``split``). The kernel runs in
the PTX emulator (race checks on) on shuffled pages (``varlen_cases.paged_batch``): its partials against
``reference.attention_partials`` (float64) and, merged by ``reference.combine_partials``, against
``reference.varlen_attention`` on the same keys, with empty sequences, ranges past a short sequence's end, partial
last ranges, decode-like Sq 1..16, num_splits 1 / 2 / 3 / 5; and the rules and launch errors. The compile sweep
(zero spills) is test_split_kv_sm100_spills.py (a file of its own: pytest-xdist runs the two side by side)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from varlen_cases import SM100_EVERY, paged_batch, sampled

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels import attention
from fa4_mlir.kernels.attention.splitkv import ranges_of, split_geometry

FLOOR = reference.FLOOR


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


def test_split_parameters():
    """o and lse are pointers to the fp32 partials; num_splits and split_keys end the parameter list."""
    source = attention.build(AttentionConfig(page_size=64, split_kv=True))
    kinds = {p.name: p.kind for p in source.params}
    assert kinds["o"] == kinds["lse"] == "ptr" and kinds["q"] == "tensormap"
    assert [p.name for p in source.params][-6:] == ["block_table", "pages_per_seq", "seqused_k", "num_pages",
                                                   "num_splits", "split_keys"]


def check_split_in_emulator(config, q, k_cache, v_cache, table, seqused_k, scale: float, num_splits: int) -> None:
    """Run ``config``'s split kernel in the emulator (race detector on) over at most ``num_splits`` ranges. Its
    partials against float64 (``reference.attention_partials``): every element written (no NaN), O within twice
    the error of the computation with P rounded to the dtype (+ FLOOR max|ref|), LSE -inf exactly where a row saw
    no key of the range (with O 0 there), elsewhere within ``reference.lse_tolerance``; the partials combined
    (``reference.combine_partials``) against the unsplit float64 attention on the same keys, likewise."""
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_paged_attention

    b, sq, h, d = q.shape
    max_k = max(int(seqused_k.max(initial=0)), 1)
    grid, split_keys = split_geometry(config, b, sq, h, max_k, num_splits)
    ranges = ranges_of(grid, config, b, sq, h, max_k)
    o = np.full((b, sq, h, ranges, d), np.nan, np.float32)
    lse = np.full((b, h, sq, ranges), np.nan, np.float32)
    launch_paged_attention(runtime.load("attention", config, device="emulator"), config, q, k_cache, v_cache, o, lse,
                           scale, table, seqused_k, num_splits=num_splits)
    assert not np.isnan(o).any() and not np.isnan(lse).any(), "every partial must be written, none NaN"
    k, cu_k = reference.paged_keys(k_cache, table, seqused_k)
    v, _ = reference.paged_keys(v_cache, table, seqused_k)
    dtype = config.dtype
    qf, kf, vf = (reference.to_f64(t, dtype) for t in (q, k, v))
    args = (qf, kf, vf, cu_k, config.causal, scale, split_keys, ranges)
    ref_o, ref_lse = reference.attention_partials(*args)
    yard_o, yard_lse = reference.attention_partials(*args, dtype=dtype)
    _close(o, ref_o, yard_o, "O partials")
    empty = np.isneginf(ref_lse)  # (B, H, Sq, S): a row without a visible key in the range
    assert np.array_equal(np.isneginf(lse), empty), "LSE partials must be -inf exactly where a range has no key"
    assert not np.isposinf(lse).any()
    assert not o.transpose(0, 2, 1, 3, 4)[empty].any(), "a range without a key must leave O 0"
    _lse_close(lse, ref_lse)
    # end to end: the ranges merged, against the unsplit attention over the same keys
    cu_q = np.arange(b + 1, dtype=np.int32) * sq
    full, full_lse = reference.varlen_attention(qf.reshape(b * sq, h, d), kf, vf, cu_q, cu_k, config.causal, scale)
    out, out_lse = reference.combine_partials(o, lse)
    yard, _ = reference.combine_partials(yard_o, yard_lse)
    _close(out, full.reshape(b, sq, h, d), yard, "combined O")
    full_lse = full_lse.reshape(h, b, sq).transpose(1, 0, 2)
    assert np.array_equal(np.isposinf(out_lse), np.isposinf(full_lse))
    _lse_close(out_lse, full_lse)


def _close(out, ref, yard, what: str) -> None:
    """``out`` within twice ``yard``'s max and rms errors against ``ref`` (+ FLOOR max|ref|)."""
    def errors(values):
        diff = np.abs(np.asarray(values, np.float64) - ref)
        return float(diff.max(initial=0.0)), float(np.sqrt(np.mean(diff * diff))) if diff.size else 0.0

    top = float(np.abs(ref).max(initial=0.0))
    floor = FLOOR * top + FLOOR
    (got_max, got_rms), (yard_max, yard_rms) = errors(out), errors(yard)
    assert got_max <= 2 * yard_max + floor and got_rms <= 2 * yard_rms + floor, (
        f"{what}: max abs error {got_max:.3g} (limit {2 * yard_max + floor:.3g}), rms {got_rms:.3g} "
        f"(limit {2 * yard_rms + floor:.3g})")


def _lse_close(lse, ref_lse) -> None:
    seen = np.isfinite(ref_lse)
    if seen.any():
        assert float(np.abs(lse[seen] - ref_lse[seen]).max()) <= reference.lse_tolerance(ref_lse[seen])


def _case_id(case):
    kw, sq, lk, heads, splits = case
    return f"{_ids(kw)}-sq{sq}-k{'.'.join(map(str, lk))}-h{heads}-s{splits}"


# (config, Sq, key counts, heads, num_splits): tiles are 128 keys (head dims 96, 128) or 192 (64); 1Q pairs them, so
# a range of an odd number of tiles (600 keys at head dim 64 over 4 ranges: 1 tile; 700 at 96 over 2: 3 tiles) has
# its last pair cross the range's end (masked); num_splits re-counted by split_geometry (900 keys, 5 -> 4 ranges)
CASES = [
    (dict(page_size=16, head_dim=128), 1, [300, 0, 130], 1, 3),
    (dict(page_size=64, head_dim=64, causal=True, group=4), 5, [700, 1], 8, 2),
    (dict(page_size=256, head_dim=96), 3, [1200, 257], 2, 5),
    (dict(page_size=64, head_dim=128, causal=True, num_q=1), 16, [520, 40, 0], 1, 3),
    (dict(page_size=16, head_dim=96, causal=True, group=8, dtype="fp16"), 2, [390], 8, 2),
    (dict(page_size=256, head_dim=64, num_q=1, group=4), 4, [600, 200], 4, 5),
    (dict(page_size=64, head_dim=128, group=8), 1, [0, 0], 8, 3),
    (dict(page_size=16, head_dim=64, causal=True), 9, [5, 400], 2, 2),
    (dict(page_size=256, head_dim=128, causal=True, dtype="fp16"), 7, [900, 3, 260], 1, 5),
    (dict(page_size=64, head_dim=96, num_q=1, causal=True, group=4), 12, [10, 700], 4, 2),
    (dict(page_size=256, head_dim=128, group=4), 2, [650], 4, 1),
]


@pytest.mark.parametrize("case", sampled(CASES, one_arg=True, every=SM100_EVERY), ids=[_case_id(c) for c in CASES])
def test_split_kernel_is_right_in_the_emulator(case):
    kwargs, sq, lengths_k, heads, splits = case
    config = AttentionConfig(split_kv=True, **kwargs)
    rng = np.random.default_rng(zlib.crc32(_case_id(case).encode()))
    hk, d = heads // config.group, config.head_dim
    k, v, table, seqused = paged_batch(rng, lengths_k, config.page_size, hk, d, config.dtype)
    q = reference.random_bits(rng, (len(lengths_k), sq, heads, d), config.dtype, 1.0)
    check_split_in_emulator(config, q, k, v, table, seqused, d ** -0.5, splits)


@pytest.mark.parametrize("kwargs", [dict(split_kv=True), dict(split_kv=True, page_size=64, varlen=True),
                                    dict(split_kv=True, target="sm_90a"), dict(split_kv=1, page_size=64)])
def test_split_config_errors(kwargs):
    with pytest.raises(ConfigError, match=r"AttentionConfig.split_kv must be False unless the K/V cache is paged "
                                          r"\(page_size > 0\) and Q dense \(varlen False\)"):
        AttentionConfig(**kwargs)


def test_split_geometry_errors():
    split = AttentionConfig(page_size=64, split_kv=True)
    with pytest.raises(LaunchError, match="attention: split_geometry needs a split_kv kernel, got AttentionConfig "
                                          "sm_100a bf16 d128 2Q paged 64"):
        split_geometry(AttentionConfig(page_size=64), 1, 1, 1, 100, 2)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(LaunchError, match=f"attention: num_splits must be an int >= 1, got {bad!r}"):
            split_geometry(split, 1, 1, 1, 100, bad)
    with pytest.raises(LaunchError, match=r"attention: query tiles x num_splits must be < 2\^31, got 8388608 x 512"):
        split_geometry(split, 1, 2 ** 31 - 1, 1, 2 ** 20, 512)
    assert split_geometry(split, 2, 1, 8, 1000, 5) == ((4, 8, 2), 256)  # 8 tiles of 128 keys: 4 ranges of 2


def test_split_launch_needs_the_partials_shapes():
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_paged_attention

    config = AttentionConfig(page_size=64, split_kv=True)
    rng = np.random.default_rng(0)
    k, v, table, used = paged_batch(rng, [300], 64, 1, 128, "bf16")
    q = reference.random_bits(rng, (1, 1, 1, 128), "bf16", 1.0)
    kernel = runtime.load("attention", config, device="emulator")
    lse = np.zeros((1, 1, 1, 3), np.float32)
    for o, l in ((np.zeros((1, 1, 1, 2, 128), np.float32), lse), (np.zeros((1, 1, 1, 3, 128), np.float32), None)):
        with pytest.raises(LaunchError, match=r"attention: a split_kv launch over 3 ranges must have o \(1, 1, 1, 3, "
                                              r"128\) and lse \(1, 1, 1, 3\) float32, got"):
            launch_paged_attention(kernel, config, q, k, v, o, l, 0.1, table, used, num_splits=3)
