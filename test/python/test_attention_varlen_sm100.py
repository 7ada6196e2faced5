"""The sm_100a attention kernel over packed variable-length sequences (``AttentionConfig(varlen=True)``,
issue 26): every varlen config through the whole compiler (protocol verifier on, ptxas -arch=sm_100a,
zero spills); the kernel run in the PTX emulator (race checks on) on packed batches with empty query
and key sequences, length-1 sequences, Sq != Sk both ways (causal Sq > Sk: rows that see no key, O = 0
and LSE = +inf), odd lengths and sequences longer than a tile, checked by ``varlen_cases``; the rules
a varlen config must keep; the protocol verifier's view of a trip count loaded from ``cu_seqlens``
(it may be 0: a role that does not skip its work then is a deadlock)."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

import ci_sample
from built import artifact
from varlen_cases import SM100_EVERY, check_varlen_in_emulator, packed_batch, sampled

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels import attention

CONFIGS = [dict(dtype=dt, head_dim=hd, num_q=nq, causal=ca)
           for dt, hd, nq, ca in itertools.product(("bf16", "fp16"), (64, 96, 128), (1, 2), (False, True))]
CONFIGS += [dict(group=4), dict(group=8, num_q=1, causal=True), dict(head_dim=64, group=16, num_q=1),
            dict(group=3, causal=True)]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


# CI compiles each value of the sweep once; FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(CONFIGS, pairs=()), ids=_ids)
def test_every_varlen_config_verifies_and_assembles_without_spills(kwargs):
    config = AttentionConfig(varlen=True, **kwargs)
    m = artifact(config).manifest  # the protocol verifier beside ptxas; the emulator tests load this build
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["threads"][0] == 512


def test_varlen_parameters_and_packed_boxes():
    source = attention.build(AttentionConfig(varlen=True, group=4))
    names = [p.name for p in source.params]
    assert names[-5:] == ["cu_seqlens_q", "cu_seqlens_k", "total_q", "batch", "o_rows"]  # batch: the schedule's
    # 2 x 128 rows / 4 heads: 64 positions a CTA
    assert source.grid == "(min(ceil(total_q / 64) + B - 1, B * ceil(max_seqlen_q / 64)), H / 4, 1) (varlen_geometry)"
    maps = {p.name: p.tensor_map for p in source.params if p.tensor_map}
    assert maps["q"].box == maps["o"].box == (64, 4, 32, 1)  # the dense kernel's boxes over the packed tensors


def test_dense_kernel_reads_no_sequence_metadata():
    """The dense kernel's parameters and body are untouched by the varlen pieces (its PTX fingerprints
    check the bytes): no exit, no global load."""
    from fa4_mlir.core.compiler import compile_kernel

    dense = compile_kernel(attention.build(AttentionConfig(causal=True)), stop="cubin", verify_protocol=False).ptx
    packed = compile_kernel(attention.build(AttentionConfig(causal=True, varlen=True)), stop="cubin",
                            verify_protocol=False).ptx
    assert "ld.global" not in dense and "exit;" not in dense
    assert "ld.global" in packed and "exit;" in packed and "st.global.v4" in packed


# (config, query lengths, key lengths, heads): every head dim, dtype, Q-tile count, causal or not, GQA
# groups 1, 4, 8 (fused: a tile's rows are positions x heads) and 3 (not fused); sequences empty on
# either side, of length 1, Sq > Sk and Sq < Sk, odd, and longer than a tile (2Q: 256 / group
# positions, 1Q: 128 / group) or than a K/V tile
CASES = [
    (dict(head_dim=64), [5, 0, 130], [7, 3, 20], 2),
    (dict(head_dim=64, causal=True), [5, 0, 130, 40], [7, 3, 20, 0], 1),
    (dict(head_dim=64, num_q=1), [1, 129, 3], [1, 1, 200], 1),
    (dict(head_dim=64, num_q=1, causal=True, dtype="fp16"), [1, 77, 150], [300, 33, 1], 1),
    (dict(head_dim=64, dtype="fp16"), [0, 31, 1], [40, 0, 1], 1),
    (dict(head_dim=64, causal=True, dtype="fp16"), [1, 0, 9], [1, 2, 9], 1),
    (dict(head_dim=96), [33, 1], [257, 0], 1),
    (dict(head_dim=96, causal=True), [200, 3], [130, 1], 1),
    (dict(head_dim=96, num_q=1, dtype="fp16"), [0, 45, 140], [10, 0, 99], 1),
    (dict(head_dim=96, num_q=1, causal=True, dtype="fp16"), [200, 1, 3], [150, 1, 0], 1),
    (dict(head_dim=96, num_q=1), [3, 0], [0, 2], 1),
    (dict(head_dim=96, causal=True, dtype="fp16"), [17, 60], [90, 59], 1),
    (dict(head_dim=128), [19, 0, 1], [300, 5, 0], 1),
    (dict(head_dim=128, causal=True), [1, 260], [64, 255], 1),
    (dict(head_dim=128, num_q=1), [130, 7], [5, 129], 1),
    (dict(head_dim=128, num_q=1, causal=True), [9, 140], [1, 141], 1),
    (dict(head_dim=128, dtype="fp16"), [64, 2], [1, 64], 2),
    (dict(head_dim=128, num_q=1, causal=True, dtype="fp16"), [0, 50, 1], [3, 20, 0], 1),
    (dict(head_dim=128, group=4), [40, 0, 33], [1, 5, 300], 4),
    (dict(head_dim=128, group=4, num_q=1, causal=True), [70, 1], [20, 33], 4),
    (dict(head_dim=96, group=4, causal=True, dtype="fp16"), [65, 3], [140, 0], 4),
    (dict(head_dim=64, group=8, causal=True), [17, 70], [3, 200], 8),
    (dict(head_dim=64, group=8, num_q=1, dtype="fp16"), [20, 1, 0], [9, 0, 40], 16),
    (dict(head_dim=96, group=8, num_q=1, causal=True), [35, 5], [34, 100], 8),
    (dict(head_dim=128, group=8, dtype="fp16"), [1, 41], [77, 3], 8),
    (dict(head_dim=64, group=3, causal=True), [50, 9], [20, 70], 6),
]


def _case_id(case):
    kw, lq, lk, heads = case
    return f"{_ids(kw) or 'bf16'}-q{'.'.join(map(str, lq))}-k{'.'.join(map(str, lk))}-h{heads}"


@pytest.mark.parametrize("case", sampled(CASES, one_arg=True, every=SM100_EVERY), ids=[_case_id(c) for c in CASES])
def test_varlen_kernel_is_right_in_the_emulator(case):
    kwargs, lengths_q, lengths_k, heads = case
    config = AttentionConfig(varlen=True, **kwargs)
    rng = np.random.default_rng(zlib.crc32(_case_id(case).encode()))
    q, k, v, cu_q, cu_k = packed_batch(rng, lengths_q, lengths_k, heads, heads // config.group, config.head_dim,
                                       config.dtype)
    check_varlen_in_emulator(config, q, k, v, cu_q, cu_k, config.head_dim ** -0.5)


def test_the_verifier_finds_a_role_that_does_not_skip_a_zero_trip_count(monkeypatch):
    """With the trip count loaded from cu_seqlens (possibly 0), roles that run their first (peeled)
    tile without the ``n_iter > 0`` guard wait for barriers nobody arrives on, or load into buffers
    nobody waits for: the protocol verifier explores the 0 and reports it."""
    import contextlib

    from fa4_mlir.core.compiler import CompileError, compile_kernel
    from fa4_mlir.kernels.attention import softmax

    monkeypatch.setattr(softmax.varlen, "trips", lambda k, x, c: contextlib.nullcontext())
    with pytest.raises(CompileError) as info:
        compile_kernel(attention.build(AttentionConfig(varlen=True)), stop="fa4")
    assert any("protocol error" in d for d in info.value.diagnostics), info.value.diagnostics


@pytest.mark.parametrize("kwargs, message", [
    (dict(varlen=1), r"AttentionConfig.varlen must be True or False, got 1"),
    (dict(varlen=True, dtype="fp8_e4m3"), r"AttentionConfig.varlen must be False with fp8_e4m3, persistent, or "
                                          r"head dim 256/512 on sm_100a"),
    (dict(varlen=True, head_dim=256), r"AttentionConfig.varlen must be False with fp8_e4m3"),
    (dict(varlen=True, head_dim=512), r"AttentionConfig.varlen must be False with fp8_e4m3"),
])
def test_varlen_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AttentionConfig(**kwargs)


def test_long_packed_sequences_match_f64_reference_in_the_emulator():
    """Packed sequences with key lengths drawn in 1..4096 (one of 4096) and few queries each (Sq < Sk: the
    bottom-right diagonal far from the top-left one), an empty query sequence, causal."""
    rng = np.random.default_rng(4097)
    lengths_k = [4096, int(rng.integers(1, 4097)), int(rng.integers(1, 4097))]
    config = AttentionConfig(head_dim=128, causal=True, varlen=True)
    q, k, v, cu_q, cu_k = packed_batch(rng, [5, 0, 17], lengths_k, 1, 1, 128, "fp16")
    check_varlen_in_emulator(config, q, k, v, cu_q, cu_k, 128 ** -0.5)


# The compacted schedule (varlen_schedule) on sm_100a: more than 32 sequences (the warp scan's rounds),
# lengths at the tile edges (2Q: 256 positions, 1Q: 128; group 4 fused: a quarter), empty sequences first
# and last, causal with several K/V head groups (the linear index, heads minor).
SCHEDULED = [
    (dict(head_dim=64), [0, 1, 255, 256, 257, 3, 0, 2, 1] * 4, [2, 1, 40, 256, 3, 0, 9, 2, 0] * 4, 1),
    (dict(head_dim=64, num_q=1, causal=True, group=4), [0, 1, 31, 32, 33, 3, 0, 2, 40] * 4,
     [2, 1, 40, 32, 3, 0, 9, 2, 0] * 4, 8),
    # equal lengths (total_q = B max_seqlen_q): the tile without the scan; causal, last rows first
    (dict(head_dim=64, causal=True), [300] * 2, [300, 20], 1),
]


@pytest.mark.parametrize("case", sampled(SCHEDULED, one_arg=True, every=SM100_EVERY),
                         ids=[f"{_ids(c[0])}-b{len(c[1])}-h{c[3]}" for c in SCHEDULED])
def test_the_compacted_schedule_covers_every_tile_once(case):
    kwargs, lengths_q, lengths_k, heads = case
    config = AttentionConfig(varlen=True, **kwargs)
    rng = np.random.default_rng(len(lengths_q) + heads)
    q, k, v, cu_q, cu_k = packed_batch(rng, lengths_q, lengths_k, heads, heads // config.group, config.head_dim,
                                       config.dtype)
    check_varlen_in_emulator(config, q, k, v, cu_q, cu_k, config.head_dim ** -0.5)
