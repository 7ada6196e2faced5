"""``torch.ops.fa4.flash_attn_varlen``: attention over packed variable-length sequences, FlashAttention's
``flash_attn_varlen_func`` calling convention.

``flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
causal=False, return_lse=False) -> (out, lse)``: q (total_q, H, D) and k, v (total_k, Hk, D) hold B
sequences back to back, without padding; sequence b's queries are rows [cu_seqlens_q[b], cu_seqlens_q[b + 1])
and its keys rows [cu_seqlens_k[b], cu_seqlens_k[b + 1]) (int32 prefix sums of B + 1 elements, starting at 0).
Each sequence gets ``softmax(softmax_scale * q k') v`` over its own keys (GQA as ``flash_attention``: Hk
divides H); ``causal`` is aligned bottom-right per sequence, as FlashAttention defines it: query i of Sq sees
keys j <= i + Sk - Sq. A row that sees no key (Sk = 0, or causal with Sq > Sk) gets O = 0 and, with
``return_lse``, LSE = +inf (FlashAttention's convention); the LSE is (H, total_q) fp32. ``max_seqlen_q`` and
``max_seqlen_k`` bound the sequences' lengths, and the op refuses a bound below a real length
(FlashAttention's contract); the kernel's grid is ``varlen_geometry``'s compacted schedule over every
sequence's query tiles, which needs only total_q and B.

The metadata is checked before any launch (``_check_values``): dtype int32, 1-D, contiguous, on q's
device, B + 1 elements each with B >= 1, starting at 0, non-decreasing, ending at q's and k's rows, and the
maxima. The values are read on the host: on a GPU the op copies both prefix sums to the host in one small
device-to-host copy, which waits for the current stream (a host synchronization), skipped when the same two
tensors, unmodified, passed the checks in the last call (``serving.Checked``: a model's layers share one batch's
metadata). Hence a CUDA graph captures the op only after an eager call with the same metadata tensors
(otherwise it says so); ``torch.compile`` traces it (the fake implementation needs no values). No fast path
yet.

bf16 or fp16; the head dims ``AttentionConfig(varlen=True)`` allows on the target (``varlen_head_dims``). Each of
q, k, v must satisfy TMA's rules (unit innermost stride, 16-byte strides and start); the output is a new
contiguous tensor; no autograd. On CPU tensors it runs the kernel in the PTX emulator when asked
(``fa4_mlir.torch.emulated``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from fa4_mlir import runtime
from fa4_mlir.configs.attention import MAX_GROUP, AttentionConfig
from fa4_mlir.configs.attention_op import varlen_config
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.attention import gqa_arguments, paged_arguments, varlen_arguments, varlen_geometry
from fa4_mlir.torch.emulated import emulator, placement
from fa4_mlir.torch.serving import (Checked, Kernels, cache_arguments, check_bound, check_gathered_caches,
                                    check_index_tensor, check_page_size, host_values, serving_head_dims)
from fa4_mlir.torch.tensors import (DTYPES, check_tma_operand, checked_scale, current_stream, fa4_dtype, host_array,
                                    require_tensors, tma_operand)

OP = "flash_attn_varlen"
_lib = torch.library.Library("fa4", "FRAGMENT")
_lib.define("flash_attn_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
            "int max_seqlen_q, int max_seqlen_k, float? softmax_scale=None, bool causal=False, "
            "bool return_lse=False, Tensor? block_table=None) -> (Tensor, Tensor)")
# a dense kernel launched on packed tensors would read the wrong rows: the packed build takes cu_seqlens_q
_kernels = Kernels(OP, "cu_seqlens_q", "packed-sequence")
# the config of a call's sizes, made once (an AttentionConfig's rules cost tens of microseconds a call)
_varlen_config = functools.lru_cache(maxsize=1024)(varlen_config)


def _shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            paged: bool = False) -> tuple[int, int, int, int, int]:
    """(total_q, total_k, H, Hk, D), with the shape rules checked; ``paged`` (a block_table): k and v are
    caches (num_pages, page_size, Hk, D), and total_k is their rows."""
    require_tensors(OP, {"q": q, "k": k, "v": v})
    for name, t in (("q", q), ("k", k), ("v", v)):
        if paged and name != "q" and t.dim() != 4:
            raise LaunchError(f"{OP}: {name} must be 4-D (num_pages, page_size, heads_k, head_dim) with a "
                              f"block_table, got shape {tuple(t.shape)}")
        if t.dim() != 3 and not (paged and name != "q"):
            raise LaunchError(f"{OP}: {name} must be 3-D (total_rows, heads, head_dim), got shape {tuple(t.shape)}")
    total_q, h, d = q.shape
    if tuple(k.shape) != tuple(v.shape):
        raise LaunchError(f"{OP}: k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    *rows, hk, dk = k.shape
    total_k = math.prod(rows)
    if dk != d:
        raise LaunchError(f"{OP}: k and v must be ({'num_pages, page_size' if paged else 'total_k'}, heads_k, "
                          f"head_dim={d}) like q, got {tuple(k.shape)}")
    if hk < 1 or h % hk:
        raise LaunchError(f"{OP}: k/v heads must divide q heads ({h}), got {hk}")
    if h // hk > MAX_GROUP:
        raise LaunchError(f"{OP}: q heads / k heads must be <= {MAX_GROUP}, got {h} / {hk} = {h // hk}")
    if not (q.dtype == k.dtype == v.dtype):
        raise LaunchError(f"{OP}: q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    return total_q, total_k, h, hk, d


def _check_metadata(cu_q: torch.Tensor, cu_k: torch.Tensor) -> int:
    """B, with the rules that need no values checked: int32, 1-D, contiguous, B + 1 >= 2 elements each."""
    for name, t in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
        check_index_tensor(OP, name, t, 1, "(batch + 1 prefix sums)")
        if t.shape[0] < 2:
            raise LaunchError(f"{OP}: {name} must have batch + 1 >= 2 elements (0, then the running sums of the "
                              f"lengths), got {t.shape[0]}")
    if cu_q.shape[0] != cu_k.shape[0]:
        raise LaunchError(f"{OP}: cu_seqlens_q and cu_seqlens_k must have one length (batch + 1), got "
                          f"{cu_q.shape[0]} and {cu_k.shape[0]}")
    return cu_q.shape[0] - 1


_checked = Checked()


def _check_values(cu: np.ndarray, name: str, rows: int, what: str, bound: int, bound_name: str) -> None:
    """The rules of prefix sums ``cu`` (host int32): 0 first, non-decreasing, ``rows`` last, no length above
    ``bound``. The common case costs a subtraction and two reductions (a few microseconds; ``np.diff`` alone
    costs 2); the messages are worked out only for a broken rule."""
    lengths = cu[1:] - cu[:-1]
    if cu[0] == 0 and cu[-1] == rows and lengths.min() >= 0 and lengths.max() <= bound:
        return
    if cu[0] != 0:
        raise LaunchError(f"{OP}: {name}[0] must be 0, got {int(cu[0])}")
    if (lengths < 0).any():
        b = int(np.argmax(lengths < 0))
        raise LaunchError(f"{OP}: {name} must be non-decreasing, got {name}[{b + 1}] = {int(cu[b + 1])} < "
                          f"{name}[{b}] = {int(cu[b])}")
    if cu[-1] != rows:
        raise LaunchError(f"{OP}: {name}[-1] must be the rows of {what} ({rows}), got {int(cu[-1])}")
    b = int(np.argmax(lengths))
    raise LaunchError(f"{OP}: {bound_name} must be >= every sequence's length ({int(lengths[b])}, sequence {b}), "
                      f"got {bound}; it bounds every length (FlashAttention's contract): pass the longest length")


def _check_pages(table: torch.Tensor, k: torch.Tensor, batch: int) -> tuple[int, int, int]:
    """(page_size, pages_per_seq, num_pages) of a paged call, with the rules that need no values checked (every
    page_size >= 1 runs on both targets: ``AttentionConfig.page_gather``)."""
    check_index_tensor(OP, "block_table", table, 2, "(batch, pages_per_seq)")
    if table.shape[0] != batch or table.shape[1] < 1:
        raise LaunchError(f"{OP}: block_table must be (batch={batch}, pages_per_seq >= 1), got {tuple(table.shape)}")
    num_pages, page = k.shape[:2]
    check_page_size(OP, "k.shape[1]", page)
    if num_pages < 1:
        raise LaunchError(f"{OP}: k must have >= 1 page, got shape {tuple(k.shape)}")
    return page, table.shape[1], num_pages


def _check_table(table: np.ndarray, lengths: np.ndarray, page: int, num_pages: int) -> None:
    """Every block_table entry a sequence uses (its first ceil(keys / page_size) pages) in [0, num_pages)."""
    pages = -(-lengths // page)
    bad = (np.arange(table.shape[1])[None, :] < pages[:, None]) & ((table < 0) | (table >= num_pages))
    if bad.any():
        b, j = (int(x) for x in np.argwhere(bad)[0])
        raise LaunchError(f"{OP}: block_table[{b}, {j}] must be a page of k and v, in [0, {num_pages}) (sequence {b} "
                          f"holds {int(lengths[b])} keys: its first {int(pages[b])} pages), got {int(table[b, j])}")


def flash_attn_varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                         cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
                         softmax_scale: float | None = None, causal: bool = False, return_lse: bool = False,
                         block_table: torch.Tensor | None = None):
    require_tensors(OP, {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k})
    paged = block_table is not None
    where = placement(OP, {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k,
                           **({"block_table": block_table} if paged else {})})
    dtype = fa4_dtype(q, f"{OP}: q", DTYPES)
    total_q, total_k, h, hk, d = _shapes(q, k, v, paged)
    target = where.target if isinstance(where, emulator) else runtime.device_target(where)
    dims = serving_head_dims(target, paged=paged)
    if d not in dims:
        place = f"{target} in the emulator" if isinstance(where, emulator) else "this GPU"
        raise LaunchError(f"{OP}: head_dim must be one of {', '.join(map(str, dims))} on {place}, got {d}")
    batch = _check_metadata(cu_seqlens_q, cu_seqlens_k)
    page, per_seq, num_pages = _check_pages(block_table, k, batch) if paged else (0, 0, 0)
    max_q, max_k = check_bound(OP, "max_seqlen_q", max_seqlen_q), check_bound(OP, "max_seqlen_k", max_seqlen_k)
    scale = checked_scale(OP, softmax_scale, d)
    if paged and max_k > per_seq * page:
        raise LaunchError(f"{OP}: max_seqlen_k must be <= a sequence's capacity with a block_table (pages_per_seq "
                          f"{per_seq} x page_size {page} = {per_seq * page}), got {max_k}")
    bounds = (total_q, total_k, max_q, max_k, page, per_seq)
    metadata = (cu_seqlens_q, cu_seqlens_k, block_table)
    if not _checked.seen(metadata, bounds):
        named = {"cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k, **({"block_table": block_table}
                                                                                if paged else {})}
        values = host_values(OP, named)
        cu_q, cu_k = values[:2]
        _check_values(cu_q, "cu_seqlens_q", total_q, "q", max_q, "max_seqlen_q")
        # paged: k's rows are the cache's, not the keys'; the last sum is the keys of all sequences
        _check_values(cu_k, "cu_seqlens_k", int(cu_k[-1]) if paged else total_k, "k", max_k, "max_seqlen_k")
        if paged:
            _check_table(values[2], cu_k[1:].astype(np.int64) - cu_k[:-1], page, num_pages)
        _checked.remember(metadata, bounds)
    out = torch.empty((total_q, h, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((h, total_q) if return_lse else (0,), dtype=torch.float32, device=q.device)
    if total_q == 0:
        return out, lse
    if total_k == 0 or max_k == 0:  # every row sees no key: O = 0, LSE = +inf (FlashAttention's), without a launch
        out.zero_()
        lse.fill_(math.inf)
        return out, lse
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tma_operand(OP, name, t)
    config = _varlen_config(target, dtype, d, bool(causal), h // hk, max_k, page)
    if paged:
        return _paged(where, config, q, k, v, out, lse, return_lse, scale, batch, max_q, max_k, cu_seqlens_q,
                      cu_seqlens_k, block_table)
    if isinstance(where, emulator):
        kernel = _kernels.checked(config, where.load("attention", config))
        grid, args = _arguments(config, q, k, v, out, lse if return_lse else None, scale, batch, max_q, max_k,
                                cu_seqlens_q.numpy(), cu_seqlens_k.numpy(), host_array(out))
        where.run(kernel, grid, {**args, "lse": lse.detach().numpy() if return_lse else None})
        return out, lse
    kernel = _kernels.get(where, config)
    grid, args = _arguments(config, q, k, v, out, lse if return_lse else None, scale, batch, max_q, max_k,
                            cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr(), out.data_ptr())
    kernel.launch(grid, {**args, "lse": (lse if return_lse else out).data_ptr()}, stream=current_stream(where))
    return out, lse


def _arguments(config: AttentionConfig, q, k, v, out, lse, scale: float, batch: int, max_q: int, max_k: int, cu_q,
               cu_k, o_rows) -> tuple[tuple[int, int, int], dict]:
    """The grid and the kernel's arguments but ``lse``, as ``fa4_emu.launch_varlen_attention`` passes them:
    the packed tensors as (1, total, heads, D) maps, the bounds as ``seq_q`` / ``seq_k``, the prefix sums and
    ``o_rows`` (O's memory: device addresses, or NumPy arrays on the emulator)."""
    total_q, h, _ = q.shape
    grid = varlen_geometry(config, batch, total_q, max_q, h, max_k)
    args = {"q": tma_operand(q.unsqueeze(0), config.dtype), "k": tma_operand(k.unsqueeze(0), config.dtype),
            "v": tma_operand(v.unsqueeze(0), config.dtype), "o": tma_operand(out.unsqueeze(0), config.dtype),
            "seq_q": max_q, "seq_k": max_k, "num_heads": h, **gqa_arguments(config, h, k.shape[1]),
            "scale_log2e": scale * math.log2(math.e), "write_lse": int(lse is not None),
            **varlen_arguments(config, cu_q, cu_k, total_q, o_rows, batch)}
    return grid, args


def _paged(where, config: AttentionConfig, q, k, v, out, lse, return_lse: bool, scale: float, batch: int,
           max_q: int, max_k: int, cu_q: torch.Tensor, cu_k: torch.Tensor, table: torch.Tensor):
    """The packed queries over a paged K/V cache (``config.page_size``): sequence b's keys are its
    cu_seqlens_k[b + 1] - cu_seqlens_k[b] first positions in its pages (the kernel's ``seqused_k``)."""
    total_q, h, _ = q.shape
    grid = varlen_geometry(config, batch, total_q, max_q, h, max_k)
    check_gathered_caches(OP, config, k, v)
    args = {"q": tma_operand(q.unsqueeze(0), config.dtype), "k": tma_operand(k, config.dtype),
            "v": tma_operand(v, config.dtype), "o": tma_operand(out.unsqueeze(0), config.dtype),
            "seq_q": max_q, "seq_k": max_k, "num_heads": h, **gqa_arguments(config, h, k.shape[2]),
            "scale_log2e": scale * math.log2(math.e), "write_lse": int(return_lse)}
    used = (cu_k[1:] - cu_k[:-1]).to(torch.int32)  # the keys of each sequence (a new contiguous tensor)
    if isinstance(where, emulator):
        kernel = _kernels.checked(config, where.load("attention", config))
        args.update(varlen_arguments(config, cu_q.numpy(), None, total_q, host_array(out), batch),
                    **paged_arguments(config, table.numpy(), table.shape[1], used.numpy(), k.shape[0]),
                    **cache_arguments(config, k, v, True))
        where.run(kernel, grid, {**args, "lse": lse.detach().numpy() if return_lse else None})
        return out, lse
    kernel = _kernels.get(where, config)
    args.update(varlen_arguments(config, cu_q.data_ptr(), None, total_q, out.data_ptr(), batch),
                **paged_arguments(config, table.data_ptr(), table.shape[1], used.data_ptr(), k.shape[0]),
                **cache_arguments(config, k, v, False))
    kernel.launch(grid, {**args, "lse": (lse if return_lse else out).data_ptr()}, stream=current_stream(where))
    return out, lse


def _flash_attn_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                            causal=False, return_lse=False, block_table=None):
    fa4_dtype(q, f"{OP}: q", DTYPES)
    total_q, _, h, _, d = _shapes(q, k, v, block_table is not None)
    _check_metadata(cu_seqlens_q, cu_seqlens_k)
    return q.new_empty((total_q, h, d)), q.new_empty((h, total_q) if return_lse else (0,), dtype=torch.float32)


_lib.impl("flash_attn_varlen", flash_attn_varlen_op, "CompositeExplicitAutograd")
torch.library.register_fake("fa4::flash_attn_varlen", _flash_attn_varlen_fake, lib=_lib)


def flash_attn_varlen_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                           cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
                           softmax_scale: float | None = None, causal: bool = False, return_softmax_lse: bool = False,
                           block_table: torch.Tensor | None = None):
    """FlashAttention's ``flash_attn_varlen_func`` (its argument names; see the module docstring): ``out``
    (total_q, H, D), or ``(out, lse)`` with ``return_softmax_lse``, lse (H, total_q) fp32; with ``block_table``
    k and v are a paged cache (num_pages, page_size, Hk, D)."""
    out, lse = torch.ops.fa4.flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                               softmax_scale, causal, return_softmax_lse, block_table)
    return (out, lse) if return_softmax_lse else out
