"""The attention kernel's parameters, one ABI for both targets: the torch op and the runtime launch
either lowering with the same arguments, but for ``group``, which only the sm_90a kernel takes (it reads
the GQA group at launch, ``AttentionConfig.runtime_group``; the sm_100a kernel compiles it in)."""

from __future__ import annotations

import dataclasses

from fa4_mlir.kernels.source import Param, TensorMapSpec

CONFIG_FIELDS = ("dtype", "head_dim", "causal", "num_q", "group", "exp2_emulation", "token_scales")


def params(q_box: TensorMapSpec, kv_box: TensorMapSpec, o_box: TensorMapSpec,
           scale_boxes: tuple[TensorMapSpec, TensorMapSpec] | None = None, fp8: bool = False,
           v_box: TensorMapSpec | None = None, runtime_group: bool = False,
           persistent: bool = False, varlen: bool = False, paged: bool = False,
           split_kv: bool = False, gather: bool = False, schedule: bool = False) -> tuple[Param, ...]:
    """The kernel's parameters, in the order of its signature, with the target's TMA boxes. fp8
    kernels add ``v_scale`` (tensor-wise Q and K scales are folded into ``scale_log2e`` by the host);
    with per-token scales (``scale_boxes``: the q_scale and k_scale boxes) also the two scale maps.
    ``v_box`` (default ``kv_box``) marks a V given transposed: the sm_90a fp8 kernel's V^T
    [B, H / group, D + R, Sk'] with keys contiguous (Sk' = Sk rounded up to 16, keys permuted within each
    16 as ``fa4_mlir.torch.attention.v_transposed`` makes it; R = ``HopperTile.sum_rows`` rows of e4m3
    ones). ``runtime_group`` adds the i32 ``group``
    after ``num_heads``: the GQA group as a launch argument (sm_90a); ``persistent`` then the i32 ``batch``
    (the sm_90a tile walk: the grid no longer says it). ``varlen``: Q, K, V and O are packed sequences (one
    batch of total rows; ``seq_q`` / ``seq_k`` are the longest sequence's lengths, the LSE is (H, total_q)), and
    ``cu_seqlens_q``, ``cu_seqlens_k``, ``total_q`` and ``o_rows`` follow the other parameters. ``paged``: K and V
    are a paged cache (``kv_box`` holds one chunk of a page), and ``block_table``, ``pages_per_seq``, ``seqused_k``
    and ``num_pages`` come last (with ``varlen``, ``cu_seqlens_k`` is left out: ``seqused_k`` gives the keys).
    ``gather`` (paged, ``AttentionConfig.page_gather``, both targets): ``k`` and ``v`` are pointers to the caches,
    whose strides follow the paged parameters (``k_page_stride`` .. ``v_head_stride``: the load warp gathers each
    key's row). ``split_kv`` (paged, dense Q): ``o`` and ``lse`` are pointers to the fp32 partials of
    each key range, and ``num_splits`` and ``split_keys`` end the list (``fa4_mlir.kernels.attention.splitkv``).
    ``schedule`` (the packed kernels' compacted tile schedule, ``varlen_schedule``) adds the i32 ``batch`` after
    ``total_q``: the grid no longer says B."""
    fp8_params = (Param("v_scale", "f32", "V's dequantization scale (tensor-wise): O is multiplied by it"),) \
        if fp8 or scale_boxes else ()
    token_params = () if scale_boxes is None else (
        Param("q_scale", "tensormap", "per-token Q scales [B, H, Sq'] fp32 as dims (Sq', H, B), Sq' = Sq "
              "rounded up to 4", scale_boxes[0]),
        Param("k_scale", "tensormap", "per-token K scales [B, H / group, Sk'] fp32 as dims (Sk', H / group, B), "
              "Sk' = Sk rounded up to 4", scale_boxes[1]),
    )
    group_params = (Param("group", "i32", "query heads per K/V head, H / H_kv >= 1 (GQA): query head h reads "
                          "K/V head h / group"),) if runtime_group else ()
    group_params += (Param("batch", "i32", "batch size B (the persistent tile walk's)"),) if persistent else ()
    if varlen or paged:
        return _serving(params(q_box, kv_box, o_box, runtime_group=runtime_group), varlen, paged, split_kv, gather,
                        schedule)
    return (
        Param("q", "tensormap", "Q[B, Sq, H, D] as dims (D, H, Sq, B)", q_box),
        Param("k", "tensormap", "K[B, Sk, H / group, D] as dims (D, H / group, Sk, B)", kv_box),
        Param("v", "tensormap", "V[B, Sk, H / group, D] as dims (D, H / group, Sk, B)", kv_box) if v_box is None
        else Param("v", "tensormap", "V^T[B, H / group, D + R, Sk'] as dims (Sk', D + R, H / group, B), keys "
                   "permuted within each 16, R rows of ones (fp8 on sm_90a: HopperTile.sum_rows)", v_box),
        Param("o", "tensormap", "O[B, Sq, H, D] as dims (D, H, Sq, B)", o_box),
        Param("lse", "ptr", "LSE[B, H, Sq] fp32 (written when write_lse != 0)"),
        Param("seq_q", "i32", "query positions Sq"),
        Param("seq_k", "i32", "key positions Sk, >= 1"),
        Param("num_heads", "i32", "query heads H"),
    ) + group_params + (
        Param("scale_log2e", "f32", "softmax scale * log2(e)"),
        Param("write_lse", "i32", "1: write the LSE"),
    ) + fp8_params + token_params


# the docs of the parameters whose meaning changes in the packed (varlen) and the paged kernels
_VARLEN_DOCS = {
    "q": "Q[total_q, H, D] (packed sequences) as dims (D, H, total_q, 1)",
    "k": "K[total_k, H / group, D] (packed sequences) as dims (D, H / group, total_k, 1)",
    "v": "V[total_k, H / group, D] (packed sequences) as dims (D, H / group, total_k, 1)",
    "o": "O[total_q, H, D] (packed sequences) as dims (D, H, total_q, 1): the query tiles inside their sequence",
    "lse": "LSE[H, total_q] fp32 (written when write_lse != 0)",
    "seq_q": "the longest sequence's query positions, max_seqlen_q (the grid's query tiles cover it)",
    "seq_k": "the longest sequence's key positions, max_seqlen_k",
}
_PAGED_DOCS = {
    "k": "the K cache [num_pages, page_size, H / group, D] as dims (D, H / group, page_size, num_pages)",
    "v": "the V cache [num_pages, page_size, H / group, D] as dims (D, H / group, page_size, num_pages)",
    "seq_k": "the longest sequence's key count, max(seqused_k)",
}
_VARLEN_PARAMS = (
    Param("cu_seqlens_q", "ptr", "int32[B + 1]: sequence b's queries are rows [cu_seqlens_q[b], cu_seqlens_q[b + 1])"),
    Param("cu_seqlens_k", "ptr", "int32[B + 1]: sequence b's keys are rows [cu_seqlens_k[b], cu_seqlens_k[b + 1])"),
    Param("total_q", "i32", "query rows of all sequences, cu_seqlens_q[B] (the LSE's row length)"),
    Param("o_rows", "ptr", "O[total_q, H, D] (the o map's tensor): the rows of a tile that ends past its sequence "
          "are stored through it (a TMA store would write into the next sequence)"),
)
# the compacted schedule: the grid's x counts tile slots, so seq_q does not size the grid, and B is a parameter
_SCHEDULE_DOCS = {"seq_q": "the longest sequence's query positions, max_seqlen_q (no sequence may have more): "
                           "where total_q = B x seq_q, every sequence has seq_q and the schedule finds a slot's "
                           "tile without its scan (sm_90a: head dims up to 128)"}
_BATCH = Param("batch", "i32", "sequences B (cu_seqlens_q has B + 1 elements): the tile schedule scans their "
               "query tile counts")
_PAGED_PARAMS = (
    Param("block_table", "ptr", "int32[B, pages_per_seq]: sequence b's key j is in row j % page_size of page "
          "block_table[b, j / page_size]"),
    Param("pages_per_seq", "i32", "block_table's row length"),
    Param("seqused_k", "ptr", "int32[B]: sequence b's key count (its pages hold at least that many)"),
    Param("num_pages", "i32", "pages of the K/V cache (a debug build traps a block_table entry outside [0, "
          "num_pages))"),
)


_GATHER_CACHES = {
    "k": Param("k", "ptr", "the K cache [num_pages, page_size, H / group, D] (its strides: k_page_stride, "
               "k_row_stride, k_head_stride; unit innermost stride)"),
    "v": Param("v", "ptr", "the V cache [num_pages, page_size, H / group, D] (its strides: v_page_stride, "
               "v_row_stride, v_head_stride; unit innermost stride)"),
}
_GATHER_PARAMS = tuple(
    Param(f"{t}_{dim}_stride", "i32", f"16-byte pieces from one {dim} of the {t.upper()} cache to the next (its "
          f"stride in elements / 8; the load warp addresses pieces with 32-bit offsets: the cache spans < 64 GiB)")
    for t in ("k", "v") for dim in ("page", "row", "head"))


_SPLIT_OUTPUTS = {
    "o": Param("o", "ptr", "O partials [B, Sq, H, num_splits, D] fp32: each row normalised over its range's keys "
               "(0 where the row sees none)"),
    "lse": Param("lse", "ptr", "LSE partials [B, H, Sq, num_splits] fp32, natural log over the range's keys (-inf "
                 "where the row sees none); always written"),
    "write_lse": Param("write_lse", "i32", "ignored: the partial LSEs are always written"),
}
_SPLIT_PARAMS = (
    Param("num_splits", "i32", "key ranges a sequence's keys are cut into (grid x = query tiles x num_splits, "
          "split-minor)"),
    Param("split_keys", "i32", "keys of a range, a multiple of the keys a K/V tile; range s holds keys "
          "[s * split_keys, (s + 1) * split_keys)"),
)


def _serving(dense: tuple[Param, ...], varlen: bool, paged: bool, split_kv: bool = False,
             gather: bool = False, schedule: bool = False) -> tuple[Param, ...]:
    """The dense parameters with the packed and/or paged kernel's docs, then their added parameters; with
    ``split_kv`` O and the LSE become the ranges' fp32 partials; with ``gather`` K and V pointers and their
    strides; with ``schedule`` ``batch`` follows ``total_q``."""
    docs = {**(_VARLEN_DOCS if varlen else {}), **(_PAGED_DOCS if paged else {}),
            **(_SCHEDULE_DOCS if schedule else {})}
    added = tuple(p for p in _VARLEN_PARAMS if not (paged and p.name == "cu_seqlens_k")) if varlen else ()
    if schedule:
        at = [p.name for p in added].index("total_q") + 1
        added = added[:at] + (_BATCH,) + added[at:]
    out = tuple(dataclasses.replace(p, doc=docs.get(p.name, p.doc)) for p in dense)
    if split_kv:
        out = tuple(_SPLIT_OUTPUTS.get(p.name, p) for p in out)
    if gather:
        out = tuple(_GATHER_CACHES.get(p.name, p) for p in out)
    return (out + added + (_PAGED_PARAMS if paged else ()) + (_GATHER_PARAMS if gather else ())
            + (_SPLIT_PARAMS if split_kv else ()))


def declare(kernel, q_box: TensorMapSpec, kv_box: TensorMapSpec, o_box: TensorMapSpec,
            scale_boxes: tuple[TensorMapSpec, TensorMapSpec] | None = None, fp8: bool = False,
            v_box: TensorMapSpec | None = None, runtime_group: bool = False, persistent: bool = False,
            varlen: bool = False, paged: bool = False, split_kv: bool = False, gather: bool = False,
            schedule: bool = False) -> None:
    """Declare the parameters on a ``fa4_mlir.dsl.Kernel`` (the same names, kinds, docs and boxes as
    ``params``): the kernel function's signature and the manifest's ABI come from this one list."""
    kernel.declare_params(params(q_box, kv_box, o_box, scale_boxes, fp8, v_box, runtime_group, persistent, varlen,
                                  paged, split_kv, gather, schedule))
