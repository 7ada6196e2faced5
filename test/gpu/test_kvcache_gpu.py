"""``torch.ops.fa4.flash_attn_with_kvcache`` (``fa4_mlir.torch.flash_attn_with_kvcache``) on the GPU: decoding
over paged and non-paged K/V caches, with and without appended keys, against a float64 reference over the
gathered keys (``test_varlen_gpu._check``: within twice the error of the same computation at the kernel's
precision; rows that see no key exactly 0 with LSE +inf); the cache after the call equal to the expected one;
the GPU-only errors (misplaced block table, CUDA graph capture of an unchecked call), a captured decode step,
and ``torch.compile``.

The cases are drawn fresh each run (the seed is in every failure message): page sizes 16, 48, 64 and 256 (and
in a test of their own the gathered sizes 1, 40 and 255, head dim 256 over pages of 100) and the
non-paged cache (``NON_PAGED_KEYS`` keys a sequence, viewed as pages of 256), Sq 1..16, cached keys per
sequence 0..64k (log-uniform), new keys 0..Sq, GQA groups 1, 4 and 8, causal (bottom-right) and not, bf16
and fp16, head dims 64 and 128, every (dtype, head dim, causal, group) at least once; batches this small split
their keys (``num_splits`` 0: the op's choice), and a second test forces split counts. Artifacts:
test/gpu/build_artifacts.py (``paged_config``, with and without ``split_kv``, and the combine kernels).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from test_varlen_gpu import _check, _poisoned_allocator

GROUPS = (1, 4, 8)
HEAD_DIMS = (64, 128)
PAGE_SIZES = (16, 64, 256, 48, 0)  # 0: not paged; 48: a page that is not a power of two (sm_90, head dims <= 128)
NON_PAGED_KEYS = 8192  # the non-paged cases' Sk_max: pages of 256 (kvcache.CACHE_PAGES)
MAX_CACHED = 65536 - 16  # cached keys a paged sequence holds at most before the append (<= 16 new keys)
EXTRA_CASES = 20  # random cases beyond one per (dtype, head dim, causal, group): 24 + 20 = 44
GATHER_PAGE_SIZES = (1, 40, 255)  # pages TMA cannot load: gathered (build_artifacts.KV_GATHER_PAGE_SIZES)
GATHER_D256 = (256, 100)  # head dim 256's gathered cases: pages of 100 (build_artifacts.KV_GATHER_D256)
GATHER_CACHED = 16384  # cached keys a sequence of the gathered cases holds at most (pages of 1: 16k entries)


def _cached(rng, b: int, most: int) -> list[int]:
    """Per sequence: 0 with probability 1/8, else log-uniform in 1..most."""
    return [0 if rng.random() < 0.125 else int(min(most, math.exp(rng.uniform(0, math.log(most))))) for _ in range(b)]


def _case(torch, rng, gen, dtype, d: int, group: int, page_size: int, most: int = MAX_CACHED):
    """A random decode batch: q, the caches, the block table (None: not paged), cache_seqlens, k, v (None: no
    append), and the keys each sequence holds after the append (``most`` cached keys at most, paged)."""
    b, sq, hk = int(rng.integers(1, 5)), int(rng.integers(1, 17)), int(rng.integers(1, 3))
    new = int(rng.integers(0, sq + 1)) if rng.random() < 0.6 else 0
    cached = _cached(rng, b, (most if page_size else NON_PAGED_KEYS - 16))
    used = [n + new for n in cached]
    randn = lambda *shape: torch.randn(*shape, generator=gen, device="cuda").to(dtype)  # noqa: E731
    if page_size:
        pages = [-(-n // page_size) for n in used]
        per_seq = max(pages) + int(rng.integers(0, 3))
        num_pages = sum(pages) + int(rng.integers(1, 4))
        order = torch.from_numpy(rng.permutation(num_pages).astype(np.int32))
        table = torch.full((b, max(per_seq, 1)), -1, dtype=torch.int32)
        at = 0
        for i, n in enumerate(pages):
            table[i, :n] = order[at:at + n]
            at += n
        table = table.cuda()
        k_cache, v_cache = randn(num_pages, page_size, hk, d), randn(num_pages, page_size, hk, d)
    else:
        table = None
        k_cache, v_cache = randn(b, NON_PAGED_KEYS, hk, d), randn(b, NON_PAGED_KEYS, hk, d)
    k, v = (randn(b, new, hk, d), randn(b, new, hk, d)) if new else (None, None)
    q = randn(b, sq, hk * group, d)
    return q, k_cache, v_cache, table, cached, k, v, used


def _gathered(torch, cache, table, used):
    """Each sequence's ``used`` keys of ``cache`` back to back (through the block table when paged)."""
    rows = []
    for b, n in enumerate(used):
        if table is None:
            rows.append(cache[b, :n])
        else:
            pages = -(-n // cache.shape[1])
            rows.append(cache[table[b, :pages].long()].flatten(0, 1)[:n])
    return torch.cat(rows)


def _appended(cache, new, starts, table):
    """``cache`` with ``new`` (B, Sk_new, Hk, D) written at positions starts[b].. the plain way."""
    out = cache.clone()
    page = cache.shape[1]
    for b in range(new.shape[0]):
        for i in range(new.shape[1]):
            p = starts[b] + i
            out[b if table is None else int(table[b, p // page]), p % page] = new[b, i]
    return out


def test_random_decode_batches_match_float64(torch_gpu):
    from fa4_mlir.torch import flash_attn_with_kvcache

    torch = torch_gpu
    seed = int(np.random.default_rng().integers(1 << 31))
    rng = np.random.default_rng(seed)
    combos = list(itertools.product(("bf16", "fp16"), HEAD_DIMS, (False, True), GROUPS))
    combos += [combos[int(rng.integers(len(combos)))] for _ in range(EXTRA_CASES)]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for i, (dtype_name, d, causal, group) in enumerate(combos):
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        page_size = PAGE_SIZES[i % len(PAGE_SIZES)]
        q, k_cache, v_cache, table, cached, k, v, used = _case(torch, rng, gen, dtype, d, group, page_size)
        b, sq, h, _ = q.shape
        as_int = k is None and len(set(cached)) == 1 and rng.random() < 0.5  # one length: cache_seqlens an int
        seqlens = cached[0] if as_int else torch.tensor(cached, dtype=torch.int32, device="cuda")
        scale = float(rng.uniform(0.02, 0.3))
        what = (f"seed {seed} case {i}: {dtype_name} d{d} H{h}/{k_cache.shape[2]} causal={causal} page_size "
                f"{page_size or 'none'} Sq {sq} cached {cached} new {0 if k is None else k.shape[1]} scale "
                f"{scale:.4f}")
        want_k = k_cache if k is None else _appended(k_cache, k, cached, table)
        want_v = v_cache if v is None else _appended(v_cache, v, cached, table)
        _poisoned_allocator(torch, q.numel(), dtype)
        out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, table, softmax_scale=scale,
                                           causal=causal, return_softmax_lse=True)
        assert out.shape == q.shape and out.dtype == dtype and lse.shape == (b, h, sq), what
        assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v), f"{what}: the cache after the append"
        keys, values = _gathered(torch, k_cache, table, used), _gathered(torch, v_cache, table, used)
        cu_q = [j * sq for j in range(b + 1)]
        cu_k = [0, *itertools.accumulate(used)]
        _check(torch, out.flatten(0, 1), lse.transpose(0, 1).flatten(1), q.flatten(0, 1), keys, values, cu_q, cu_k,
               causal, scale, what)


def test_split_kv_decode_matches_float64(torch_gpu):
    """Split-KV decode (``num_splits``: the split kernel's fp32 partials, then the combine kernel): forced
    counts 2, 3, 7 and 128 (at most as many as the key tiles) and the op's choice, on batches of 1-2 sequences
    over up to 64k keys (empty sequences included), against float64 as above."""
    from fa4_mlir.torch import flash_attn_with_kvcache

    torch = torch_gpu
    seed = int(np.random.default_rng().integers(1 << 31))
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for i, splits in enumerate((2, 3, 7, 128, 0, 0, 5, 0)):
        dtype_name, d, causal, group = ("bf16", "fp16")[i % 2], HEAD_DIMS[i // 2 % 2], i % 3 == 0, GROUPS[i % 3]
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        page_size = (64, 256, 0, 16, 48)[i % 5]
        q, k_cache, v_cache, table, cached, k, v, used = _case(torch, rng, gen, dtype, d, group, page_size)
        q, cached, used = q[:2], cached[:2], used[:2]  # 1-2 sequences: a grid far short of the SMs
        table = None if table is None else table[:2].contiguous()
        k_cache, v_cache = (c[:2] if table is None else c for c in (k_cache, v_cache))
        k, v = (None, None) if k is None else (k[:2], v[:2])
        b, sq, h, _ = q.shape
        seqlens = torch.tensor(cached, dtype=torch.int32, device="cuda")
        scale = float(rng.uniform(0.02, 0.3))
        what = (f"seed {seed} case {i}: num_splits {splits} {dtype_name} d{d} H{h}/{k_cache.shape[2]} causal={causal} "
                f"page_size {page_size or 'none'} Sq {sq} cached {cached} new {0 if k is None else k.shape[1]}")
        _poisoned_allocator(torch, q.numel(), dtype)
        out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, table, softmax_scale=scale,
                                           causal=causal, return_softmax_lse=True, num_splits=splits)
        keys, values = _gathered(torch, k_cache, table, used), _gathered(torch, v_cache, table, used)
        _check(torch, out.flatten(0, 1), lse.transpose(0, 1).flatten(1), q.flatten(0, 1), keys, values,
               [j * sq for j in range(b + 1)], [0, *itertools.accumulate(used)], causal, scale, what)


def test_gathered_page_sizes_match_float64(torch_gpu):
    """Pages TMA cannot load (``AttentionConfig.page_gather``: the load warp gathers rows with cp.async): sizes
    ``GATHER_PAGE_SIZES`` over every (dtype, head dim 64/128, causal, group), head dim 256 over pages of 100
    (bf16, groups 1 and 4), up to ``GATHER_CACHED`` cached keys (a page of one key is a table entry a key); the
    op's split choice, and forced splits 2 and 5 on every fourth case. Against float64 as above."""
    from fa4_mlir.torch import flash_attn_with_kvcache

    torch = torch_gpu
    seed = int(np.random.default_rng().integers(1 << 31))
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    combos = [(dt, d, c, g, GATHER_PAGE_SIZES[i % len(GATHER_PAGE_SIZES)]) for i, (dt, d, c, g) in enumerate(
        itertools.product(("bf16", "fp16"), HEAD_DIMS, (False, True), GROUPS))]
    combos += [("bf16", GATHER_D256[0], c, g, GATHER_D256[1]) for c in (False, True) for g in (1, 4)]
    for i, (dtype_name, d, causal, group, page_size) in enumerate(combos):
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        q, k_cache, v_cache, table, cached, k, v, used = _case(torch, rng, gen, dtype, d, group, page_size,
                                                               GATHER_CACHED)
        b, sq, h, _ = q.shape
        splits = (0, 2, 0, 5)[i % 4]
        seqlens = torch.tensor(cached, dtype=torch.int32, device="cuda")
        scale = float(rng.uniform(0.02, 0.3))
        what = (f"seed {seed} case {i}: {dtype_name} d{d} H{h}/{k_cache.shape[2]} causal={causal} page_size "
                f"{page_size} Sq {sq} cached {cached} new {0 if k is None else k.shape[1]} num_splits {splits}")
        want_k = k_cache if k is None else _appended(k_cache, k, cached, table)
        want_v = v_cache if v is None else _appended(v_cache, v, cached, table)
        _poisoned_allocator(torch, q.numel(), dtype)
        out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, table, softmax_scale=scale,
                                           causal=causal, return_softmax_lse=True, num_splits=splits)
        assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v), f"{what}: the cache after the append"
        keys, values = _gathered(torch, k_cache, table, used), _gathered(torch, v_cache, table, used)
        _check(torch, out.flatten(0, 1), lse.transpose(0, 1).flatten(1), q.flatten(0, 1), keys, values,
               [j * sq for j in range(b + 1)], [0, *itertools.accumulate(used)], causal, scale, what)


def test_gpu_placement_errors_and_graph_capture(torch_gpu):
    """A checked call is captured (no host copy): the captured decode step appends and attends on replay."""
    from fa4_mlir.errors import LaunchError
    from fa4_mlir.torch import flash_attn_with_kvcache

    torch = torch_gpu
    q = torch.randn(2, 1, 8, 128, device="cuda").bfloat16()
    k_cache, v_cache = (torch.randn(6, 64, 2, 128, device="cuda").bfloat16() for _ in range(2))
    table = torch.tensor([[4, 1], [0, 5]], dtype=torch.int32, device="cuda")
    seqlens = torch.tensor([70, 3], dtype=torch.int32, device="cuda")
    k, v = (torch.randn(2, 1, 2, 128, device="cuda").bfloat16() for _ in range(2))
    with pytest.raises(LaunchError, match=r"flash_attn_with_kvcache: block_table must be a CUDA tensor, got "
                                          r"device 'cpu'"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, table.cpu())
    with pytest.raises(LaunchError, match=r"flash_attn_with_kvcache: block_table\[1, 0\] must be a page of the "
                                          r"cache, in \[0, 6\)"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, torch.tensor([[4, 1], [6, 5]], dtype=torch.int32,
                                                                                 device="cuda"))
    eager = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, table, causal=True)
    before = k_cache.clone()
    k_cache[1, 6] = 0  # the appended keys: sequence 0's key 70 (page table[0, 1] = 1, row 6), sequence 1's key 3
    k_cache[0, 3] = 0  # (page table[1, 0] = 0, row 3); the replay writes them again
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, table, causal=True)
    captured.zero_()
    graph.replay()
    torch.testing.assert_close(captured, eager, atol=0, rtol=0)
    assert torch.equal(k_cache, before)
    table2 = table.clone()  # never checked: its values would need the host copy, which a capture cannot run
    with pytest.raises(LaunchError, match=r"flash_attn_with_kvcache: the call must run outside CUDA graph capture"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, table2)


def test_torch_compile_fullgraph_with_append(torch_gpu):
    from fa4_mlir.torch import flash_attn_with_kvcache

    torch = torch_gpu
    q = torch.randn(3, 4, 8, 64, device="cuda").half()
    caches = [torch.randn(3, 256, 2, 64, device="cuda").half() for _ in range(2)]
    k, v = (torch.randn(3, 4, 2, 64, device="cuda").half() for _ in range(2))
    seqlens = torch.tensor([0, 100, 252], dtype=torch.int32, device="cuda")

    def f(q, k_cache, v_cache, k, v):
        return flash_attn_with_kvcache(q, k_cache, v_cache, k, v, seqlens, causal=True) * 2

    eager_caches = [c.clone() for c in caches]
    eager = f(q, *eager_caches, k, v)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)(q, *caches, k, v)
    torch.testing.assert_close(compiled, eager, atol=0, rtol=0)
    assert all(torch.equal(a, b) for a, b in zip(caches, eager_caches))
