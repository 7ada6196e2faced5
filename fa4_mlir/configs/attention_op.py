"""What the torch op chooses for a call besides the call's own (target, dtype, head dim, mask, group, scales): the
sm_90a tile (``num_q``, ``block_n``) and persistent walk by key count, one K/V loop, the exponentials, and the
serving kernels' configs (packed sequences, paged caches). The tables are ``attention``'s (``SM90_NUM_Q`` ..
``SM90_FP8_EXP2_F16X2``), read at call time; the benchmarks' sweeps chose their values (docs/PERF.md). No MLIR
import."""

from __future__ import annotations

from fa4_mlir.configs import attention  # its SM90_* choice tables, read at call time (tests patch them)
from fa4_mlir.configs.attention import (HEAD_DIMS, PAGE_MULTIPLE, SM90_PACK_GQA_MAX, SM90_PACK_GQA_ROWS,
                                        SM90_SHORT_KEYS, AttentionConfig)
from fa4_mlir.errors import ConfigError


def default_num_q(target: str, dtype: str, head_dim: int, causal: bool) -> int:
    """The ``num_q`` the torch op (and the artifacts built for it) use: sm_90a takes ``SM90_NUM_Q`` of the
    (dtype, head dim, causal), else 2."""
    return attention.SM90_NUM_Q.get((dtype, head_dim, bool(causal)), 2) if target == "sm_90a" else 2


def default_tile(target: str, dtype: str, head_dim: int, causal: bool, seq_k: int,
                 persistent: bool = False) -> tuple[int, int]:
    """The (``num_q``, ``block_n``) the torch op uses for ``seq_k`` keys: in the persistent walk
    ``SM90_WALK_SHORT_TILE``'s first step that holds them; ``SM90_SHORT_TILE`` up to ``short_keys`` keys where it
    has the (dtype, head dim, causal), else ``default_num_q`` and the head dim's default keys (0)."""
    steps = attention.SM90_WALK_SHORT_TILE.get((dtype, head_dim, bool(causal)), ()) if persistent else ()
    for most, tile in steps if target == "sm_90a" else ():
        if seq_k <= most:
            return tile
    if target == "sm_90a" and seq_k <= short_keys(dtype, head_dim, causal):
        short = attention.SM90_SHORT_TILE.get((dtype, head_dim, bool(causal)))
        if short is not None:
            return short
    return default_num_q(target, dtype, head_dim, causal), 0


def op_fields(target: str, dtype: str, head_dim: int, causal: bool, seq_k: int) -> dict:
    """The ``AttentionConfig`` fields the torch op chooses for ``seq_k`` keys besides the call's own (target,
    dtype, head dim, mask, group, scales): the persistent walk (``default_persistent``), the tile
    (``default_tile``), one K/V loop in the walks of ``SM90_WALK_SINGLE_LOOP``, one consumer role
    (``default_one_role``) and the exp2 emulation."""
    persistent = default_persistent(target, dtype, head_dim, causal, seq_k)
    num_q, block_n = default_tile(target, dtype, head_dim, causal, seq_k, persistent)
    return dict(num_q=num_q, block_n=block_n, persistent=persistent,
                single_kv_loop=persistent and (dtype, head_dim, bool(causal)) in attention.SM90_WALK_SINGLE_LOOP,
                one_consumer_role=default_one_role(target, head_dim, causal, seq_k, persistent),
                **default_exp2(target, dtype, head_dim))


def default_one_role(target: str, head_dim: int, causal: bool, seq_k: int, persistent: bool = False) -> bool:
    """Whether the torch op's one-tile kernel for ``seq_k`` keys runs its consumer warpgroups as one role
    (``AttentionConfig.one_consumer_role``): sm_90a from ``SM90_ONE_CONSUMER_ROLE_KEYS`` keys of the (head dim,
    causal) on."""
    least = attention.SM90_ONE_CONSUMER_ROLE_KEYS.get((head_dim, bool(causal)))
    return target == "sm_90a" and not persistent and least is not None and seq_k >= least


def default_persistent(target: str, dtype: str, head_dim: int, causal: bool, seq_k: int) -> bool:
    """Whether the torch op takes the persistent tile walk for ``seq_k`` keys (``SM90_PERSISTENT_KEYS``)."""
    return target == "sm_90a" and seq_k <= attention.SM90_PERSISTENT_KEYS.get((dtype, head_dim, bool(causal)), 0)


def short_keys(dtype: str, head_dim: int, causal: bool) -> int:
    """The most keys for which the sm_90a op takes ``SM90_SHORT_TILE``'s tile (``SM90_SHORT_TILE_KEYS``, else
    ``SM90_SHORT_KEYS``)."""
    return attention.SM90_SHORT_TILE_KEYS.get((dtype, head_dim, bool(causal)), SM90_SHORT_KEYS)


def default_exp2(target: str, dtype: str, head_dim: int) -> dict:
    """The ``exp2_emulation`` and ``exp2_f16x2`` the torch op (and the artifacts built for it) use: sm_90a fp8
    takes ``SM90_FP8_EXP2_EMULATION`` of the head dim, in the packed form at ``SM90_FP8_EXP2_F16X2``'s; every
    other kernel none (all exponentials ``ex2.approx``)."""
    count = attention.SM90_FP8_EXP2_EMULATION.get(head_dim, 0) if target == "sm_90a" and dtype == "fp8_e4m3" else 0
    return dict(exp2_emulation=count, exp2_f16x2=bool(count) and head_dim in attention.SM90_FP8_EXP2_F16X2)


def _head_dims_with(target: str, **fields) -> tuple[int, ...]:
    """The 16-bit head dims of ``target`` that ``AttentionConfig(**fields)`` accepts."""
    def allowed(d: int) -> bool:
        try:
            AttentionConfig(target=target, head_dim=d, **fields)
        except ConfigError:
            return False
        return True
    return tuple(d for d in HEAD_DIMS[target] if allowed(d))


def varlen_head_dims(target: str) -> tuple[int, ...]:
    """The head dims of the packed (``varlen``) kernel on ``target``: those ``AttentionConfig(varlen=True)``
    accepts (16-bit)."""
    return _head_dims_with(target, varlen=True)


def paged_head_dims(target: str) -> tuple[int, ...]:
    """The head dims of the paged K/V cache kernel on ``target``: those ``AttentionConfig(page_size=...)``
    accepts (16-bit) with pages of 64 keys (every head dim takes 64; 16 spills at some)."""
    return _head_dims_with(target, page_size=4 * PAGE_MULTIPLE)


def varlen_config(target: str, dtype: str, head_dim: int, causal: bool, group: int,
                  max_seqlen_k: int, page_size: int = 0) -> AttentionConfig:
    """The packed kernel ``torch.ops.fa4.flash_attn_varlen`` runs (and test/gpu/build_artifacts.py builds): the
    dense op's tile for ``max_seqlen_k`` keys (``default_tile``) where the varlen rules allow it, else the head
    dim's default tile (num_q 2); ``page_size``: over a paged K/V cache (the op's ``block_table``)."""
    num_q, block_n = default_tile(target, dtype, head_dim, causal, max_seqlen_k)
    fields = dict(target=target, dtype=dtype, head_dim=head_dim, causal=causal, group=group, varlen=True,
                  **default_exp2(target, dtype, head_dim), page_size=page_size)
    try:
        return AttentionConfig(**fields, num_q=num_q, block_n=block_n)
    except ConfigError:
        return AttentionConfig(**fields, num_q=2)


def packs_gqa(target: str, group: int, seq_q: int) -> bool:
    """Whether the paged kernel packs the group's heads into the CTA's rows (``AttentionConfig.pack_gqa``): on
    sm_90a when ``seq_q`` positions of ``group`` heads fit the 128 rows (decode) and the group is a power of
    two in [2, 64] (the packs a warpgroup's 64 rows hold)."""
    return (target == "sm_90a" and 2 <= group <= SM90_PACK_GQA_MAX and SM90_PACK_GQA_MAX % group == 0
            and 1 <= seq_q * group <= SM90_PACK_GQA_ROWS)


def paged_config(target: str, dtype: str, head_dim: int, causal: bool, group: int, page_size: int,
                 capacity: int, seq_q: int, split_kv: bool = False) -> AttentionConfig:
    """The paged K/V cache kernel ``torch.ops.fa4.flash_attn_with_kvcache`` runs (and test/gpu/build_artifacts.py
    builds) for pages of ``page_size`` keys and ``seq_q`` queries a sequence: the dense op's tile for
    ``capacity`` keys (a sequence's most: pages_per_seq * page_size; ``default_tile``) where the paged rules
    allow it, else the head dim's default tile (num_q 2); with the group's heads packed into a CTA's rows
    (``pack_gqa``) where ``packs_gqa`` says so (decode: Sq x group <= 128); ``split_kv``: its key-range form."""
    num_q, block_n = default_tile(target, dtype, head_dim, causal, capacity)
    pack = group if packs_gqa(target, group, seq_q) else 0
    fields = dict(target=target, dtype=dtype, head_dim=head_dim, causal=causal, group=group, page_size=page_size,
                  **default_exp2(target, dtype, head_dim), pack_gqa=pack, split_kv=split_kv)
    try:
        return AttentionConfig(**fields, num_q=num_q, block_n=block_n)
    except ConfigError:
        return AttentionConfig(**fields, num_q=2)
