"""``torch.ops.fa4.flash_attn_with_kvcache`` / ``fa4_mlir.torch.flash_attn_with_kvcache`` on CPU tensors: every
error of the shape, dtype, layout and value checks (each raised before a kernel is built, launched, or the
cache written), the append into the (paged) cache, the fake implementation and ``torch.compile``, and the
numerics in the PTX emulator against ``reference.varlen_attention`` over the gathered keys, for both targets.

The numeric cases need the paged kernels (``AttentionConfig(page_size=...)`` built with ``block_table`` among
its parameters); until a target's kernel is there they skip, saying so (``_paged_kernel``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fa4_mlir.torch as fa4_torch  # noqa: E402
from fa4_mlir import reference, runtime  # noqa: E402
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.attention_op import paged_config
from fa4_mlir.errors import LaunchError, Unsupported  # noqa: E402
from fa4_mlir.kernels.attention.splitkv import tile_keys  # noqa: E402
from fa4_mlir.torch import kvcache, split_decode  # noqa: E402
from fa4_mlir.torch.emulated import emulator  # noqa: E402
from varlen_cases import _compare, paged_batch, sampled  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
I32 = torch.int32


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("FA4_DEVICE", "FA4_EMU_TARGET", "FA4_EMU_SEED"):
        monkeypatch.delenv(name, raising=False)


def _i32(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=I32)


def _z(*shape, dtype=torch.bfloat16) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype)


def _args(**changes) -> dict:
    """A valid call: 2 sequences of 3 queries, H 4 over Hk 2, head dim 64; a paged cache of 6 pages of 16 keys,
    3 pages a sequence (capacity 48), 10 and 20 keys cached, 4 new keys each (so 1 and 2 pages used)."""
    args = {"q": _z(2, 3, 4, 64), "k_cache": _z(6, 16, 2, 64), "v_cache": _z(6, 16, 2, 64), "k": _z(2, 4, 2, 64),
            "v": _z(2, 4, 2, 64), "cache_seqlens": _i32(10, 20), "block_table": _i32(3, 1, -1, 0, 5, 2).view(2, 3)}
    return {**args, **changes}


def _call(args: dict, target: str = "sm_90a"):
    """The op on ``args`` in the emulator; asserts that nothing was launched and the caches are unchanged."""
    before = (args["k_cache"].clone(), args["v_cache"].clone())
    with emulator(target=target) as emu:
        try:
            return fa4_torch.flash_attn_with_kvcache(**args)
        finally:
            assert emu.launches == []
            assert torch.equal(args["k_cache"], before[0]) and torch.equal(args["v_cache"], before[1])


# -- errors ---------------------------------------------------------------------------------------------------

SHAPE_ERRORS = [
    ({"q": torch.zeros(2, 3, 4, 64)},
     r"flash_attn_with_kvcache: q dtype must be one of torch.bfloat16, torch.float16, got torch.float32"),
    ({"q": _z(6, 4, 64)},
     r"flash_attn_with_kvcache: q must be 4-D \(batch, seqlen, heads, head_dim\), got shape \(6, 4, 64\)"),
    ({"v_cache": _z(6, 32, 2, 64)},
     r"flash_attn_with_kvcache: k_cache and v_cache must have one shape, got \(6, 16, 2, 64\) and \(6, 32, 2, 64\)"),
    ({"k_cache": _z(6, 16, 2, 128), "v_cache": _z(6, 16, 2, 128)},
     r"flash_attn_with_kvcache: k_cache and v_cache head_dim must be q's \(64\), got shape \(6, 16, 2, 128\)"),
    ({"k_cache": _z(6, 16, 3, 64), "v_cache": _z(6, 16, 3, 64)},
     r"flash_attn_with_kvcache: k_cache/v_cache heads must divide q heads \(4\), got 3"),
    ({"q": _z(2, 3, 256, 64), "k_cache": _z(6, 16, 1, 64), "v_cache": _z(6, 16, 1, 64), "k": None, "v": None},
     r"flash_attn_with_kvcache: q heads / k_cache heads must be <= 128, got 256 / 1 = 256"),
    ({"k_cache": _z(6, 16, 2, 64, dtype=torch.float16)},
     r"flash_attn_with_kvcache: q, k_cache, v_cache, k, v must have one dtype, got torch.bfloat16, torch.float16, "
     r"torch.bfloat16, torch.bfloat16, torch.bfloat16"),
    ({"v": None}, r"flash_attn_with_kvcache: k and v \(the new keys and values\) must be given together, got k alone"),
    ({"k": _z(2, 4, 4, 64)},
     r"flash_attn_with_kvcache: k must be \(batch=2, seqlen_new, heads_k=2, head_dim=64\), got \(2, 4, 4, 64\)"),
    ({"v": _z(2, 5, 2, 64)}, r"flash_attn_with_kvcache: v must be \(batch=2, seqlen_new, heads_k=2, head_dim=64\), "
                             r"the shape of k got \(2, 5, 2, 64\)"),
    ({"block_table": torch.tensor([[3, 1, 4], [0, 5, 2]])},
     r"flash_attn_with_kvcache: block_table dtype must be torch.int32, got torch.int64; pass block_table.int\(\)"),
    ({"block_table": _i32(3, 1, 4)},
     r"flash_attn_with_kvcache: block_table must be 2-D \(batch, pages_per_seq\), got shape \(3,\)"),
    ({"block_table": _i32(3, 1, 4, 0, 5, 2).view(3, 2).t()},
     r"flash_attn_with_kvcache: block_table must be contiguous, got stride \(1, 2\); pass block_table.contiguous\(\)"),
    ({"block_table": _i32(3, 1, 4).view(1, 3)},
     r"flash_attn_with_kvcache: block_table must be \(batch=2, pages_per_seq >= 1\), got \(1, 3\)"),
    ({"k_cache": _z(12, 0, 2, 64), "v_cache": _z(12, 0, 2, 64)},
     r"flash_attn_with_kvcache: page_size \(k_cache.shape\[1\]\) must be >= 1, got 0"),
    ({"k_cache": _z(2, 40, 2, 64), "v_cache": _z(2, 40, 2, 64), "block_table": None},
     r"flash_attn_with_kvcache: k_cache's seqlen and batch stride \(in rows\) must be multiples of 16 without a "
     r"block_table \(the cache runs as pages of up to 256 keys\), got seqlen 40, strides \(5120, 128, 64, 1\); pad "
     r"the cache to 48 keys or pass it paged"),
    ({"k_cache": _z(2, 72, 2, 64)[:, :32], "v_cache": _z(2, 72, 2, 64)[:, :32], "block_table": None},
     r"flash_attn_with_kvcache: k_cache's seqlen and batch stride \(in rows\) must be multiples of 16 .*got seqlen "
     r"32, strides \(9216, 128, 64, 1\)"),
    ({"k_cache": _z(3, 32, 2, 64), "v_cache": _z(3, 32, 2, 64), "block_table": None},
     r"flash_attn_with_kvcache: k_cache must be \(batch=2, seqlen_cache, heads_k, head_dim\) without a "
     r"block_table, got \(3, 32, 2, 64\)"),
    ({"cache_seqlens": torch.tensor([10, 20])},
     r"flash_attn_with_kvcache: cache_seqlens dtype must be torch.int32, got torch.int64; pass cache_seqlens.int\(\)"),
    ({"cache_seqlens": _i32(10, 20).view(1, 2)},
     r"flash_attn_with_kvcache: cache_seqlens must be 1-D \(batch,\), got shape \(1, 2\)"),
    ({"cache_seqlens": _i32(10, 20, 3)}, r"flash_attn_with_kvcache: cache_seqlens must have batch \(2\) elements, "
                                         r"got 3"),
    ({"cache_seqlens": _i32(10, 0, 20, 0)[::2]},
     r"flash_attn_with_kvcache: cache_seqlens must be contiguous, got stride \(2,\)"),
    ({"cache_seqlens": torch.tensor(3.0)},
     r"flash_attn_with_kvcache: a 0-d cache_seqlens \(one length for all\) must be an int32 CPU tensor, got "
     r"torch.float32 on 'cpu'; pass a Python int"),
    ({"softmax_scale": 0.0}, r"flash_attn_with_kvcache: softmax_scale must be finite and > 0, got 0.0"),
    ({"num_splits": -1}, r"flash_attn_with_kvcache: num_splits must be an int in \[0, 128\] \(0: the op chooses, 1: "
                         r"no split\), got -1"),
    ({"num_splits": 129}, r"flash_attn_with_kvcache: num_splits must be an int in \[0, 128\] .*, got 129"),
    ({"q": _z(2, 3, 4, 128)[..., ::2]},
     r"flash_attn_with_kvcache: q must have a unit innermost stride, got strides \(1536, 512, 128, 2\); "
     r"pass q.contiguous\(\)"),
    ({"k_cache": _z(6, 16, 2, 68)[..., :64]},
     r"flash_attn_with_kvcache: k_cache strides must be multiples of 8 elements \(16 bytes\), got strides "
     r"\(2176, 136, 68, 1\); pass k_cache.contiguous\(\)"),
]

VALUE_ERRORS = [
    ({"cache_seqlens": _i32(10, -1)}, r"flash_attn_with_kvcache: cache_seqlens must be >= 0, got cache_seqlens\[1\] "
                                      r"= -1"),
    ({"cache_seqlens": _i32(10, 45)},
     r"flash_attn_with_kvcache: cache_seqlens\[1\] \+ the new keys \(4\) must be <= sequence 1's capacity \(48: "
     r"pages_per_seq 3 x page_size 16\), got 45 \+ 4 = 49"),
    ({"cache_seqlens": 45},
     r"flash_attn_with_kvcache: cache_seqlens \+ the new keys \(4\) must be <= sequence 0's capacity \(48: "
     r"pages_per_seq 3 x page_size 16\), got 45 \+ 4 = 49"),
    ({"cache_seqlens": -3}, r"flash_attn_with_kvcache: cache_seqlens must be >= 0 \(and < 2\^31\), got -3"),
    ({"cache_seqlens": None},
     r"flash_attn_with_kvcache: cache_seqlens \(None: the whole cache\) \+ the new keys \(4\) must be <= sequence "
     r"0's capacity \(48: pages_per_seq 3 x page_size 16\), got 48 \+ 4 = 52"),
    ({"k_cache": _z(2, 32, 2, 64), "v_cache": _z(2, 32, 2, 64), "block_table": None, "cache_seqlens": _i32(28, 29)},
     r"flash_attn_with_kvcache: cache_seqlens\[1\] \+ the new keys \(4\) must be <= sequence 1's capacity \(32: "
     r"k_cache's seqlen\), got 29 \+ 4 = 33"),
    ({"block_table": _i32(3, 1, -1, 0, -1, 2).view(2, 3)},
     r"flash_attn_with_kvcache: block_table\[1, 1\] must be a page of the cache, in \[0, 6\) \(sequence 1 holds 24 "
     r"keys: its first 2 pages\), got -1"),
    ({"block_table": _i32(6, 1, -1, 0, 5, 2).view(2, 3)},
     r"flash_attn_with_kvcache: block_table\[0, 0\] must be a page of the cache, in \[0, 6\) \(sequence 0 holds 14 "
     r"keys: its first 1 pages\), got 6"),
    ({"cache_seqlens": 0, "block_table": _i32(3, 1, -1, 7, 5, 2).view(2, 3)},
     r"flash_attn_with_kvcache: block_table\[1, 0\] must be a page of the cache, in \[0, 6\) \(sequence 1 holds 4 "
     r"keys: its first 1 pages\), got 7"),
]


@pytest.mark.parametrize("change, message", SHAPE_ERRORS + VALUE_ERRORS)
def test_every_bad_argument_is_refused_before_a_launch_or_a_write(change, message):
    with pytest.raises(LaunchError, match=message):
        _call(_args(**change))


def test_the_fake_checks_the_shapes_too():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(), pytest.raises(LaunchError, match=r"block_table must be 2-D \(batch, pages_per_seq\)"):
        args = _args(block_table=torch.empty(3, dtype=I32))
        torch.ops.fa4.flash_attn_with_kvcache(*args.values())


@pytest.mark.parametrize("target, d, dims", [("sm_90a", 512, "64, 96, 128, 192, 256"),
                                             ("sm_100a", 256, "64, 96, 128")])
def test_head_dims_are_the_paged_kernels_of_the_target(target, d, dims):
    args = _args(q=_z(2, 3, 4, d), k_cache=_z(6, 16, 2, d), v_cache=_z(6, 16, 2, d), k=None, v=None)
    with pytest.raises(LaunchError, match=rf"flash_attn_with_kvcache: head_dim must be one of {dims} on {target} in "
                                          rf"the emulator, got {d}"):
        _call(args, target)


def test_a_gathered_cache_must_span_at_most_64_gib():
    """The gathered load warp (``AttentionConfig.page_gather``) addresses a cache with 32-bit offsets of 16-byte
    pieces: a cache (or the view of a wider buffer) whose elements reach past 64 GiB is refused."""
    from fa4_mlir.torch.serving import check_gather_span

    check_gather_span(kvcache.OP, "k_cache", (1 << 20, 1, 16, 128), (2048, 2048, 128, 1), 2)  # 4 GiB
    check_gather_span(kvcache.OP, "k_cache", (2, 1, 1, 8), ((1 << 35) - 8, 8, 8, 1), 2)  # 64 GiB exactly
    with pytest.raises(LaunchError, match=r"flash_attn_with_kvcache: k_cache must span <= 64 GiB from its first "
                                          r"element where its pages are gathered \(page sizes TMA cannot load: "
                                          r"32-bit offsets of 16-byte pieces\), got 68719476752 bytes \(shape \(2, 1, "
                                          r"1, 8\), strides \(34359738368, 8, 8, 1\)\); pass a page size that is a "
                                          r"multiple of 16, or split the cache"):
        check_gather_span(kvcache.OP, "k_cache", (2, 1, 1, 8), (1 << 35, 8, 8, 1), 2)


def test_cpu_tensors_without_the_emulator_are_an_error():
    with pytest.raises(LaunchError, match=r"flash_attn_with_kvcache: q must be a CUDA tensor, got device 'cpu'"):
        fa4_torch.flash_attn_with_kvcache(**_args())


def test_under_the_emulator_the_block_table_must_be_on_the_cpu():
    args = _args(block_table=torch.zeros(2, 3, dtype=I32, device="meta"))
    with emulator(target="sm_90a"), pytest.raises(
            LaunchError, match=r"flash_attn_with_kvcache: block_table must be a CPU tensor under the PTX emulator"):
        kvcache.flash_attn_with_kvcache_op(**args)


def test_a_kernel_without_block_table_is_never_launched_and_the_cache_is_not_written():
    """A kernel without the paged parameters (a build that ignores ``page_size``) is refused with Unsupported
    (a NotImplementedError), before the append: the call changes nothing."""
    class Dense:
        params = [{"name": n} for n in ("q", "k", "v", "o", "lse", "seq_q", "seq_k", "num_heads", "scale_log2e",
                                        "write_lse")]
    config = AttentionConfig(target="sm_100a", head_dim=64, page_size=16)
    with pytest.raises(Unsupported, match=r"flash_attn_with_kvcache: the AttentionConfig sm_100a bf16 d64 2Q paged "
                                          r"16 kernel must take block_table \(the paged K/V cache build\)"):
        kvcache._kernels.checked(config, Dense())


def test_the_config_is_the_dense_ops_tile_with_the_page_size():
    c = paged_config("sm_90a", "bf16", 64, False, 4, 256, 4096, 4096)  # the dense op's num_q 3 is not paged: 2
    assert (c.page_size, c.num_q, c.block_n, c.group, c.varlen) == (256, 2, 0, 4, False)
    short = paged_config("sm_90a", "bf16", 64, True, 1, 16, 2048, 1)  # the short-sequence tile: 128 keys
    assert (short.num_q, short.block_n, short.page_chunk) == (2, 128, 16)
    assert paged_config("sm_100a", "fp16", 128, True, 2, 64, 100, 1) == AttentionConfig(
        target="sm_100a", dtype="fp16", head_dim=128, causal=True, group=2, page_size=64)  # sm_100a fuses GQA itself


def test_decode_packs_the_group_into_the_ctas_rows_on_sm90():
    """pack_gqa = group where Sq x group <= 128 and the group is a power of two in [2, 64] (decode), else 0."""
    def pack(group, sq):
        return paged_config("sm_90a", "bf16", 128, True, group, 64, 8192, sq).pack_gqa
    assert [pack(g, 1) for g in (1, 2, 4, 8, 16, 32, 64)] == [0, 2, 4, 8, 16, 32, 64]
    assert (pack(8, 16), pack(8, 17), pack(64, 2), pack(6, 1), pack(128, 1)) == (8, 0, 64, 0, 0)
    c = paged_config("sm_90a", "fp16", 64, False, 8, 16, 1 << 20, 1)  # the long tile's num_q 3 is not paged
    assert (c.pack_gqa, c.num_q, c.group, c.fused_group, c.cta_positions) == (8, 2, 8, 8, 16)


# -- the append, without a kernel ---------------------------------------------------------------------------------

def _appended(k_cache, k, starts, table):
    """The cache after appending ``k`` the plain way: one row at a time through the block table."""
    out = k_cache.clone()
    page_size = k_cache.shape[1]
    for b in range(k.shape[0]):
        for i in range(k.shape[1]):
            p = int(starts[b]) + i
            out[int(table[b, p // page_size]), p % page_size] = k[b, i]
    return out


@pytest.mark.parametrize("page_size, starts, new", [(16, (10, 0, 31), 7), (16, (0, 15, 16), 17), (32, (5, 40, 0), 1),
                                                    (64, (0, 0, 0), 0)])
def test_append_to_cache_writes_each_row_at_its_position_through_the_table(page_size, starts, new):
    gen = torch.Generator().manual_seed(page_size + new)
    pages = 10
    k_cache, v_cache = (torch.randn(pages, page_size, 2, 8, generator=gen).half() for _ in range(2))
    k, v = (torch.randn(3, new, 2, 8, generator=gen).half() for _ in range(2))
    table = torch.randperm(pages, generator=gen)[:9].to(I32).view(3, 3)
    want_k, want_v = _appended(k_cache, k, starts, table), _appended(v_cache, v, starts, table)
    kvcache.append_to_cache(k_cache, v_cache, k, v, _i32(*starts), table)
    assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)


def test_append_to_a_non_paged_cache_is_page_b_of_sequence_b():
    k_cache = torch.zeros(2, 32, 1, 8)
    k = torch.arange(2 * 3 * 8, dtype=torch.float32).view(2, 3, 1, 8) + 1
    kvcache.append_to_cache(k_cache, k_cache.clone(), k, k, _i32(4, 29), torch.arange(2, dtype=I32)[:, None])
    assert torch.equal(k_cache[0, 4:7], k[0]) and torch.equal(k_cache[1, 29:32], k[1])
    assert int((k_cache != 0).sum()) == 2 * 3 * 8


def test_the_op_appends_before_it_attends_here_without_queries():
    """Sq = 0: no kernel runs, but the new keys land in the cache (paged: through the block table; an int
    cache_seqlens: every sequence at that position)."""
    gen = torch.Generator().manual_seed(3)
    args = _args(q=_z(2, 0, 4, 64), k=torch.randn(2, 4, 2, 64, generator=gen).bfloat16(),
                 v=torch.randn(2, 4, 2, 64, generator=gen).bfloat16(),
                 k_cache=torch.randn(6, 16, 2, 64, generator=gen).bfloat16(), v_cache=_z(6, 16, 2, 64))
    want_k = _appended(args["k_cache"], args["k"], (10, 20), args["block_table"])
    want_v = _appended(args["v_cache"], args["v"], (10, 20), args["block_table"])
    with emulator(target="sm_100a") as emu:
        out, lse = fa4_torch.flash_attn_with_kvcache(**args, return_softmax_lse=True)
    assert emu.launches == [] and out.shape == (2, 0, 4, 64) and lse.shape == (2, 4, 0)
    assert torch.equal(args["k_cache"], want_k) and torch.equal(args["v_cache"], want_v)
    with emulator(target="sm_90a"):
        fa4_torch.flash_attn_with_kvcache(**{**args, "cache_seqlens": 28})
    assert torch.equal(args["k_cache"], _appended(want_k, args["k"], (28, 28), args["block_table"]))


def test_empty_caches_give_zeros_and_lse_plus_inf_without_a_launch():
    q = torch.randn(2, 3, 4, 64).bfloat16()
    with emulator(target="sm_90a") as emu:
        out, lse = fa4_torch.flash_attn_with_kvcache(q, _z(6, 16, 2, 64), _z(6, 16, 2, 64), cache_seqlens=0,
                                                     block_table=_i32(-1, -1, -1, -1, -1, -1).view(2, 3),
                                                     causal=True, return_softmax_lse=True)
    assert emu.launches == [] and out.shape == (2, 3, 4, 64) and not out.any()
    assert lse.shape == (2, 4, 3) and lse.dtype == torch.float32 and bool((lse == math.inf).all())


# -- the memo of checked metadata ---------------------------------------------------------------------------------

def test_checked_metadata_is_checked_again_after_an_in_place_change():
    args = _args(q=_z(2, 0, 4, 64))
    with emulator(target="sm_90a"):
        fa4_torch.flash_attn_with_kvcache(**args)  # accepted: remembered
        args["block_table"][1, 1] = 9
        with pytest.raises(LaunchError, match=r"block_table\[1, 1\] must be a page of the cache, in \[0, 6\)"):
            fa4_torch.flash_attn_with_kvcache(**args)
        args["block_table"][1, 1] = 4
        fa4_torch.flash_attn_with_kvcache(**args)
        args["cache_seqlens"][0] = 47
        with pytest.raises(LaunchError, match=r"cache_seqlens\[0\] \+ the new keys \(4\) must be <= sequence 0's"):
            fa4_torch.flash_attn_with_kvcache(**args)


# -- fake and torch.compile ---------------------------------------------------------------------------------------

def test_the_fake_gives_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, cache = torch.empty(3, 1, 8, 128, dtype=torch.float16), torch.empty(40, 64, 2, 128, dtype=torch.float16)
        table, seqlens = torch.empty(3, 5, dtype=I32), torch.empty(3, dtype=I32)
        out, lse = torch.ops.fa4.flash_attn_with_kvcache(q, cache, cache, None, None, seqlens, table, None, True, True)
        out2, none = torch.ops.fa4.flash_attn_with_kvcache(q, cache[:3], cache[:3])
        with pytest.raises(LaunchError, match="cache_seqlens dtype must be torch.int32, got torch.int64"):
            torch.ops.fa4.flash_attn_with_kvcache(q, cache, cache, None, None, seqlens.long(), table)
    assert tuple(out.shape) == tuple(out2.shape) == (3, 1, 8, 128) and out.dtype == torch.float16
    assert tuple(lse.shape) == (3, 8, 1) and lse.dtype == torch.float32 and tuple(none.shape) == (0,)


def test_torch_compile_fullgraph_traces_the_op_and_its_append():
    """Dynamo and AOT autograd trace the op through its fake (no graph break with fullgraph=True), the cache
    mutation included; the compiled calls run the op (without queries, or without keys: no kernel needed)."""
    torch._dynamo.reset()

    def f(q, k_cache, v_cache, k, v, table):
        out, lse = fa4_torch.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, 2, table, causal=True,
                                                     return_softmax_lse=True)
        return out * 2, lse

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    k_cache, v_cache = _z(6, 16, 2, 64), _z(6, 16, 2, 64)
    k, v = torch.ones(2, 4, 2, 64).bfloat16(), torch.full((2, 4, 2, 64), 2.0).bfloat16()
    table = _i32(3, 1, -1, 0, 5, 2).view(2, 3)
    with emulator(target="sm_100a"):
        out, lse = compiled(_z(2, 0, 4, 64), k_cache, v_cache, k, v, table)
    assert out.shape == (2, 0, 4, 64) and lse.shape == (2, 4, 0)
    assert torch.equal(k_cache, _appended(_z(6, 16, 2, 64), k, (2, 2), table))
    assert torch.equal(v_cache, _appended(_z(6, 16, 2, 64), v, (2, 2), table))

    def g(q, k_cache, v_cache):
        return fa4_torch.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=0, return_softmax_lse=True)

    with emulator(target="sm_100a"):
        out, lse = torch.compile(g, fullgraph=True, backend="aot_eager")(torch.ones(2, 3, 4, 64).bfloat16(),
                                                                          _z(2, 32, 2, 64), _z(2, 32, 2, 64))
    assert out.shape == (2, 3, 4, 64) and not out.any() and bool((lse == math.inf).all())


# -- numerics in the emulator (need the paged kernels) -------------------------------------------------------------

def _paged_kernel(config: AttentionConfig) -> None:
    """Skip unless ``config``'s paged kernel builds: a build that raises NotImplementedError, or a kernel
    without ``block_table`` among its parameters (a build that does not know ``page_size`` yet), skips."""
    try:
        kernel = runtime.load("attention", config, device=runtime.EMULATOR)
    except NotImplementedError as exc:
        pytest.skip(f"the {config.describe()} kernel is not built yet: {exc}")
    if not any(p["name"] == "block_table" for p in kernel.params):
        pytest.skip(f"the {config.describe()} kernel does not take block_table yet (paged kernels not built)")


def _compare_gathered(target, dtype, causal, scale, q, kc, vc, table, total, out, lse) -> None:
    """The op's ``out`` (B, Sq, H, D) and ``lse`` (B, H, Sq) against float64 over the keys each sequence holds after
    the call (``total``), gathered from the caches ``kc``, ``vc`` through ``table`` (``varlen_cases._compare``)."""
    b, sq, h, d = q.shape
    used = np.asarray(total, np.int32)
    keys, cu_k = reference.paged_keys(_bits(kc).reshape(kc.shape), table, used)
    values, _ = reference.paged_keys(_bits(vc).reshape(vc.shape), table, used)
    config = AttentionConfig(target=target, dtype=dtype, head_dim=d, causal=causal)  # _compare reads dtype, causal
    _compare(config, q.reshape(b * sq, h, d), keys, values, np.arange(b + 1, dtype=np.int32) * sq, cu_k, scale,
             _bits(out).reshape(b * sq, h, d), lse.numpy().transpose(1, 0, 2).reshape(h, b * sq))


def _torch(bits: np.ndarray, dtype: str) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(DTYPES[dtype])


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


# (target, dtype, head dim, H, Hk, causal, Sq, page size (0: not paged, Sk_max 64), cached keys, new keys):
# an empty cache, Sq > keys (causal rows that see no key), a partly used last page, GQA
CASES = [
    ("sm_90a", "bf16", 64, 4, 1, True, 3, 16, (5, 0, 40), 2),
    ("sm_90a", "fp16", 128, 2, 2, False, 1, 0, (64, 17), 0),
    ("sm_90a", "bf16", 128, 16, 2, True, 1, 64, (100, 0, 63), 1),  # decode, pack_gqa 8: a CTA per K/V head
    ("sm_90a", "bf16", 128, 8, 1, True, 1, 40, (100, 0, 63), 1),  # pages of 40, gathered; pack_gqa 8
    ("sm_90a", "fp16", 64, 2, 2, False, 5, 1, (30, 7), 3),  # pages of 1 key, gathered; a prefill chunk of 5
    ("sm_100a", "bf16", 64, 2, 2, True, 4, 64, (70, 1), 0),
    ("sm_100a", "fp16", 128, 4, 2, False, 2, 0, (20, 0), 5),
    ("sm_100a", "fp16", 64, 2, 2, False, 1, 1, (40, 9), 0),  # pages of 1 key, gathered (sm_100a's ``gather``)
    ("sm_100a", "bf16", 96, 4, 1, True, 2, 24, (50, 0, 33), 1),  # pages of 24, gathered
]


@pytest.mark.parametrize("target, dtype, d, h, hk, causal, sq, page_size, cached, new", sampled(CASES))
def test_the_op_in_the_emulator_matches_float64(target, dtype, d, h, hk, causal, sq, page_size, cached, new):
    b = len(cached)
    total = [n + new for n in cached]
    paged = page_size > 0
    rng = np.random.default_rng(d + sq)
    if paged:
        k_cache, v_cache, table, _ = paged_batch(rng, total, page_size, hk, d, dtype)
        table = np.concatenate([table, np.full((b, 1), -1, np.int32)], axis=1)  # a spare column, never read
    else:
        k_cache, v_cache = (reference.random_bits(rng, (b, 64, hk, d), dtype, 1.0) for _ in range(2))
        table = np.arange(b, dtype=np.int32)[:, None]
    capacity = table.shape[1] * k_cache.shape[1]
    config = paged_config(target, dtype, d, causal, h // hk, k_cache.shape[1], capacity, sq)
    assert bool(config.pack_gqa) == (target == "sm_90a" and h > hk)  # sm_90a decode: the group's heads packed
    _paged_kernel(config)
    q = reference.random_bits(rng, (b, sq, h, d), dtype, 1.0)
    k_new, v_new = (reference.random_bits(rng, (b, new, hk, d), dtype, 1.0) for _ in range(2))
    kc, vc = _torch(k_cache, dtype), _torch(v_cache, dtype)
    want_k = _appended(kc, _torch(k_new, dtype), cached, torch.from_numpy(table))
    want_v = _appended(vc, _torch(v_new, dtype), cached, torch.from_numpy(table))
    scale = float(rng.uniform(0.05, 0.2))
    with emulator(target=target, seed=1) as emu:
        out, lse = fa4_torch.flash_attn_with_kvcache(
            _torch(q, dtype), kc, vc, _torch(k_new, dtype) if new else None, _torch(v_new, dtype) if new else None,
            torch.from_numpy(np.asarray(cached, np.int32)), torch.from_numpy(table) if paged else None,
            softmax_scale=scale, causal=causal, return_softmax_lse=True)
    assert [name for name, _ in emu.launches] == ["attention"]
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)
    assert out.shape == (b, sq, h, d) and lse.shape == (b, h, sq)
    _compare_gathered(target, dtype, causal, scale, q, kc, vc, table, total, out, lse)


# (target, dtype, head dim, H, Hk, causal, Sq, page size, cached keys, new keys, num_splits): the split-KV
# decode through the op (the split kernel, then the combine), forced and chosen
SPLIT_CASES = [
    ("sm_90a", "bf16", 128, 8, 1, True, 1, 48, (300, 0, 130), 1, 3),  # pack_gqa 8; an empty sequence; pages of 48
    ("sm_90a", "fp16", 64, 2, 2, False, 3, 16, (200, 90), 2, 5),
    ("sm_90a", "bf16", 192, 4, 2, False, 2, 24, (300, 33), 1, 3),  # pages of 24 at d192: gathered
    ("sm_90a", "fp16", 128, 4, 1, True, 1, 8, (250, 0, 70), 0, 2),  # pages of 8, pack_gqa 4: gathered
    ("sm_100a", "bf16", 64, 2, 1, True, 2, 64, (260, 40), 0, 3),
    ("sm_100a", "fp16", 128, 2, 2, False, 1, 0, (190, 0), 1, 2),
    ("sm_100a", "bf16", 128, 2, 1, False, 1, 100, (300, 17), 1, 3),  # pages of 100, gathered
]


@pytest.mark.parametrize("target, dtype, d, h, hk, causal, sq, page_size, cached, new, splits", sampled(SPLIT_CASES))
def test_split_kv_decode_through_the_op_matches_float64(target, dtype, d, h, hk, causal, sq, page_size, cached, new,
                                                        splits):
    """``num_splits`` > 1 runs the split kernel over that many key ranges and the combine kernel after it, with
    the dense op's results (O within the yardstick's error, LSE, rows without a key 0 / +inf)."""
    b = len(cached)
    total = [n + new for n in cached]
    rng = np.random.default_rng(d + sq + splits)
    if page_size:
        k_cache, v_cache, table, _ = paged_batch(rng, total, page_size, hk, d, dtype)
    else:
        k_cache, v_cache = (reference.random_bits(rng, (b, 256, hk, d), dtype, 1.0) for _ in range(2))
        table = np.arange(b, dtype=np.int32)[:, None]
    capacity = table.shape[1] * k_cache.shape[1]
    config = paged_config(target, dtype, d, causal, h // hk, k_cache.shape[1], capacity, sq, split_kv=True)
    _paged_kernel(config)
    q = reference.random_bits(rng, (b, sq, h, d), dtype, 1.0)
    k_new, v_new = (reference.random_bits(rng, (b, new, hk, d), dtype, 1.0) for _ in range(2))
    kc, vc = _torch(k_cache, dtype), _torch(v_cache, dtype)
    scale = float(rng.uniform(0.05, 0.2))
    with emulator(target=target, seed=2) as emu:
        out, lse = fa4_torch.flash_attn_with_kvcache(
            _torch(q, dtype), kc, vc, _torch(k_new, dtype) if new else None, _torch(v_new, dtype) if new else None,
            torch.from_numpy(np.asarray(cached, np.int32)), torch.from_numpy(table) if page_size else None,
            softmax_scale=scale, causal=causal, return_softmax_lse=True, num_splits=splits)
    assert [name for name, _ in emu.launches] == ["attention", "attention_combine"]
    _compare_gathered(target, dtype, causal, scale, q, kc, vc, table, total, out, lse)


def test_the_op_splits_a_decode_grid_short_of_the_sms_and_not_a_full_one():
    """``num_splits`` 0: a grid of fewer CTAs than SMs over enough key tiles is split, a full grid or a short
    cache is not; an explicit count is taken as it is."""
    config = paged_config("sm_90a", "bf16", 128, True, 8, 256, 8192, 1)
    bn = tile_keys(config)
    assert split_decode.split_count(config, 8, 1, 64, 8192, 132, 0) > 1  # 64 CTAs
    assert split_decode.split_count(config, 64, 1, 64, 8192, 132, 0) == 1  # 512 CTAs
    assert split_decode.split_count(config, 16, 1, 64, 8192, 132, 0) == 1  # 128 CTAs: 97% of the SMs already
    assert split_decode.split_count(config, 8, 1, 64, (split_decode.MIN_SPLIT_TILES * 2 - 1) * bn, 132, 0) == 1
    assert split_decode.split_count(config, 64, 1, 64, 8192, 132, 5) == 5


def test_a_non_paged_caches_block_table_is_made_once_per_shape():
    layout = kvcache.Layout(3, 1, 2, 1, 64, 0, False, 2 * 5 + 4, 32, 4, 5)
    table = kvcache._contiguous_table(layout, torch.device("cpu"))
    assert table.dtype == torch.int32 and table.tolist() == [[0, 1, 2, 3], [5, 6, 7, 8], [10, 11, 12, 13]]
    assert kvcache._contiguous_table(layout, torch.device("cpu")) is table
    assert kvcache._contiguous_table(layout._replace(stride_pages=4), torch.device("cpu")) is not table


def test_a_non_paged_cache_runs_as_pages_of_the_common_sizes():
    """A (B, Sk_max, Hk, D) cache is viewed as pages of the largest of 256 ... 16 dividing Sk_max and its batch
    stride in rows (the paged kernels of the common page sizes serve every Sk_max); a slice of a longer cache
    takes its batch stride's pages; the view's pages are the cache's rows."""
    def cache(*shape):
        return torch.zeros(*shape, dtype=torch.bfloat16)
    assert kvcache._cache_page(cache(2, 8192, 1, 64)) == (256, 32)
    assert kvcache._cache_page(cache(2, 384, 1, 64)) == (128, 3)
    assert kvcache._cache_page(cache(3, 48, 2, 64)) == (16, 3)
    assert kvcache._cache_page(cache(2, 1024, 1, 64)[:, :512]) == (256, 4)
    assert kvcache._cache_page(cache(2, 1040, 1, 64)[:, :512]) == (16, 65)
    assert kvcache._cache_page(cache(1, 1024, 1, 64)[:, :512]) == (256, 2)
    full = torch.arange(2 * 96 * 4, dtype=torch.float32).view(2, 96, 1, 4)
    sliced = full[:, :64]
    layout = kvcache.Layout(2, 1, 1, 1, 4, 0, False, 1 * 3 + 2, 32, 2, 3)
    pages = kvcache._as_pages(sliced, layout)
    assert pages.shape == (5, 32, 1, 4)
    assert torch.equal(pages[3:5].reshape(64, 1, 4), sliced[1]) and torch.equal(pages[0:2].reshape(64, 1, 4), sliced[0])
