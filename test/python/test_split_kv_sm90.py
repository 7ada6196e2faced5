"""Split KV in the sm_90a paged attention (``AttentionConfig(target="sm_90a", page_size=P, split_kv=True)``, dense
Q, with and without ``pack_gqa``: ``hopper_split``): the split configs the op builds through the whole compiler
(protocol verifier on, ptxas -arch=sm_90a) with zero spills and the split ABI (o/lse fp32 partial pointers, no
TMA store of O, ``num_splits`` / ``split_keys`` last); the partials' numerics in the PTX emulator (race checks
on) over ragged batches against ``reference.attention_partials`` (float64; a row without a key in its range:
O exactly 0, LSE -inf; no NaN; every partial written), and their combine (``reference.combine_partials``)
against ``reference.varlen_attention`` over the same keys. The GPU runs are the lead's (test/gpu)."""

from __future__ import annotations

import re

import numpy as np
import ci_sample
import pytest
from varlen_cases import SM90_EVERY, paged_batch, sampled

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.attention_op import paged_config
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels import attention
from fa4_mlir.kernels.attention.splitkv import ranges_of, split_geometry

# the op's split configs (``paged_config``: the head dim's tile, the group packed where ``packs_gqa`` says so):
# every head dim and mask, pages of 16 (where the paged rules allow them), 64 and 256, pack_gqa 0, 4 and 8
# (group 1 or Sq 1 with the group), d64 causal also with the short tile of <= 2048 keys (BN 128): a sample of
# that matrix (all 87 of its configs had zero spills and passed the protocol verifier on 2026-11-26, ptxas 13.0)
COMPILED = [
    dict(head_dim=64, causal=True, page_size=16, group=8, capacity=4096),
    dict(head_dim=64, causal=True, page_size=64, group=1, capacity=1024),
    dict(head_dim=64, causal=False, page_size=256, group=4, capacity=4096),
    dict(head_dim=96, causal=False, page_size=16, group=1, capacity=4096),
    dict(head_dim=96, causal=True, page_size=256, group=8, capacity=4096),
    dict(head_dim=128, causal=True, page_size=16, group=4, capacity=4096),
    dict(head_dim=128, causal=False, page_size=64, group=8, capacity=4096),
    dict(head_dim=128, causal=True, page_size=256, group=1, capacity=4096),
    dict(head_dim=192, causal=True, page_size=64, group=4, capacity=4096),
    dict(head_dim=192, causal=False, page_size=256, group=1, capacity=4096),
    dict(head_dim=256, causal=False, page_size=64, group=8, capacity=4096),
    dict(head_dim=256, causal=True, page_size=256, group=4, capacity=4096),
    dict(head_dim=256, causal=True, page_size=64, group=1, capacity=4096),
    dict(head_dim=128, causal=True, page_size=48, group=8, capacity=4096),  # a page that is not a power of two
    # pages TMA cannot load, gathered by the load warp (``page_gather``)
    dict(head_dim=64, causal=False, page_size=1, group=4, capacity=4096),
    dict(head_dim=128, causal=True, page_size=40, group=1, capacity=4000),
    dict(head_dim=256, causal=False, page_size=100, group=4, capacity=4000),
    dict(head_dim=256, causal=True, page_size=100, group=1, capacity=4000),
    # known: causal pack_gqa 4 at head dim 256 spills 8 stores / 44 loads (ptxas 13.0, the 56-register load warp)
    pytest.param(dict(head_dim=256, causal=True, page_size=100, group=4, capacity=4000),
                 marks=pytest.mark.xfail(strict=True, reason="gathered split d256 causal pack 4: 8/44 spills")),
    dict(head_dim=192, causal=False, page_size=24, group=1, capacity=4800),
]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


def _config(dtype: str, head_dim: int, causal: bool, page_size: int, group: int, capacity: int,
            seq_q: int = 1) -> AttentionConfig:
    return paged_config("sm_90a", dtype, head_dim, causal, group, page_size, capacity, seq_q, split_kv=True)


# CI compiles each value of the sweep once (sm_90a: the H100 session builds the op's artifacts, and CI's
# emulator tests compile more); FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(COMPILED, pairs=()), ids=_ids)
def test_split_configs_assemble_without_spills(ctx, kwargs):
    from fa4_mlir.core.compiler import compile_kernel

    config = _config("bf16", **kwargs)
    assert config.split_kv and config.pack_gqa == (kwargs["group"] if kwargs["group"] > 1 else 0)
    source = attention.build(config)
    result = compile_kernel(source, stop="cubin")  # the protocol verifier runs beside ptxas
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["wgmma_serialized"] is False, m  # ptxas C7511: the wgmmas serialised
    kinds = {p.name: p.kind for p in source.params}
    assert kinds["o"] == kinds["lse"] == "ptr" and [p.name for p in source.params][-2:] == ["num_splits", "split_keys"]
    assert "* num_splits" in source.grid and "split_geometry" in source.grid
    ptx = result.ptx
    assert "cp.async.bulk.tensor" in ptx and not re.search(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx)
    # O's partials: 8-byte pairs, D / 8 a row, 2 rows a thread, in each warpgroup's tile and keyless epilogues
    assert len(re.findall(r"st\.global\.v2\.b32", ptx)) == config.hopper.consumers * 2 * 2 * config.head_dim // 8


# (dtype, head dim, causal, page size, group, kv heads, key counts, Sq, num_splits). The key counts cover a
# sequence without keys, ranges the last of which is partial, shorter sequences whose last ranges are empty
# (the longest sequence sets the ranges), Sq > Sk (causal rows without any key); num_splits 1, 2, 3, 5
EMULATED = [
    ("bf16", 128, True, 64, 4, 1, [0, 300, 700], 2, 3),  # pack 4; ranges of 256: 300 leaves range 2 empty
    ("bf16", 128, True, 64, 4, 2, [1500, 37], 1, 5),  # decode; ranges of 384, the last 348 keys
    ("bf16", 128, False, 16, 1, 2, [700, 64, 129], 7, 3),  # page 16: a tile of 8 pages (the chunk loop)
    ("fp16", 256, False, 256, 1, 1, [1100, 0, 90], 3, 5),  # BN 80: chunks of 16 straddling page ends
    ("fp16", 256, True, 256, 8, 1, [800, 3], 1, 3),  # pack 8 at d256; causal decode
    ("bf16", 64, True, 16, 8, 1, [400, 1000], 16, 2),  # 16 positions x 8 heads: 128 rows, Sq = 16
    ("bf16", 64, False, 16, 4, 1, [0], 1, 1),  # no key at all: one range, a CTA without a K/V tile
    ("bf16", 64, False, 16, 4, 2, [200, 1400, 17, 0], 5, 3),
    ("bf16", 64, True, 64, 1, 1, [50, 1300], 16, 5),  # the short tile (BN 128); rows without keys (Sq > 50 - ...)
    ("bf16", 96, False, 64, 2, 2, [333, 5, 1200], 4, 3),  # d96: 96 of the tile's 128 columns stored
    ("fp16", 192, True, 64, 1, 1, [250, 700], 9, 5),  # BN 112: 7 tiles, re-counted to 4 ranges of 2 tiles
    ("fp16", 192, False, 256, 4, 1, [900, 1, 450], 2, 2),
    ("bf16", 128, True, 256, 8, 1, [513, 1, 1025, 0], 13, 2),  # B 4; Sq 13 x 8 = 104 rows; a page spans tiles
    ("fp16", 128, True, 64, 1, 1, [10, 600], 16, 3),  # Sq 16 > 10 keys: causal rows that see no key
    # gathered pages (``page_gather``): a range's keys gathered from its first key on, clamped to its end
    ("bf16", 128, True, 40, 4, 1, [0, 300, 700], 2, 3),  # pack 4; ranges of 256 over pages of 40
    ("bf16", 64, False, 1, 1, 2, [700, 64, 129], 7, 3),  # pages of one key
    ("fp16", 256, True, 100, 8, 1, [800, 3], 1, 3),  # pack 8 at d256; causal decode
    ("bf16", 192, False, 24, 1, 1, [250, 700], 9, 5),
]


@pytest.mark.parametrize("dtype, d, causal, page, group, hk, lengths_k, sq, splits",
                         sampled(EMULATED, every=SM90_EVERY),
                         ids=[f"{c[0]}-d{c[1]}-{'causal' if c[2] else 'full'}-p{c[3]}-g{c[4]}-sq{c[7]}-s{c[8]}-{i}"
                              for i, c in enumerate(EMULATED)])
def test_split_partials_match_f64_reference_in_the_emulator(dtype, d, causal, page, group, hk, lengths_k, sq, splits):
    """The partials against float64 (``reference.attention_partials``) over the keys the block table names, and
    their combine against the attention over all of them."""
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_paged_attention

    rng = np.random.default_rng(sum(lengths_k) + 1000 * d + page + sq + splits)
    k_cache, v_cache, table, seqused_k = paged_batch(rng, lengths_k, page, hk, d, dtype)
    config = _config(dtype, d, causal, page, group, table.shape[1] * page, sq)
    assert bool(config.pack_gqa) == (group > 1)
    b, h, scale = len(lengths_k), hk * group, d ** -0.5
    q = reference.random_bits(rng, (b, sq, h, d), dtype, 1.0)
    max_k = max(int(seqused_k.max()), 1)
    grid, split_keys = split_geometry(config, b, sq, h, max_k, splits)
    s = ranges_of(grid, config, b, sq, h, max_k)
    o = np.full((b, sq, h, s, d), np.nan, np.float32)  # NaN: a partial never written
    lse = np.full((b, h, sq, s), np.nan, np.float32)
    launch_paged_attention(runtime.load("attention", config, device="emulator"), config, q, k_cache, v_cache, o,
                           lse, scale, table, seqused_k, num_splits=splits)
    assert not np.isnan(o).any() and not np.isnan(lse).any(), "every partial must be written, without NaN"

    k, cu_k = reference.paged_keys(k_cache, table, seqused_k)
    v, _ = reference.paged_keys(v_cache, table, seqused_k)
    qf, kf, vf = (reference.to_f64(t, dtype) for t in (q, k, v))
    ref_o, ref_lse = reference.attention_partials(qf, kf, vf, cu_k, causal, scale, split_keys, s)
    yard_o, _ = reference.attention_partials(qf, kf, vf, cu_k, causal, scale, split_keys, s, dtype=dtype)
    _within_yardstick(o, ref_o, yard_o)
    empty = np.isneginf(ref_lse)  # (B, H, Sq, S): rows without a key in the range
    assert empty.any()  # every case has ranges (or rows) without a key
    assert np.array_equal(np.isneginf(lse), empty) and not np.isposinf(lse).any(), \
        "LSE must be -inf exactly on the rows without a key in the range"
    assert not o.transpose(0, 2, 1, 3, 4)[empty].any(), "rows without a key in the range must be 0"
    if (~empty).any():
        assert float(np.abs(lse[~empty] - ref_lse[~empty]).max()) <= reference.lse_tolerance(ref_lse[~empty])

    # end to end: the kernel's partials combined against the attention over all of the sequence's keys
    out, out_lse = reference.combine_partials(o, lse)
    cu_q = np.arange(b + 1, dtype=np.int32) * sq
    ref, ref_all = reference.varlen_attention(qf.reshape(b * sq, h, d), kf, vf, cu_q, cu_k, causal, scale)
    yard, _ = reference.combine_partials(yard_o, ref_lse)
    _within_yardstick(out.reshape(b * sq, h, d), ref, yard.reshape(b * sq, h, d))
    out_lse = out_lse.transpose(1, 0, 2).reshape(h, b * sq)
    none = np.isposinf(ref_all)  # rows that see no key at all: the combine's +inf
    assert np.array_equal(np.isposinf(out_lse), none)
    if (~none).any():
        assert float(np.abs(out_lse[~none] - ref_all[~none]).max()) <= reference.lse_tolerance(ref_all[~none])


def _within_yardstick(out: np.ndarray, ref: np.ndarray, yard: np.ndarray) -> None:
    """fp32 ``out``'s max and rms errors against float64 ``ref`` within twice the yardstick's (P rounded to the
    dtype, as ``reference.compare`` bounds 16-bit outputs) plus ``reference.FLOOR`` of max|ref|."""
    def errors(x):
        diff = np.abs(np.asarray(x, np.float64) - ref)
        return float(diff.max()), float(np.sqrt(np.mean(diff ** 2)))

    (max_abs, rms), (yard_max, yard_rms) = errors(out), errors(yard)
    floor = reference.FLOOR * float(np.abs(ref).max()) + reference.FLOOR
    assert max_abs <= 2 * yard_max + floor and rms <= 2 * yard_rms + floor, \
        f"max {max_abs:.3g} (limit {2 * yard_max + floor:.3g}), rms {rms:.3g} (limit {2 * yard_rms + floor:.3g})"


def test_split_kernels_keep_the_paged_kernels_outputs():
    """Without split_kv the paged kernel's O stays a tensor map (TMA-stored) and no split parameters appear."""
    plain = attention.build(AttentionConfig(target="sm_90a", page_size=64, pack_gqa=4))
    kinds = {p.name: p.kind for p in plain.params}
    assert kinds["o"] == "tensormap" and "num_splits" not in kinds and "* num_splits" not in plain.grid
    split = attention.build(AttentionConfig(target="sm_90a", page_size=64, pack_gqa=4, split_kv=True))
    assert [p.name for p in split.params] == [p.name for p in plain.params] + ["num_splits", "split_keys"]
    assert split.grid == "(ceil(Sq / 32) * num_splits, H / 4, B) (splitkv.split_geometry)"
    assert split.config["split_kv"] is True and "split_kv" not in plain.config


_SPLIT_RULE = (r"AttentionConfig.split_kv must be False unless the K/V cache is paged \(page_size > 0\) and Q dense "
               r"\(varlen False\): split KV is the decode form's, got True")


@pytest.mark.parametrize("kwargs", [dict(split_kv=True), dict(split_kv=True, page_size=64, varlen=True)])
def test_split_kv_config_rule(kwargs):
    with pytest.raises(ConfigError, match=_SPLIT_RULE):
        AttentionConfig(target="sm_90a", **kwargs)
