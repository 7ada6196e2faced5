"""The sm_100a paged attention over pages TMA does not load (``AttentionConfig.page_gather``, ``gather``; issue 26):
the load warp's 32 lanes gather each K/V row with cp.async into the TMA layout. Which page sizes gather; the gathered
configs through the whole compiler (protocol verifier on, ptxas -arch=sm_100a) with zero spills, their shared memory
and barriers where ``fa4-layout`` places them (Q0 on its own ``Q0_sync``, K/V full barriers counting the lanes), K
and V as pointers with their strides, no K/V TMA load; the verifier's view of the gathered writes; their numerics in
the PTX emulator (race checks on) against float64 over shuffled pages of 1 to 255 keys, dense and packed Q, split KV,
GQA, causal bottom-right, sequences of 0 keys. The debug trap is test_paged_debug_trap.py's, the ops' runs
test_torch_kvcache.py's and test_torch_varlen.py's. The GPU runs are the lead's (test/gpu)."""

from __future__ import annotations

import re
import zlib

import ci_sample
import numpy as np
import pytest
from built import gathered, verify_without_gathered
from test_split_kv_sm100 import check_split_in_emulator
from varlen_cases import SM100_EVERY, check_paged_case, paged_batch, sampled

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels import attention
from fa4_mlir.kernels.attention.dims import Dims
from fa4_mlir.layouts import fa4_layout


def test_pages_tma_does_not_load_are_gathered():
    """The powers of two from 16 are TMA-loaded, but 16 with num_q 1 at head dim 64 (12 chunks a tile spilled);
    every other size is gathered."""
    sizes = (1, 8, 15, 16, 24, 32, 48, 100, 128, 255, 256, 512)
    for d in (64, 96, 128):
        assert [AttentionConfig(head_dim=d, page_size=p).page_gather for p in sizes] \
            == [True, True, True, False, True, False, True, True, False, True, False, False]
    assert AttentionConfig(head_dim=64, num_q=1, page_size=16).page_gather
    assert not AttentionConfig(head_dim=128, num_q=1, page_size=16).page_gather
    assert not AttentionConfig(head_dim=64, num_q=1, page_size=32).page_gather
    assert not AttentionConfig(head_dim=128).page_gather  # not paged
    gathered = AttentionConfig(head_dim=64, page_size=24)
    assert gathered.page_chunk == 0 and gathered.fa4.page_gather  # no TMA chunk: rows; the layout's barriers
    assert not AttentionConfig(head_dim=64, page_size=64).fa4.page_gather


def test_gather_arguments_of_an_sm100_kernel():
    """The caches and their strides in 16-byte pieces, as the sm_90a kernel takes them."""
    k, v = np.zeros((2, 24, 1, 64), np.uint16), np.zeros((2, 24, 1, 64), np.uint16)
    assert attention.gather_arguments(AttentionConfig(page_size=64), k, v, (512, 64, 64), (512, 64, 64)) == {}
    got = attention.gather_arguments(AttentionConfig(head_dim=64, page_size=24), k, v, (1536, 64, 64),
                                     (3072, 128, 64))
    assert got.pop("k") is k and got.pop("v") is v
    assert got == {"k_page_stride": 192, "k_row_stride": 8, "k_head_stride": 8, "v_page_stride": 384,
                   "v_row_stride": 16, "v_head_stride": 8}


# every head dim, num_q 1 and 2 (fused and split K/V rings; one and two Q@K' depth sub-stages), dense and packed Q,
# split KV, GQA, fp16; pages of 1, 8, 16 (1Q d64), 24, 48, 100, 255
COMPILED = [
    dict(head_dim=64, page_size=1, causal=True, group=4), dict(head_dim=64, page_size=16, num_q=1),
    dict(head_dim=64, page_size=255, varlen=True, num_q=1, causal=True),
    dict(head_dim=96, page_size=24, varlen=True, causal=True), dict(head_dim=96, page_size=48, num_q=1),
    dict(head_dim=128, page_size=100, split_kv=True), dict(head_dim=128, page_size=8, dtype="fp16", varlen=True),
    dict(head_dim=128, page_size=255, num_q=1, split_kv=True, causal=True),
    dict(head_dim=64, page_size=100, split_kv=True, group=4, num_q=1),
]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


# CI compiles each value of the sweep once; FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(COMPILED, pairs=()), ids=_ids)
def test_gathered_configs_verify_and_assemble_without_spills_on_the_layout(ctx, kwargs):
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.core.layout_ir import place_layout

    config = AttentionConfig(**kwargs)
    result, source = gathered(config)  # the emulator tests load this build
    m = result.manifest
    # the layout fa4-layout prints: shared memory, barrier indices, Q0_sync, lane-counted K/V full barriers
    layout = fa4_layout(config.fa4)
    _, placed = place_layout(layout, "sm_100a")
    assert m["smem_bytes"] == placed.smem_bytes
    placed_ir = compile_kernel(source, stop="fa4", verify_protocol=False).mlir
    indices = {n: int(i) for i, n in re.findall(r'index = (\d+) : i64, num_barriers = \d+ : i64, sym_name = "(\w+)"',
                                                placed_ir)}
    assert indices == placed.barrier_index and "Q0_sync" in indices
    counts = {b.name: (b.counts[0], b.arrival) for b in layout.barriers}
    ring = "kv" if config.fa4.fused_kv else "k"
    assert counts[f"{ring}_producer"] == (32, "threads") and counts["Q0_sync"] == (1, "tx")
    assert counts.get("v_producer", (32, "threads")) == (32, "threads")
    # TMA loads only Q (a box per 64-column block of each Q half); a tile's K and V rows (tile 0's, then the loop's)
    # are bn / 4 groups of four rows, a 16-byte cp.async per block of each, one cp.async group; the loop waits for
    # the previous tile's (wait_group 1), the last tile's is waited after it
    d, ptx = Dims(config), result.ptx
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.shared::cta\.global", ptx)) == config.num_q * d.blocks
    assert len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)) == 2 * (d.bn // 4 * 2 * d.blocks)
    assert len(re.findall(r"cp\.async\.commit_group", ptx)) == 2
    assert sorted(re.findall(r"cp\.async\.wait_group\s+(\d)", ptx)) == ["0", "1"]
    assert re.search(r"shfl\.sync\.idx\.b32", ptx) and re.search(r"ld\.global\.nc\.b32", ptx)


@pytest.mark.parametrize("drop, bug", [("nvvm.fence.proxy", "fence"), ("pipeline_producer_commit", None)])
def test_the_protocol_verifier_sees_the_gathered_writes(ctx, drop, bug):
    """fa4-verify-protocol takes each cp.async as a generic-proxy write of its stage: the gathered kernel is
    accepted; without the load warp's proxy fences the MMA warp's tcgen05.mma reads are a [fence] error, without
    its arrivals the MMA warp waits forever (the lines after the first cp.async copy: the load role is the
    kernel's last)."""
    kernel = attention.build(AttentionConfig(head_dim=64, page_size=24, num_q=1))
    classes, messages = verify_without_gathered(kernel.mlir, drop)
    assert (bug in classes) if bug else classes, messages


def _case_id(case):
    kw, sq, lk, heads = case
    q = f"q{'.'.join(map(str, sq))}" if isinstance(sq, list) else f"sq{sq}"
    return f"{_ids(kw)}-{q}-k{'.'.join(map(str, lk))}-h{heads}"


# (config, Sq (dense Q) or query lengths (varlen), key counts, heads): at most 300 keys a sequence
CASES = [
    (dict(page_size=1, head_dim=64, group=4), 1, [37, 0, 200], 4),  # a page per key; decode, GQA 4, no keys
    (dict(page_size=24, head_dim=128, causal=True), 4, [1, 100, 0], 1),
    (dict(page_size=48, head_dim=96, num_q=1), 3, [130, 5], 2),  # d96: columns 96-127 zero-filled; 1Q
    (dict(page_size=100, head_dim=128, num_q=1, causal=True, group=4), 16, [129, 7, 0], 4),
    (dict(page_size=255, head_dim=64, causal=True), 2, [300, 40], 1),  # pages of 255: a tile spans two
    (dict(page_size=16, head_dim=64, num_q=1), 5, [200, 0, 17], 2),  # pages of 16 at 1Q d64: gathered
    (dict(page_size=24, head_dim=96, varlen=True, causal=True), [33, 1, 0], [257, 0, 5], 1),  # packed Q
    (dict(page_size=1, head_dim=128, varlen=True, num_q=1), [3, 50], [170, 80], 1),
    (dict(page_size=100, head_dim=64, varlen=True, group=4), [40, 0, 33], [1, 5, 300], 4),
    (dict(page_size=255, head_dim=128, varlen=True, causal=True, num_q=1, dtype="fp16"), [70, 1], [20, 260], 1),
    (dict(page_size=48, head_dim=128, causal=True), 140, [200, 0], 1),  # Sq > Sk: causal rows that see no key
    (dict(page_size=8, head_dim=96, varlen=True, group=4, num_q=1), [20, 1], [9, 140], 4),
]


@pytest.mark.parametrize("case", sampled(CASES, one_arg=True, every=SM100_EVERY), ids=[_case_id(c) for c in CASES])
def test_gathered_kernel_is_right_in_the_emulator(case):
    """O and the LSE against float64 over the keys the block table names (``varlen_cases``)."""
    kwargs, sq, lengths_k, heads = case
    config = AttentionConfig(**kwargs)
    assert config.page_gather
    check_paged_case(config, sq, lengths_k, heads, zlib.crc32(_case_id(case).encode()))


# (config, Sq, key counts, heads, num_splits): split KV, each range's tiles gathered from its first key on
SPLIT_CASES = [
    (dict(page_size=24, head_dim=128), 1, [300, 0, 130], 1, 3),
    (dict(page_size=100, head_dim=64, causal=True, group=4), 5, [290, 1], 4, 2),
    (dict(page_size=1, head_dim=96, causal=True), 3, [250, 40], 2, 2),
    (dict(page_size=255, head_dim=128, num_q=1), 2, [280, 0], 1, 3),
]


@pytest.mark.parametrize("case", sampled(SPLIT_CASES, one_arg=True, every=SM100_EVERY),
                         ids=[f"{_case_id(c[:4])}-s{c[4]}" for c in SPLIT_CASES])
def test_gathered_split_kernel_is_right_in_the_emulator(case):
    kwargs, sq, lengths_k, heads, splits = case
    config = AttentionConfig(split_kv=True, **kwargs)
    assert config.page_gather
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    hk, d = heads // config.group, config.head_dim
    k, v, table, seqused = paged_batch(rng, lengths_k, config.page_size, hk, d, config.dtype)
    q = reference.random_bits(rng, (len(lengths_k), sq, heads, d), config.dtype, 1.0)
    check_split_in_emulator(config, q, k, v, table, seqused, d ** -0.5, splits)


def test_causal_split_kv_over_gathered_pages_at_head_dim_64_takes_2q():
    """The one gathered combination ptxas spills (the kernel's prologue, 1Q): refused; its neighbours are not."""
    with pytest.raises(ConfigError, match=r"AttentionConfig.num_q must be 2 for a causal split KV over gathered pages "
                                          r"\(``page_gather``\) at head dim 64 on sm_100a \(with 1Q ptxas spills "
                                          r"registers of the kernel's prologue there\), got 1"):
        AttentionConfig(head_dim=64, num_q=1, page_size=24, split_kv=True, causal=True)
    for kwargs in (dict(page_size=64, causal=True), dict(page_size=24), dict(page_size=24, head_dim=96, causal=True)):
        AttentionConfig(**{"head_dim": 64, "num_q": 1, "split_kv": True, **kwargs})
