"""``torch.ops.fa4.flash_attn_with_kvcache``: attention over a (paged) K/V cache, FlashAttention's
``flash_attn_with_kvcache`` calling convention (decoding and chunked prefill).

``flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, block_table=None,
softmax_scale=None, causal=False, return_lse=False, num_splits=0) -> (out, lse)``: q (B, Sq, H, D) dense;
sequence b's keys are the first ``cache_seqlens[b]`` positions of its cache, then (when given) the Sk_new rows
of ``k`` / ``v`` (B, Sk_new, Hk, D), which the op first writes into the cache at positions cache_seqlens[b] ..
+ Sk_new (in place, on the current stream; ``cache_seqlens`` itself is not changed, as in FlashAttention). Each sequence
gets ``softmax(softmax_scale * q k') v`` over its cache_seqlens[b] + Sk_new keys (GQA: Hk divides H);
``causal`` is aligned bottom-right (query i of Sq sees keys j <= i + Sk_b - Sq). A row that sees no key gets
O = 0 and LSE = +inf; ``lse`` is (B, H, Sq) fp32 (empty unless ``return_lse``). No rotary embedding.

The cache:
- paged: k_cache and v_cache (num_pages, page_size, Hk, D) with ``block_table`` (B, pages_per_seq) int32:
  sequence b's key j is row j % page_size of page block_table[b, j // page_size]; a sequence holds at most
  pages_per_seq * page_size keys. Every page_size >= 1 runs: TMA loads K/V tiles in chunks of gcd(keys a tile,
  page_size) rows, each inside a page, for the multiples of 16 on sm_90 (at head dims 192/256 the powers of two
  from 32) and the powers of two from 16 on sm_100 (vLLM's 16, FlashAttention's 256; but 16 with num_q 1 at head
  dim 64); the other sizes (1, 8, 24, 40, 100, 255, ...) are gathered row by row by the load warp
  (``AttentionConfig.page_gather``). Entries past the pages a sequence uses are never read (-1 is fine).
- not paged (no ``block_table``): k_cache and v_cache (B, Sk_max, Hk, D); it runs on the paged kernel with the
  cache's memory viewed as pages: the largest of ``CACHE_PAGES`` (256 ... 16) dividing Sk_max and the batch
  stride in rows, sequence b's pages from b * stride / page on (so the paged kernels of the common page sizes
  serve every Sk_max, slices of a longer cache included). Sk_max and the batch stride must be multiples of 16
  rows (pad the cache, or pass it paged).
- ``cache_seqlens``: int32 (B,) on q's device, a 0-d int32 CPU tensor (one length for every sequence; what
  ``fa4_mlir.torch.flash_attn_with_kvcache`` makes of an int: its value needs no device copy), or None (the
  whole cache: Sk_max, or pages_per_seq * page_size).

Before any launch or write the op checks every tensor's dtype, shape, device and layout, and the values a bad
one of which would be an illegal memory access: cache_seqlens >= 0, cache_seqlens + Sk_new within the
sequence's capacity, every block_table entry a sequence uses in [0, num_pages). Those values are read on the
host (``serving.host_values``: one device-to-host copy of cache_seqlens and the block table, a host
synchronization), skipped when the same tensors, unmodified, passed in the last call (``serving.Checked``),
so a checked call can be captured in a CUDA graph; a decode loop that bumps cache_seqlens in place each step
checks (and synchronizes) each step. ``torch.compile`` traces the op (the fake needs no values).

The kernel is ``paged_config``'s (``AttentionConfig.page_size``): bf16 or fp16, the head dims the paged kernel
has on the target (``paged_head_dims``); its ``seq_k`` is the capacity (a bound of every sequence's keys). On
sm_90a a decode call (Sq x group <= 128, the group a power of two in [2, 64]) packs the group's query heads into
one CTA's rows (``AttentionConfig.pack_gqa``): each K/V tile is read once per K/V head. A call whose grid
leaves SMs idle (a small batch's decode step) splits the keys into ranges over more CTAs and combines their
partials (``num_splits``, FlashAttention's argument: 0 the op chooses, 1 never; ``split_decode``). On
CPU tensors it runs in the PTX emulator when asked (``fa4_mlir.torch.emulated``).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import torch

from fa4_mlir import runtime
from fa4_mlir.configs.attention import MAX_GROUP, PAGE_MULTIPLE
from fa4_mlir.configs.attention_op import paged_config
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention import gqa_arguments, launch_geometry, paged_arguments
from fa4_mlir.torch.emulated import emulator, placement
from fa4_mlir.torch.serving import (Checked, Kernels, cache_arguments, check_gathered_caches, check_index_tensor,
                                   check_page_size, host_values, serving_head_dims)
from fa4_mlir.torch.split_decode import check_num_splits, launch_split, sms_of, split_count
from fa4_mlir.torch.tensors import (DTYPES, check_tma_operand, checked_scale, current_stream, fa4_dtype, host_array,
                                    require_tensors, tma_operand)

OP = "flash_attn_with_kvcache"
_lib = torch.library.Library("fa4", "FRAGMENT")
_lib.define("flash_attn_with_kvcache(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k=None, "
            "Tensor? v=None, Tensor? cache_seqlens=None, Tensor? block_table=None, float? softmax_scale=None, "
            "bool causal=False, bool return_lse=False, int num_splits=0) -> (Tensor, Tensor)")
# a dense kernel launched on a paged cache would read pages as sequences: the paged build takes block_table
_kernels = Kernels(OP, "block_table", "paged K/V cache")
# the config of a call's sizes, made once (an AttentionConfig's rules cost tens of microseconds a decode step)
_paged_config = functools.lru_cache(maxsize=1024)(paged_config)
_checked = Checked()


class Layout(NamedTuple):
    """A call's sizes, from shapes alone: q (batch, seq_q, heads, D), ``new`` keys to append, and the cache as
    ``num_pages`` pages of ``page_size`` keys, ``pages_per_seq`` a sequence (not paged: one page of Sk_max)."""

    batch: int
    seq_q: int
    heads: int
    kv_heads: int
    head_dim: int
    new: int
    paged: bool
    num_pages: int
    page_size: int
    pages_per_seq: int
    stride_pages: int = 0  # not paged: pages from one sequence's first to the next's (its batch stride)

    @property
    def capacity(self) -> int:
        """The most keys a sequence holds."""
        return self.pages_per_seq * self.page_size

    def capacity_text(self) -> str:
        if self.paged:
            return f"{self.capacity}: pages_per_seq {self.pages_per_seq} x page_size {self.page_size}"
        return f"{self.capacity}: k_cache's seqlen"


# a non-paged cache's page: the largest of these that divides its seqlen and batch stride (the paged kernels of
# the common page sizes serve it, whatever Sk_max is)
CACHE_PAGES = (256, 128, 64, 32, 16)


def _cache_page(k_cache: torch.Tensor) -> tuple[int, int]:
    """The page size a non-paged (B, Sk_max, Hk, D) cache runs with, and the pages between one sequence's first
    and the next's: the largest of ``CACHE_PAGES`` dividing Sk_max and the batch stride in rows (a slice of a
    longer cache has a larger one); (0, 0) when none does."""
    b, rows = k_cache.shape[:2]
    stride = rows if b == 1 else k_cache.stride(0) // k_cache.stride(1)
    if b > 1 and k_cache.stride(0) % k_cache.stride(1):
        return 0, 0
    size = next((p for p in CACHE_PAGES if rows % p == 0 and stride % p == 0), 0)
    return size, (stride // size if size else 0)


def _as_pages(cache: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The cache as (num_pages, page_size, Hk, D): a paged one as it is; a non-paged one's memory as pages of
    ``layout.page_size`` rows from its first element (sequence b's at page b * stride_pages)."""
    if layout.paged:
        return cache
    row = cache.stride(1)
    return cache.as_strided((layout.num_pages, layout.page_size, *cache.shape[2:]),
                            (layout.page_size * row, row, *cache.stride()[2:]))


_TABLES: dict[tuple, torch.Tensor] = {}  # a non-paged cache's block tables, by (device, batch, pages, stride)


def _contiguous_table(layout: Layout, device: torch.device) -> torch.Tensor:
    """A non-paged cache's block table: sequence b's pages b * stride_pages + 0 .. pages_per_seq - 1 (int32 on
    ``device``), made once per (device, shape): a decode loop would otherwise pay three small launches a step.
    Nothing writes it (the kernel and the append only read it)."""
    key = (device, layout.batch, layout.pages_per_seq, layout.stride_pages)
    table = _TABLES.get(key)
    if table is None:
        table = (torch.arange(layout.pages_per_seq, dtype=torch.int32, device=device)[None, :]
                 + layout.stride_pages * torch.arange(layout.batch, dtype=torch.int32, device=device)[:, None])
        # one made under CUDA graph capture lives in the graph's memory pool: it is not kept for later calls
        if device.type != "cuda" or not torch.cuda.is_current_stream_capturing():
            if len(_TABLES) >= 64:
                _TABLES.clear()
            _TABLES[key] = table
    return table


def _layout(q, k_cache, v_cache, k, v, cache_seqlens, block_table) -> Layout:
    """The call's ``Layout``, with every rule that needs no values checked (the fake runs these too)."""
    require_tensors(OP, {"q": q, "k_cache": k_cache, "v_cache": v_cache})
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v)):
        if t is not None and t.dim() != 4:
            raise LaunchError(f"{OP}: {name} must be 4-D (batch, seqlen, heads, head_dim), got shape {tuple(t.shape)}")
    b, sq, h, d = q.shape
    if tuple(k_cache.shape) != tuple(v_cache.shape):
        raise LaunchError(f"{OP}: k_cache and v_cache must have one shape, got {tuple(k_cache.shape)} and "
                          f"{tuple(v_cache.shape)}")
    rows, page, hk, dk = k_cache.shape
    if dk != d:
        raise LaunchError(f"{OP}: k_cache and v_cache head_dim must be q's ({d}), got shape {tuple(k_cache.shape)}")
    if hk < 1 or h % hk:
        raise LaunchError(f"{OP}: k_cache/v_cache heads must divide q heads ({h}), got {hk}")
    if h // hk > MAX_GROUP:
        raise LaunchError(f"{OP}: q heads / k_cache heads must be <= {MAX_GROUP}, got {h} / {hk} = {h // hk}")
    named = [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)] + [(n, t) for n, t in (("k", k), ("v", v))
                                                                      if t is not None]
    if len({t.dtype for _, t in named}) > 1:
        raise LaunchError(f"{OP}: {', '.join(n for n, _ in named)} must have one dtype, got "
                          f"{', '.join(str(t.dtype) for _, t in named)}")
    if (k is None) != (v is None):
        raise LaunchError(f"{OP}: k and v (the new keys and values) must be given together, got "
                          f"{'k' if v is None else 'v'} alone")
    new = 0
    if k is not None:
        want = (b, k.shape[1], hk, d)
        for name, t in (("k", k), ("v", v)):
            if tuple(t.shape) != want:
                raise LaunchError(f"{OP}: {name} must be (batch={b}, seqlen_new, heads_k={hk}, head_dim={d}), "
                                  f"{'' if name == 'k' else 'the shape of k '}got {tuple(t.shape)}")
        new = k.shape[1]
    if block_table is not None:
        check_index_tensor(OP, "block_table", block_table, 2, "(batch, pages_per_seq)")
        if block_table.shape[0] != b or block_table.shape[1] < 1:
            raise LaunchError(f"{OP}: block_table must be (batch={b}, pages_per_seq >= 1), got "
                              f"{tuple(block_table.shape)}")
        check_page_size(OP, "k_cache.shape[1]", page)
        if rows < 1:
            raise LaunchError(f"{OP}: k_cache must have >= 1 page, got shape {tuple(k_cache.shape)}")
        layout = Layout(b, sq, h, hk, d, new, True, rows, page, block_table.shape[1])
    else:
        if rows != b:
            raise LaunchError(f"{OP}: k_cache must be (batch={b}, seqlen_cache, heads_k, head_dim) without a "
                              f"block_table, got {tuple(k_cache.shape)}")
        size, stride = _cache_page(k_cache)
        if not size:
            raise LaunchError(f"{OP}: k_cache's seqlen and batch stride (in rows) must be multiples of "
                              f"{PAGE_MULTIPLE} without a block_table (the cache runs as pages of up to "
                              f"{CACHE_PAGES[0]} keys), got seqlen {page}, strides {tuple(k_cache.stride())}; pad the "
                              f"cache to {max(-(-page // PAGE_MULTIPLE), 1) * PAGE_MULTIPLE} keys or pass it paged")
        layout = Layout(b, sq, h, hk, d, new, False, (b - 1) * stride + page // size, size, page // size, stride)
    if cache_seqlens is not None:
        if cache_seqlens.dim() == 0:
            if cache_seqlens.dtype != torch.int32 or cache_seqlens.device.type not in ("cpu", "meta"):
                raise LaunchError(f"{OP}: a 0-d cache_seqlens (one length for all) must be an int32 CPU tensor, "
                                  f"got {cache_seqlens.dtype} on '{cache_seqlens.device}'; pass a Python int")
        else:
            check_index_tensor(OP, "cache_seqlens", cache_seqlens, 1, "(batch,)")
            if cache_seqlens.shape[0] != b:
                raise LaunchError(f"{OP}: cache_seqlens must have batch ({b}) elements, got {cache_seqlens.shape[0]}")
    return layout


def _check_seqlens(layout: Layout, seqlens: np.ndarray, given: str) -> np.ndarray:
    """Each sequence's key count after the append (int64 (B,)), with the rules of ``seqlens`` (the keys in
    the cache before it, ``given`` as "tensor", "int" or "none") checked: >= 0, and no more than the capacity
    with the new keys."""
    used = seqlens + layout.new
    if seqlens.size == 0 or (seqlens.min() >= 0 and used.max() <= layout.capacity):
        return used
    b = int(np.argmin(seqlens))
    if seqlens[b] < 0:
        got = f"cache_seqlens[{b}] = {int(seqlens[b])}" if given == "tensor" else int(seqlens[b])
        raise LaunchError(f"{OP}: cache_seqlens must be >= 0, got {got}")
    b = int(np.argmax(used))
    name = {"tensor": f"cache_seqlens[{b}]", "int": "cache_seqlens",
            "none": "cache_seqlens (None: the whole cache)"}[given]
    raise LaunchError(f"{OP}: {name} + the new keys ({layout.new}) must be <= sequence {b}'s capacity "
                      f"({layout.capacity_text()}), got {int(seqlens[b])} + {layout.new} = {int(used[b])}")


def _check_table(layout: Layout, table: np.ndarray, used: np.ndarray) -> None:
    """Every block_table entry a sequence uses (its first ceil(keys / page_size) pages) in [0, num_pages)."""
    pages = -(-used // layout.page_size)
    uses = np.arange(layout.pages_per_seq)[None, :] < pages[:, None]
    bad = uses & ((table < 0) | (table >= layout.num_pages))
    if not bad.any():
        return
    b, j = (int(x) for x in np.argwhere(bad)[0])
    raise LaunchError(f"{OP}: block_table[{b}, {j}] must be a page of the cache, in [0, {layout.num_pages}) "
                      f"(sequence {b} holds {int(used[b])} keys: its first {int(pages[b])} pages), got "
                      f"{int(table[b, j])}")


def _check_values(layout: Layout, cache_seqlens, block_table) -> int | None:
    """The value rules (``_check_seqlens``, ``_check_table``), reading on the host only the tensors that are
    not the last call's checked ones (``_checked``). Returns the one key count every sequence has after the
    append when the call says it without a tensor (an int or no ``cache_seqlens``), else None."""
    fixed = None
    if cache_seqlens is None:
        fixed = layout.capacity
    elif cache_seqlens.dim() == 0:
        fixed = int(cache_seqlens)
    if fixed is not None:
        used = _check_seqlens(layout, np.full(layout.batch, fixed, np.int64), "none" if cache_seqlens is None
                              else "int")
        if not layout.paged:
            return fixed + layout.new
    tensors = {name: t for name, t in (("cache_seqlens", None if fixed is not None else cache_seqlens),
                                       ("block_table", block_table if layout.paged else None)) if t is not None}
    metadata = (tensors.get("cache_seqlens"), tensors.get("block_table"))
    rest = (fixed, *layout)
    if not _checked.seen(metadata, rest):
        values = dict(zip(tensors, host_values(OP, tensors)))
        if fixed is None:
            used = _check_seqlens(layout, values["cache_seqlens"], "tensor")
        if layout.paged:
            _check_table(layout, values["block_table"], used)
        _checked.remember(metadata, rest)
    return None if fixed is None else fixed + layout.new


def append_to_cache(k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    starts: torch.Tensor, block_table: torch.Tensor) -> None:
    """Write ``k`` and ``v`` (B, Sk_new, Hk, D) into the caches (num_pages, page_size, Hk, D) in place, on the
    current stream: row i of sequence b at its key position p = starts[b] + i, i.e. row p % page_size of page
    block_table[b, p // page_size] (a non-paged (B, Sk_max, ...) cache: page b, ``block_table`` arange(B)[:,
    None]). ``starts`` (B,) and ``block_table`` are on the caches' device; the positions must be checked."""
    b, n = k.shape[:2]
    if b == 0 or n == 0:
        return
    page_size = k_cache.shape[1]
    pos = starts.to(torch.int64)[:, None] + torch.arange(n, device=k.device)[None, :]
    page = block_table.to(torch.int64).gather(1, pos // page_size)
    row = pos % page_size
    k_cache[page, row] = k
    v_cache[page, row] = v


def flash_attn_with_kvcache_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                               k: torch.Tensor | None = None, v: torch.Tensor | None = None,
                               cache_seqlens: torch.Tensor | None = None, block_table: torch.Tensor | None = None,
                               softmax_scale: float | None = None, causal: bool = False, return_lse: bool = False,
                               num_splits: int = 0):
    require_tensors(OP, {"q": q, "k_cache": k_cache, "v_cache": v_cache})
    tensors = {"q": q, "k_cache": k_cache, "v_cache": v_cache, "k": k, "v": v, "block_table": block_table,
               "cache_seqlens": None if cache_seqlens is not None and cache_seqlens.dim() == 0 else cache_seqlens}
    where = placement(OP, {n: t for n, t in tensors.items() if t is not None})
    dtype = fa4_dtype(q, f"{OP}: q", DTYPES)
    layout = _layout(q, k_cache, v_cache, k, v, cache_seqlens, block_table)
    target = where.target if isinstance(where, emulator) else runtime.device_target(where)
    dims = serving_head_dims(target, paged=True)
    if layout.head_dim not in dims:
        place = f"{target} in the emulator" if isinstance(where, emulator) else "this GPU"
        raise LaunchError(f"{OP}: head_dim must be one of {', '.join(map(str, dims))} on {place}, got "
                          f"{layout.head_dim}")
    scale = checked_scale(OP, softmax_scale, layout.head_dim)
    check_num_splits(OP, num_splits)
    for name in ("q", "k_cache", "v_cache"):
        check_tma_operand(OP, name, tensors[name])
    fixed = _check_values(layout, cache_seqlens, block_table)
    b, sq, h = layout.batch, layout.seq_q, layout.heads
    out = torch.empty((b, sq, h, layout.head_dim), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, h, sq) if return_lse else (0,), dtype=torch.float32, device=q.device)
    table = block_table if layout.paged else _contiguous_table(layout, q.device)
    k_cache, v_cache = _as_pages(k_cache, layout), _as_pages(v_cache, layout)
    starts = cache_seqlens if fixed is None else torch.full((b,), fixed - layout.new, dtype=torch.int32,
                                                             device=q.device)
    launch = out.numel() > 0 and fixed != 0
    if launch:  # everything that can refuse the call comes before the cache is written
        config = _paged_config(target, dtype, layout.head_dim, bool(causal), h // layout.kv_heads, layout.page_size,
                               layout.capacity, sq)
        splits = split_count(config, b, sq, h, layout.capacity, sms_of(where), num_splits)
        if splits > 1:
            config = _paged_config(target, dtype, layout.head_dim, bool(causal), h // layout.kv_heads,
                                   layout.page_size, layout.capacity, sq, True)
        kernel = (_kernels.checked(config, where.load("attention", config)) if isinstance(where, emulator)
                  else _kernels.get(where, config))
        grid = launch_geometry(config, b, sq, h, layout.capacity)
        check_gathered_caches(OP, config, k_cache, v_cache)
    if k is not None:
        append_to_cache(k_cache, v_cache, k, v, starts, table)
    if not launch:
        if fixed == 0:  # every row sees no key: O = 0, LSE = +inf, without a launch
            out.zero_()
            lse.fill_(math.inf)
        return out, lse
    seqused = starts + layout.new if layout.new else starts
    args = {"q": tma_operand(q, config.dtype), "k": tma_operand(k_cache, config.dtype),
            "v": tma_operand(v_cache, config.dtype), "o": tma_operand(out, config.dtype), "seq_q": sq,
            "seq_k": layout.capacity, "num_heads": h, **gqa_arguments(config, h, layout.kv_heads),
            "scale_log2e": scale * math.log2(math.e), "write_lse": int(return_lse)}
    if isinstance(where, emulator):
        args.update(paged_arguments(config, host_array(table), layout.pages_per_seq, host_array(seqused.contiguous()),
                                    layout.num_pages), **cache_arguments(config, k_cache, v_cache, True))
        if config.split_kv:
            launch_split(where, kernel, config, args, out, lse, return_lse, splits)
        else:
            where.run(kernel, grid, {**args, "lse": lse.detach().numpy() if return_lse else None})
        return out, lse
    seqused = seqused.contiguous()
    args.update(paged_arguments(config, table.data_ptr(), layout.pages_per_seq, seqused.data_ptr(),
                                layout.num_pages), **cache_arguments(config, k_cache, v_cache, False))
    if config.split_kv:
        launch_split(where, kernel, config, args, out, lse, return_lse, splits)
        return out, lse
    kernel.launch(grid, {**args, "lse": (lse if return_lse else out).data_ptr()}, stream=current_stream(where))
    return out, lse


def _flash_attn_with_kvcache_fake(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, block_table=None,
                                  softmax_scale=None, causal=False, return_lse=False, num_splits=0):
    fa4_dtype(q, f"{OP}: q", DTYPES)
    layout = _layout(q, k_cache, v_cache, k, v, cache_seqlens, block_table)
    b, sq, h = layout.batch, layout.seq_q, layout.heads
    return q.new_empty((b, sq, h, layout.head_dim)), q.new_empty((b, h, sq) if return_lse else (0,),
                                                                 dtype=torch.float32)


_lib.impl("flash_attn_with_kvcache", flash_attn_with_kvcache_op, "CompositeExplicitAutograd")
torch.library.register_fake("fa4::flash_attn_with_kvcache", _flash_attn_with_kvcache_fake, lib=_lib)


def flash_attn_with_kvcache(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                            k: torch.Tensor | None = None, v: torch.Tensor | None = None,
                            cache_seqlens: int | torch.Tensor | None = None, block_table: torch.Tensor | None = None,
                            softmax_scale: float | None = None, causal: bool = False,
                            return_softmax_lse: bool = False, num_splits: int = 0):
    """FlashAttention's ``flash_attn_with_kvcache`` (its argument names; see the module docstring; no rotary,
    no ``cache_batch_idx``): ``out`` (B, Sq, H, D), or ``(out, lse)`` with ``return_softmax_lse``, lse (B, H,
    Sq) fp32. ``cache_seqlens`` may be an int: one length for every sequence. ``num_splits``: key ranges of a
    split-KV decode (0: the op chooses, 1: no split; ``fa4_mlir.torch.split_decode``)."""
    if isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        if not 0 <= cache_seqlens < 2 ** 31:
            raise LaunchError(f"{OP}: cache_seqlens must be >= 0 (and < 2^31), got {cache_seqlens}")
        cache_seqlens = torch.tensor(cache_seqlens, dtype=torch.int32)
    out, lse = torch.ops.fa4.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, block_table,
                                                     softmax_scale, causal, return_softmax_lse, num_splits)
    return (out, lse) if return_softmax_lse else out
