"""The sm_90a paged attention over pages TMA cannot load (``AttentionConfig.page_gather``, ``hopper_gather``): the
load warp gathers each K/V row with cp.async into the TMA layout. Which page sizes gather; the gathered configs
through the whole compiler (protocol verifier on, ptxas -arch=sm_90a) with zero spills, K and V as pointers with
their strides, no K/V TMA load, a tile's cp.async copies and their wait, proxy fence and arrival; their numerics
in the PTX emulator (race checks on: a missing proxy fence or wait is a reported race) against float64 over
ragged batches, page sizes 1 to 255 (dense and packed Q, decode and prefill, GQA, causal bottom-right, packed
GQA heads); the split-KV decode's are in test_split_kv_sm90.py, the ops' in test_torch_kvcache.py and
test_torch_varlen.py. The GPU runs are the lead's (test/gpu)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import ci_sample
from built import gathered, verify_without_gathered
from varlen_cases import SM90_EVERY, check_paged_in_emulator, paged_batch, prefix_sums, sampled

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.kernels import attention


def _config(**kwargs) -> AttentionConfig:
    return AttentionConfig(target="sm_90a", **kwargs)


def test_pages_tma_cannot_load_are_gathered():
    """Multiples of 16 are TMA-loaded (at head dims 192/256 only powers of two from 32: other sizes' chunk
    arithmetic, and pages of 16's 20 loads a tile, spilled); every other size is gathered (sm_100a's rule:
    test_attention_paged_gather_sm100.py)."""
    for d in (64, 96, 128):
        assert [_config(head_dim=d, page_size=p).page_gather for p in (1, 8, 15, 16, 24, 48, 100, 208, 255, 256)] \
            == [True, True, True, False, True, False, True, False, True, False]
    for d in (192, 256):
        assert [_config(head_dim=d, page_size=p).page_gather for p in (1, 16, 24, 32, 48, 64, 80, 256, 512)] \
            == [True, True, True, False, True, False, True, False, False]
    assert not _config(head_dim=128).page_gather  # not paged
    assert not AttentionConfig(target="sm_100a", head_dim=64, page_size=64).page_gather
    assert _config(head_dim=64, page_size=24).page_chunk == 0  # no TMA chunk: rows
    assert _config(head_dim=64, page_size=48).page_chunk == 48


def test_gather_arguments_only_for_gathered_kernels():
    """The caches and their strides, given in elements, passed in 16-byte pieces (a size-1 dimension's stride
    may be anything: its index is 0)."""
    k, v = np.zeros((2, 8, 1, 64), np.uint16), np.zeros((2, 8, 1, 64), np.uint16)
    assert attention.gather_arguments(_config(page_size=64), k, v, (512, 64, 64), (512, 64, 64)) == {}
    got = attention.gather_arguments(_config(page_size=8), k, v, (512, 64, 3), (1024, 128, 64))
    assert got.pop("k") is k and got.pop("v") is v
    assert got == {"k_page_stride": 64, "k_row_stride": 8, "k_head_stride": 0, "v_page_stride": 128,
                   "v_row_stride": 16, "v_head_stride": 8}


# every head dim; pages of 1, 8, 24, 40, 100, 255, and at 192/256 the sizes TMA spilled (16, 48, 80); dense and packed
# Q, split KV, packed GQA heads
COMPILED = [
    dict(head_dim=64, page_size=1, causal=True), dict(head_dim=64, page_size=255, varlen=True),
    dict(head_dim=64, page_size=8, pack_gqa=8, group=8), dict(head_dim=96, page_size=24, varlen=True, causal=True),
    dict(head_dim=96, page_size=100), dict(head_dim=128, page_size=40, causal=True),
    dict(head_dim=128, page_size=8, dtype="fp16", varlen=True), dict(head_dim=128, page_size=100, split_kv=True),
    dict(head_dim=128, page_size=1, pack_gqa=4, group=4, split_kv=True, causal=True),
    dict(head_dim=192, page_size=16, causal=True), dict(head_dim=192, page_size=48, varlen=True),
    dict(head_dim=192, page_size=24, split_kv=True), dict(head_dim=256, page_size=80, causal=True),
    dict(head_dim=256, page_size=1, varlen=True, dtype="fp16"), dict(head_dim=256, page_size=40, split_kv=True),
    dict(head_dim=256, page_size=255, pack_gqa=2, group=2, causal=True),
]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


# CI: a subset with every value of every key, and each head dim with every value of the others (the H100 suite
# builds and runs the configurations the op takes); FA4_EMU_FULL_MATRIX=1 all of them
@pytest.mark.parametrize("kwargs", ci_sample.in_ci(COMPILED, ci_sample.covering(COMPILED, pairs=("head_dim",)),
                                                   one_arg=True), ids=_ids)
def test_gathered_configs_assemble_without_spills(ctx, kwargs):
    result, _ = gathered(_config(**kwargs))  # the emulator tests load this build
    ptx, t = result.ptx, _config(**kwargs).hopper
    blocks = t.head_dim // 64
    # TMA loads only Q (a load per warpgroup and block); K_0, K_j and V_{j-1} in the loop and the last V are each
    # BN / 4 groups of four rows, a 16-byte cp.async per block
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.shared::cta\.global", ptx)) == t.consumers * blocks
    assert len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)) == 4 * (t.bn // 4) * blocks
    assert len(re.findall(r"cp\.async\.commit_group", ptx)) == 4
    assert sorted(re.findall(r"cp\.async\.wait_group\s+(\d)", ptx)) == ["0", "0", "0", "1"]
    assert re.search(r"ld\.global\.nc\.b32", ptx) and re.search(r"shfl\.sync\.idx\.b32", ptx)


# (dtype, head dim, causal, page size, key counts, Sq (dense Q) or query lengths (packed Q), heads, kv heads,
# pack_gqa). Each case names what it covers.
EMULATED = [
    ("bf16", 64, False, 1, [37, 0, 200], 1, 4, 1, 0),  # pages of one key: a page per row; decode, GQA 4, no keys
    ("bf16", 64, True, 1, [5, 70], [3, 70], 2, 2, 0),  # packed Q prefill, causal bottom-right
    ("fp16", 96, False, 8, [81, 0, 160], [3, 2, 70], 4, 1, 0),  # d96: the tile's columns 96-127 zero-filled
    ("bf16", 128, True, 24, [1, 100, 0], 3, 4, 1, 0),
    ("bf16", 128, False, 40, [129, 7, 300], 16, 2, 1, 0),  # Sq 16: a speculative decode step
    ("fp16", 128, True, 100, [250, 0, 257], 130, 1, 1, 0),  # prefill, two CTAs, rows past Sq clipped
    ("bf16", 192, True, 24, [113, 0], 9, 4, 1, 0),
    ("bf16", 192, False, 48, [64, 128, 3], [5, 1, 0], 2, 2, 0),  # a size TMA spilled at d192
    ("fp16", 256, True, 100, [250, 0, 257], 3, 2, 1, 0),
    ("bf16", 256, False, 16, [20, 100], [64, 5], 1, 1, 0),  # pages of 16 at d256: gathered
    ("bf16", 64, True, 255, [47, 0, 300], [3, 1, 60], 4, 1, 0),  # pages of 255: a tile spans two
    ("bf16", 128, True, 8, [37, 0, 200], 1, 16, 2, 8),  # packed GQA heads: decode, 8 heads a K/V head
    ("fp16", 64, False, 40, [200, 16, 0], 16, 8, 2, 4),  # 16 positions x 4 heads
]


@pytest.mark.parametrize("dtype, d, causal, page, lengths_k, queries, h, hk, pack",
                         sampled(EMULATED, every=SM90_EVERY),
                         ids=[f"{c[0]}-d{c[1]}-{'causal' if c[2] else 'full'}-p{c[3]}-g{c[8]}-{i}"
                              for i, c in enumerate(EMULATED)])
def test_gathered_batches_match_f64_reference_in_the_emulator(dtype, d, causal, page, lengths_k, queries, h, hk,
                                                              pack):
    """O and the LSE against float64 over the keys the block table names (``varlen_cases``)."""
    packed = isinstance(queries, list)
    config = _config(dtype=dtype, head_dim=d, causal=causal, page_size=page, varlen=packed, pack_gqa=pack,
                     group=pack or 1)
    assert config.page_gather
    rng = np.random.default_rng(len(lengths_k) * 1000 + d + page + h)
    k_cache, v_cache, table, seqused_k = paged_batch(rng, lengths_k, page, hk, d, dtype)
    if packed:
        cu_q = prefix_sums(queries)
        q = reference.random_bits(rng, (int(cu_q[-1]), h, d), dtype, 1.0)
    else:
        cu_q = None
        q = reference.random_bits(rng, (len(lengths_k), queries, h, d), dtype, 1.0)
    check_paged_in_emulator(config, q, k_cache, v_cache, table, seqused_k, d ** -0.5, cu_q=cu_q)


def test_strided_caches_are_gathered_through_their_strides():
    """Caches that are views of a wider buffer (a [num_pages, 2, page, Hk, D] K/V pair's halves, heads padded):
    the kernel indexes them by the strides it is given, so only the view's rows count."""
    from fa4_mlir import runtime
    from fa4_mlir.kernels.attention import gqa_arguments, launch_geometry, paged_arguments

    config = _config(head_dim=64, page_size=24, causal=True)
    rng = np.random.default_rng(7)
    lengths, hk, h, sq, d = [70, 3], 2, 4, 2, 64
    k, v, table, used = paged_batch(rng, lengths, 24, hk, d, "bf16")
    pair = reference.random_bits(rng, (k.shape[0], 2, 24, hk + 1, d), "bf16", 1.0)  # a padding head
    pair[:, 0, :, :hk], pair[:, 1, :, :hk] = k, v
    kv = [pair[:, i, :, :hk] for i in (0, 1)]
    q = reference.random_bits(rng, (len(lengths), sq, h, d), "bf16", 1.0)
    o = np.full(q.shape, reference.POISON["bf16"], np.uint16)
    lse = np.full((len(lengths), h, sq), np.nan, np.float32)
    strides = [tuple(s // 2 for s in t.strides[:3]) for t in kv]
    kernel = runtime.load("attention", config, device="emulator")
    from fa4_mlir.runtime import GlobalTensor

    kernel.launch(launch_geometry(config, len(lengths), sq, h, max(lengths)),
                  {"q": GlobalTensor.host(q, "bf16"), "o": GlobalTensor.host(o, "bf16"), "lse": lse, "seq_q": sq,
                   "seq_k": max(lengths), "num_heads": h, **gqa_arguments(config, h, hk), "write_lse": 1,
                   "scale_log2e": d ** -0.5 * np.log2(np.e),
                   **paged_arguments(config, table, table.shape[1], used, k.shape[0]),
                   **attention.gather_arguments(config, pair[:, 0, :, :hk], pair[:, 1, :, :hk], *strides)})
    assert strides[0] == (2 * 24 * (hk + 1) * d, (hk + 1) * d, d)
    keys, cu_k = reference.paged_keys(k, table, used)
    values, _ = reference.paged_keys(v, table, used)
    from varlen_cases import _compare

    b = len(lengths)
    _compare(config, q.reshape(b * sq, h, d), keys, values, np.arange(b + 1, dtype=np.int32) * sq, cu_k, d ** -0.5,
             o.reshape(b * sq, h, d), lse.transpose(1, 0, 2).reshape(h, b * sq))


@pytest.mark.parametrize("drop, bug", [("nvvm.fence.proxy", "fence"), ("pipeline_producer_commit", None)])
def test_the_protocol_verifier_sees_the_gathered_writes(ctx, drop, bug):
    """fa4-verify-protocol takes each cp.async as a generic-proxy write of its stage: the gathered kernel is
    accepted; without the load warp's proxy fences the consumers' wgmma reads are a [fence] error, without its
    arrivals the consumers wait forever (the fence and arrive lines after the cp.async copies: the Q load's TMA
    needs neither)."""
    kernel = attention.build(_config(head_dim=64, page_size=24, block_n=64))
    classes, messages = verify_without_gathered(kernel.mlir, drop)
    assert (bug in classes) if bug else classes, messages
