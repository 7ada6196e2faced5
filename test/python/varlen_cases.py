"""Packed variable-length attention batches for the emulator tests of both targets' ``varlen`` kernels:
random lengths (empty sequences, Sq != Sk), the float64 reference, and the check of one run."""

from __future__ import annotations

import numpy as np

import ci_sample
from fa4_mlir import reference

# CI runs a sample of the serving kernels' emulator lists (``sampled``: every SM90_EVERY-th / SM100_EVERY-th case);
# FA4_EMU_FULL_MATRIX=1 runs them all (``ci_sample``): the whole lists took a third of a 39-minute CI.
FULL = ci_sample.FULL


# sm_90a: the H100 runs these kernels' cases (test/gpu), so CI's emulator runs of them are a second reading and
# take every eighth case
SM90_EVERY = 8
# sm_100a: no GPU runs them, so CI keeps a denser sample, every third case
SM100_EVERY = 3


def sampled(cases: list, one_arg: bool = False, every: int = 2) -> list:
    """``cases`` for ``pytest.mark.parametrize``: every ``every``-th one from the first runs, the others only with
    FA4_EMU_FULL_MATRIX=1 (``ci_sample.in_ci``: skipped, not left out, the ids stay). ``one_arg``: each case is
    one argument, not a tuple of them."""
    return ci_sample.in_ci(cases, range(0, len(cases), every), one_arg=one_arg)


def prefix_sums(lengths) -> np.ndarray:
    """int32[B + 1]: 0, then the running sums of ``lengths``."""
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def packed_batch(rng: np.random.Generator, lengths_q, lengths_k, heads: int, kv_heads: int, d: int, dtype: str):
    """q (total_q, H, D), k and v (total_k, Hk, D) random bits and the two prefix sums."""
    cu_q, cu_k = prefix_sums(lengths_q), prefix_sums(lengths_k)
    q = reference.random_bits(rng, (int(cu_q[-1]), heads, d), dtype, 1.0)
    k, v = (reference.random_bits(rng, (int(cu_k[-1]), kv_heads, d), dtype, 1.0) for _ in range(2))
    return q, k, v, cu_q, cu_k


def paged_batch(rng: np.random.Generator, lengths_k, page_size: int, kv_heads: int, d: int, dtype: str,
                spare: int = 2):
    """A paged K/V cache for sequences of ``lengths_k`` keys: k_cache and v_cache (num_pages, page_size, Hk, D)
    random bits, the pages shuffled (``spare`` pages no sequence uses), the int32 (B, pages_per_seq) block
    table (entries past a sequence's pages -1: never read) and the int32 (B,) key counts."""
    pages = [-(-n // page_size) for n in lengths_k]
    num_pages = sum(pages) + spare
    order = rng.permutation(num_pages).astype(np.int32)
    table = np.full((len(lengths_k), max(max(pages, default=0), 1)), -1, np.int32)
    at = 0
    for b, n in enumerate(pages):
        table[b, :n] = order[at:at + n]
        at += n
    k, v = (reference.random_bits(rng, (num_pages, page_size, kv_heads, d), dtype, 1.0) for _ in range(2))
    return k, v, table, np.asarray(lengths_k, np.int32)


def check_paged_in_emulator(config, q, k_cache, v_cache, table, seqused_k, scale: float, cu_q=None,
                            seed: int = 0) -> None:
    """Run ``config``'s paged kernel in the emulator; q dense (B, Sq, H, D), or packed with ``cu_q``; checked
    as ``check_varlen_in_emulator`` checks, against the keys the block table names (``reference.paged_keys``)."""
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_paged_attention

    dense = cu_q is None
    o = np.full(q.shape, reference.POISON[config.dtype], np.uint16)
    lse = np.full((q.shape[0], q.shape[2], q.shape[1]) if dense else (q.shape[1], q.shape[0]), np.nan, np.float32)
    launch_paged_attention(runtime.load("attention", config, device="emulator"), config, q, k_cache, v_cache, o, lse,
                           scale, table, seqused_k, cu_q, seed=seed)
    k, cu_k = reference.paged_keys(k_cache, table, seqused_k)
    v, _ = reference.paged_keys(v_cache, table, seqused_k)
    if dense:  # as packed sequences of Sq rows each
        b, sq, h, d = q.shape
        q, o, lse = q.reshape(b * sq, h, d), o.reshape(b * sq, h, d), lse.transpose(1, 0, 2).reshape(h, b * sq)
        cu_q = np.arange(b + 1, dtype=np.int32) * sq
    _compare(config, q, k, v, cu_q, cu_k, scale, o, lse)


def check_paged_case(config, sq, lengths_k, heads: int, seed: int) -> None:
    """``check_paged_in_emulator`` on a random batch (``seed``): sequences of ``lengths_k`` keys on shuffled
    pages, ``heads`` query heads; Q dense (B, ``sq``, H, D), or packed (``config.varlen``, ``sq`` the query
    lengths)."""
    rng = np.random.default_rng(seed)
    hk, d = heads // config.group, config.head_dim
    k, v, table, seqused = paged_batch(rng, lengths_k, config.page_size, hk, d, config.dtype)
    if config.varlen:
        q, _, _, cu_q, _ = packed_batch(rng, sq, [0] * len(sq), heads, hk, d, config.dtype)
    else:
        q, cu_q = reference.random_bits(rng, (len(lengths_k), sq, heads, d), config.dtype, 1.0), None
    check_paged_in_emulator(config, q, k, v, table, seqused, d ** -0.5, cu_q=cu_q)


def check_varlen_in_emulator(config, q, k, v, cu_q, cu_k, scale: float, seed: int = 0) -> None:
    """Run ``config``'s packed kernel in the emulator (race detector on); O (every row written: the poison
    must be gone, rows past a sequence's end belong to the next one and must hold its values) and the LSE
    against float64 (``reference.varlen_attention``), within twice the error of the computation at the
    kernel's precision; rows that see no key must be exactly 0 with LSE +inf."""
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_varlen_attention

    o = np.full(q.shape, reference.POISON[config.dtype], np.uint16)
    lse = np.full((q.shape[1], q.shape[0]), np.nan, np.float32)
    launch_varlen_attention(runtime.load("attention", config, device="emulator"), config, q, k, v, o, lse, scale,
                            cu_q, cu_k, seed=seed)
    _compare(config, q, k, v, cu_q, cu_k, scale, o, lse)


def _compare(config, q, k, v, cu_q, cu_k, scale: float, o, lse) -> None:
    """O (total_q, H, D) bits and the (H, total_q) LSE of packed sequences against float64."""
    dtype, causal = config.dtype, config.causal
    qf, kf, vf = (reference.to_f64(t, dtype) for t in (q, k, v))
    ref, ref_lse = reference.varlen_attention(qf, kf, vf, cu_q, cu_k, causal, scale)
    yard, _ = reference.varlen_attention(qf, kf, vf, cu_q, cu_k, causal, scale, dtype=dtype)
    result = reference.compare(o, ref, yard, dtype)
    assert result.ok and result.unwritten == 0, result.summary()
    empty = np.isinf(ref_lse)  # (H, total_q): rows without a visible key
    assert np.array_equal(np.isinf(lse) & (lse > 0), empty), "LSE must be +inf exactly on the rows that see no key"
    assert not reference.to_f64(o, dtype).transpose(1, 0, 2)[empty].any(), "rows that see no key must be 0"
    if (~empty).any():
        assert float(np.abs(lse[~empty] - ref_lse[~empty]).max()) <= reference.lse_tolerance(ref_lse[~empty])
