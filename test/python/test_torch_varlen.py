"""``torch.ops.fa4.flash_attn_varlen`` / ``fa4_mlir.torch.flash_attn_varlen_func`` on CPU tensors: every
error of the metadata, shape, dtype and head-dim checks (each raised before a kernel is built or launched),
the fake implementation and ``torch.compile``, and the numerics in the PTX emulator against
``reference.varlen_attention`` for both targets.

The numeric cases need the packed kernels (``AttentionConfig(varlen=True)`` built with ``cu_seqlens_q``
among its parameters); until a target's kernel is there they skip, saying so (``_packed_kernel``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fa4_mlir.torch as fa4_torch  # noqa: E402
from fa4_mlir import reference, runtime  # noqa: E402
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.attention_op import varlen_config
from fa4_mlir.errors import LaunchError, Unsupported  # noqa: E402
from fa4_mlir.torch import serving, varlen  # noqa: E402
from fa4_mlir.torch.emulated import emulator  # noqa: E402
from varlen_cases import _compare, packed_batch, paged_batch, sampled  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
I32 = torch.int32


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("FA4_DEVICE", "FA4_EMU_TARGET", "FA4_EMU_SEED"):
        monkeypatch.delenv(name, raising=False)


def _cu(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=I32)


def _call(args: dict, target: str = "sm_90a"):
    """The op on ``args`` in the emulator; asserts that nothing was launched (the errors come first)."""
    with emulator(target=target) as emu:
        try:
            return fa4_torch.flash_attn_varlen_func(**args)
        finally:
            assert emu.launches == []


def _args(**changes) -> dict:
    """A valid call: 2 sequences, q lengths 3 and 7, k lengths 5 and 7, H 4 over Hk 2, head dim 64."""
    z = lambda *s: torch.zeros(*s, dtype=torch.bfloat16)  # noqa: E731
    args = {"q": z(10, 4, 64), "k": z(12, 2, 64), "v": z(12, 2, 64), "cu_seqlens_q": _cu(0, 3, 10),
            "cu_seqlens_k": _cu(0, 5, 12), "max_seqlen_q": 7, "max_seqlen_k": 7}
    return {**args, **changes}


# -- errors ---------------------------------------------------------------------------------------------------

METADATA_ERRORS = [
    ({"cu_seqlens_q": torch.tensor([0, 3, 10])},
     r"flash_attn_varlen: cu_seqlens_q dtype must be torch.int32, got torch.int64; pass cu_seqlens_q.int\(\)"),
    ({"cu_seqlens_k": _cu(0, 5, 12).float()}, r"cu_seqlens_k dtype must be torch.int32, got torch.float32"),
    ({"cu_seqlens_q": _cu(0, 3, 10)[None]},
     r"flash_attn_varlen: cu_seqlens_q must be 1-D \(batch \+ 1 prefix sums\), got shape \(1, 3\)"),
    ({"cu_seqlens_k": _cu(0, 99, 5, 99, 12, 99)[::2]},
     r"flash_attn_varlen: cu_seqlens_k must be contiguous, got stride \(2,\); pass cu_seqlens_k.contiguous\(\)"),
    ({"cu_seqlens_q": _cu(10), "cu_seqlens_k": _cu(12)},
     r"flash_attn_varlen: cu_seqlens_q must have batch \+ 1 >= 2 elements \(0, then the running sums of the "
     r"lengths\), got 1"),
    ({"cu_seqlens_k": _cu(0, 5, 6, 12)},
     r"flash_attn_varlen: cu_seqlens_q and cu_seqlens_k must have one length \(batch \+ 1\), got 3 and 4"),
    ({"cu_seqlens_q": _cu(1, 3, 10)}, r"flash_attn_varlen: cu_seqlens_q\[0\] must be 0, got 1"),
    ({"cu_seqlens_k": _cu(0, 13, 12)},
     r"flash_attn_varlen: cu_seqlens_k must be non-decreasing, got cu_seqlens_k\[2\] = 12 < cu_seqlens_k\[1\] = 13"),
    ({"cu_seqlens_q": _cu(0, 3, 9)}, r"flash_attn_varlen: cu_seqlens_q\[-1\] must be the rows of q \(10\), got 9"),
    ({"cu_seqlens_k": _cu(0, 5, 13), "max_seqlen_k": 8},
     r"flash_attn_varlen: cu_seqlens_k\[-1\] must be the rows of k \(12\), got 13"),
    ({"max_seqlen_q": 6},
     r"flash_attn_varlen: max_seqlen_q must be >= every sequence's length \(7, sequence 1\), got 6; it bounds "
     r"every length \(FlashAttention's contract\): pass the longest length"),
    ({"max_seqlen_k": 0}, r"flash_attn_varlen: max_seqlen_k must be >= every sequence's length \(7, sequence 1\), "
                          r"got 0"),
    ({"max_seqlen_q": -1}, r"flash_attn_varlen: max_seqlen_q must be an int >= 0, got -1"),
]

SHAPE_ERRORS = [
    ({"q": torch.zeros(10, 4, 64)}, r"flash_attn_varlen: q dtype must be one of torch.bfloat16, torch.float16, got "
                                    r"torch.float32"),
    ({"q": torch.zeros(10, 4, 64).to(torch.float8_e4m3fn)},
     r"flash_attn_varlen: q dtype must be one of torch.bfloat16, torch.float16, got torch.float8_e4m3fn"),
    ({"k": torch.zeros(12, 2, 64, dtype=torch.float16), "v": torch.zeros(12, 2, 64, dtype=torch.float16)},
     r"flash_attn_varlen: q, k and v must have one dtype, got torch.bfloat16, torch.float16, torch.float16"),
    ({"q": torch.zeros(1, 10, 4, 64, dtype=torch.bfloat16)},
     r"flash_attn_varlen: q must be 3-D \(total_rows, heads, head_dim\), got shape \(1, 10, 4, 64\)"),
    ({"v": torch.zeros(11, 2, 64, dtype=torch.bfloat16)},
     r"flash_attn_varlen: k and v must have one shape, got \(12, 2, 64\) and \(11, 2, 64\)"),
    ({"k": torch.zeros(12, 2, 128, dtype=torch.bfloat16), "v": torch.zeros(12, 2, 128, dtype=torch.bfloat16)},
     r"flash_attn_varlen: k and v must be \(total_k, heads_k, head_dim=64\) like q, got \(12, 2, 128\)"),
    ({"k": torch.zeros(12, 3, 64, dtype=torch.bfloat16), "v": torch.zeros(12, 3, 64, dtype=torch.bfloat16)},
     r"flash_attn_varlen: k/v heads must divide q heads \(4\), got 3"),
    ({"q": torch.zeros(10, 256, 64, dtype=torch.bfloat16), "k": torch.zeros(12, 1, 64, dtype=torch.bfloat16),
      "v": torch.zeros(12, 1, 64, dtype=torch.bfloat16)},
     r"flash_attn_varlen: q heads / k heads must be <= 128, got 256 / 1 = 256"),
    ({"softmax_scale": -1.0}, r"flash_attn_varlen: softmax_scale must be finite and > 0, got -1.0"),
    ({"q": torch.zeros(10, 4, 128, dtype=torch.bfloat16)[..., ::2]},
     r"flash_attn_varlen: q must have a unit innermost stride, got strides \(512, 128, 2\); pass q.contiguous\(\)"),
]


def _paged_args(**changes) -> dict:
    """A valid call over a paged cache: the same queries, k lengths 5 and 7 in 4 pages of 16 keys, 2 a sequence."""
    z = lambda *s: torch.zeros(*s, dtype=torch.bfloat16)  # noqa: E731
    return _args(**{"k": z(4, 16, 2, 64), "v": z(4, 16, 2, 64), "block_table": _cu(2, -1, 0, 3).view(2, 2),
                    **changes})


PAGED_ERRORS = [
    ({"k": torch.zeros(12, 2, 64, dtype=torch.bfloat16), "v": torch.zeros(12, 2, 64, dtype=torch.bfloat16)},
     r"flash_attn_varlen: k must be 4-D \(num_pages, page_size, heads_k, head_dim\) with a block_table, got shape "
     r"\(12, 2, 64\)"),
    ({"k": torch.zeros(4, 16, 2, 32, dtype=torch.bfloat16), "v": torch.zeros(4, 16, 2, 32, dtype=torch.bfloat16)},
     r"flash_attn_varlen: k and v must be \(num_pages, page_size, heads_k, head_dim=64\) like q, got "
     r"\(4, 16, 2, 32\)"),
    ({"block_table": _cu(2, 0, 3)}, r"flash_attn_varlen: block_table must be 2-D \(batch, pages_per_seq\), got "
                                    r"shape \(3,\)"),
    ({"block_table": _cu(2, 0, 3, 1, 1, 1).view(3, 2)},
     r"flash_attn_varlen: block_table must be \(batch=2, pages_per_seq >= 1\), got \(3, 2\)"),
    ({"block_table": torch.tensor([[2, -1], [0, 3]])},
     r"flash_attn_varlen: block_table dtype must be torch.int32, got torch.int64"),
    ({"k": torch.zeros(4, 0, 2, 64, dtype=torch.bfloat16), "v": torch.zeros(4, 0, 2, 64, dtype=torch.bfloat16)},
     r"flash_attn_varlen: page_size \(k.shape\[1\]\) must be >= 1, got 0"),
    ({"max_seqlen_k": 33}, r"flash_attn_varlen: max_seqlen_k must be <= a sequence's capacity with a block_table "
                           r"\(pages_per_seq 2 x page_size 16 = 32\), got 33"),
    ({"cu_seqlens_k": _cu(0, 20, 27), "max_seqlen_k": 20},
     r"flash_attn_varlen: block_table\[0, 1\] must be a page of k and v, in \[0, 4\) \(sequence 0 holds 20 keys: "
     r"its first 2 pages\), got -1"),
    ({"block_table": _cu(2, -1, 4, 3).view(2, 2)},
     r"flash_attn_varlen: block_table\[1, 0\] must be a page of k and v, in \[0, 4\) \(sequence 1 holds 7 keys: "
     r"its first 1 pages\), got 4"),
    ({"cu_seqlens_k": _cu(0, 5, 4)},
     r"flash_attn_varlen: cu_seqlens_k must be non-decreasing, got cu_seqlens_k\[2\] = 4 < cu_seqlens_k\[1\] = 5"),
]


@pytest.mark.parametrize("change, message", PAGED_ERRORS)
def test_every_bad_paged_argument_is_refused_before_a_launch(change, message):
    with pytest.raises(LaunchError, match=message):
        _call(_paged_args(**change))


@pytest.mark.parametrize("change, message", METADATA_ERRORS + SHAPE_ERRORS)
def test_every_bad_argument_is_refused_before_a_launch(change, message):
    with pytest.raises(LaunchError, match=message):
        _call(_args(**change))


@pytest.mark.parametrize("target, d, dims", [("sm_90a", 512, "64, 96, 128, 192, 256"),
                                             ("sm_100a", 256, "64, 96, 128"), ("sm_100a", 80, "64, 96, 128")])
def test_head_dims_are_the_varlen_kernels_of_the_target(target, d, dims):
    z = lambda *s: torch.zeros(*s, dtype=torch.bfloat16)  # noqa: E731
    with pytest.raises(LaunchError, match=rf"flash_attn_varlen: head_dim must be one of {dims} on {target} in the "
                                          rf"emulator, got {d}"):
        _call(_args(q=z(10, 4, d), k=z(12, 2, d), v=z(12, 2, d)), target)


def test_under_the_emulator_the_prefix_sums_must_be_on_the_cpu():
    # (a meta tensor would dispatch to the fake: the implementation itself sees the misplaced tensor)
    args = _args(cu_seqlens_q=torch.zeros(3, dtype=I32, device="meta"))
    with emulator(target="sm_90a"), pytest.raises(
            LaunchError, match=r"flash_attn_varlen: cu_seqlens_q must be a CPU tensor under the PTX emulator .*got "
                               r"device 'meta'"):
        varlen.flash_attn_varlen_op(**args)


def test_cpu_tensors_without_the_emulator_are_an_error():
    with pytest.raises(LaunchError, match=r"flash_attn_varlen: q must be a CUDA tensor, got device 'cpu'"):
        fa4_torch.flash_attn_varlen_func(**_args())


def test_a_dense_kernel_is_never_launched_on_packed_tensors():
    """A kernel without the packed parameters (a build that ignores ``varlen``) is refused: Unsupported,
    a NotImplementedError, not a launch that would read the wrong rows."""
    class Dense:
        params = [{"name": n} for n in ("q", "k", "v", "o", "lse", "seq_q", "seq_k", "num_heads", "scale_log2e",
                                        "write_lse")]
    config = AttentionConfig(target="sm_100a", head_dim=64, varlen=True)
    with pytest.raises(Unsupported, match=r"flash_attn_varlen: the AttentionConfig sm_100a bf16 d64 2Q varlen kernel "
                                          r"must take cu_seqlens_q \(the packed-sequence build\)"):
        varlen._kernels.checked(config, Dense())
    assert isinstance(Unsupported("x"), NotImplementedError)


def test_the_config_is_the_dense_ops_tile_with_varlen():
    # sm_90a d64: 3 consumer warpgroups non-causal, the short tile (128 keys) for causal up to 2048 keys
    c = varlen_config("sm_90a", "bf16", 64, False, 4, 5000)
    assert (c.varlen, c.num_q, c.block_n, c.group) == (True, 3, 0, 4)
    assert (varlen_config("sm_90a", "bf16", 64, True, 1, 2048).num_q,
            varlen_config("sm_90a", "bf16", 64, True, 1, 2048).block_n) == (2, 128)
    assert varlen_config("sm_100a", "fp16", 128, True, 2, 100) == AttentionConfig(
        target="sm_100a", dtype="fp16", head_dim=128, causal=True, group=2, varlen=True)


# -- no kernel needed: empty batches -----------------------------------------------------------------------------

def test_no_keys_at_all_gives_zeros_and_lse_plus_inf_without_a_launch():
    q = torch.randn(10, 4, 64).bfloat16()
    k = torch.zeros(0, 2, 64, dtype=torch.bfloat16)
    with emulator(target="sm_100a") as emu:
        out, lse = fa4_torch.flash_attn_varlen_func(q, k, k, _cu(0, 3, 10), _cu(0, 0, 0), 7, 0, causal=True,
                                                    return_softmax_lse=True)
    assert emu.launches == []
    assert out.shape == (10, 4, 64) and out.dtype == torch.bfloat16 and not out.any()
    assert lse.shape == (4, 10) and lse.dtype == torch.float32 and bool((lse == math.inf).all())


def test_no_queries_gives_empty_outputs():
    q = torch.zeros(0, 4, 64, dtype=torch.float16)
    k = torch.randn(12, 2, 64).half()
    with emulator(target="sm_90a") as emu:
        out, lse = torch.ops.fa4.flash_attn_varlen(q, k, k, _cu(0, 0, 0), _cu(0, 5, 12), 0, 7, None, False, True)
        out2 = fa4_torch.flash_attn_varlen_func(q, k, k, _cu(0, 0, 0), _cu(0, 5, 12), 0, 7)
    assert emu.launches == [] and out.shape == out2.shape == (0, 4, 64) and lse.shape == (4, 0)


# -- fake and torch.compile ---------------------------------------------------------------------------------------

def test_the_fake_gives_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, k = torch.empty(37, 8, 128, dtype=torch.float16), torch.empty(50, 2, 128, dtype=torch.float16)
        cu_q, cu_k = torch.empty(4, dtype=I32), torch.empty(4, dtype=I32)
        out, lse = torch.ops.fa4.flash_attn_varlen(q, k, k, cu_q, cu_k, 20, 30, None, True, True)
        out2, none = torch.ops.fa4.flash_attn_varlen(q, k, k, cu_q, cu_k, 20, 30)
        with pytest.raises(LaunchError, match="cu_seqlens_k dtype must be torch.int32, got torch.int64"):
            torch.ops.fa4.flash_attn_varlen(q, k, k, cu_q, cu_k.long(), 20, 30)
    assert tuple(out.shape) == tuple(out2.shape) == (37, 8, 128) and out.dtype == torch.float16
    assert tuple(lse.shape) == (8, 37) and lse.dtype == torch.float32 and tuple(none.shape) == (0,)


def test_torch_compile_fullgraph_traces_the_op():
    """Dynamo and AOT autograd trace the op through its fake (no graph break with fullgraph=True); the
    compiled call runs the op (here a batch without keys, which needs no kernel)."""
    torch._dynamo.reset()

    def f(q, k, v, cu_q, cu_k):
        out, lse = fa4_torch.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 7, 0, causal=True, return_softmax_lse=True)
        return out * 2, lse

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    q = torch.randn(10, 4, 64).bfloat16()
    k = torch.zeros(0, 2, 64, dtype=torch.bfloat16)
    with emulator(target="sm_100a"):
        out, lse = compiled(q, k, k, _cu(0, 3, 10), _cu(0, 0, 0))
    assert out.shape == (10, 4, 64) and not out.any() and bool((lse == math.inf).all())


# -- numerics in the emulator (need the packed kernels) ------------------------------------------------------------

def _packed_kernel(config: AttentionConfig) -> None:
    """Skip unless ``config``'s packed kernel builds: a build that raises NotImplementedError, or a kernel
    without ``cu_seqlens_q`` among its parameters (a build that does not know ``varlen`` yet), skips."""
    try:
        kernel = runtime.load("attention", config, device=runtime.EMULATOR)
    except NotImplementedError as exc:
        pytest.skip(f"the {config.describe()} kernel is not built yet: {exc}")
    if not any(p["name"] == "cu_seqlens_q" for p in kernel.params):
        pytest.skip(f"the {config.describe()} kernel does not take cu_seqlens_q yet (varlen kernels not built)")


def _torch(bits: np.ndarray, dtype: str) -> torch.Tensor:
    return torch.from_numpy(bits.view(np.int16)).view(DTYPES[dtype])


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


# (target, dtype, head dim, H, Hk, causal, q lengths, k lengths): empty sequences, Sq != Sk both ways, a
# sequence longer than one query tile, GQA
CASES = [
    ("sm_90a", "bf16", 64, 2, 1, True, (5, 0, 140, 17), (40, 3, 0, 200)),
    ("sm_90a", "fp16", 128, 2, 2, False, (33, 70), (100, 1)),
    ("sm_100a", "bf16", 64, 2, 2, True, (130, 9, 0), (60, 20, 5)),
    ("sm_100a", "fp16", 128, 4, 2, False, (3, 77), (0, 150)),
]


@pytest.mark.parametrize("target, dtype, d, h, hk, causal, lengths_q, lengths_k", sampled(CASES))
def test_the_op_in_the_emulator_matches_float64(target, dtype, d, h, hk, causal, lengths_q, lengths_k):
    max_q, max_k = max(lengths_q), max(lengths_k)
    _packed_kernel(varlen_config(target, dtype, d, causal, h // hk, max_k))
    rng = np.random.default_rng(len(lengths_q) + d)
    q, k, v, cu_q, cu_k = packed_batch(rng, lengths_q, lengths_k, h, hk, d, dtype)
    scale = float(rng.uniform(0.05, 0.2))
    with emulator(target=target, seed=1) as emu:
        out, lse = fa4_torch.flash_attn_varlen_func(
            _torch(q, dtype), _torch(k, dtype), _torch(v, dtype), torch.from_numpy(cu_q), torch.from_numpy(cu_k),
            max_q, max_k, softmax_scale=scale, causal=causal, return_softmax_lse=True)
    assert [name for name, _ in emu.launches] == ["attention"]
    assert out.shape == (q.shape[0], h, d) and lse.shape == (h, q.shape[0])
    qf, kf, vf = (reference.to_f64(t, dtype) for t in (q, k, v))
    ref, ref_lse = reference.varlen_attention(qf, kf, vf, cu_q, cu_k, causal, scale)
    yard, _ = reference.varlen_attention(qf, kf, vf, cu_q, cu_k, causal, scale, dtype=dtype)
    result = reference.compare(_bits(out), ref, yard, dtype)
    assert result.ok and result.unwritten == 0, result.summary()
    lse = lse.numpy()
    empty = np.isinf(ref_lse)
    assert np.array_equal(np.isinf(lse) & (lse > 0), empty), "LSE must be +inf exactly on the rows that see no key"
    assert not out.float().numpy().transpose(1, 0, 2)[empty].any(), "rows that see no key must be 0"
    if (~empty).any():
        assert float(np.abs(lse[~empty] - ref_lse[~empty]).max()) <= reference.lse_tolerance(ref_lse[~empty])


# (target, dtype, head dim, H, Hk, causal, q lengths, k lengths, page size): packed queries over a paged cache
PAGED_CASES = [
    ("sm_90a", "bf16", 64, 2, 1, True, (5, 0, 70, 17), (40, 3, 0, 150), 16),
    ("sm_90a", "fp16", 128, 4, 2, False, (33, 9), (100, 1), 64),
    ("sm_90a", "bf16", 128, 4, 1, True, (20, 1, 0), (70, 9, 30), 24),  # pages of 24: gathered (page_gather)
    ("sm_90a", "fp16", 256, 2, 2, False, (7, 40), (0, 201), 1),  # pages of 1 key, head dim 256: gathered
    ("sm_100a", "bf16", 64, 2, 2, True, (60, 9, 0), (60, 20, 5), 64),
    ("sm_100a", "fp16", 128, 2, 2, False, (3, 40), (0, 150), 16),
    ("sm_100a", "bf16", 64, 4, 1, True, (20, 1, 0), (70, 9, 30), 48),  # pages of 48: gathered (page_gather)
]


@pytest.mark.parametrize("target, dtype, d, h, hk, causal, lengths_q, lengths_k, page", sampled(PAGED_CASES))
def test_packed_queries_over_a_paged_cache_match_float64(target, dtype, d, h, hk, causal, lengths_q, lengths_k,
                                                         page):
    """``block_table``: k and v are caches (num_pages, page_size, Hk, D) and sequence b's keys its first
    cu_seqlens_k[b + 1] - cu_seqlens_k[b] positions in its pages (FlashAttention's paged varlen)."""
    max_q, max_k = max(lengths_q), max(lengths_k)
    rng = np.random.default_rng(len(lengths_q) + d + page)
    q, _, _, cu_q, _ = packed_batch(rng, lengths_q, (0,) * len(lengths_q), h, hk, d, dtype)
    k_cache, v_cache, table, used = paged_batch(rng, lengths_k, page, hk, d, dtype)
    cu_k = np.concatenate([[0], np.cumsum(used)]).astype(np.int32)
    scale = float(rng.uniform(0.05, 0.2))
    with emulator(target=target, seed=1) as emu:
        out, lse = fa4_torch.flash_attn_varlen_func(
            _torch(q, dtype), _torch(k_cache, dtype), _torch(v_cache, dtype), torch.from_numpy(cu_q),
            torch.from_numpy(cu_k), max_q, max_k, softmax_scale=scale, causal=causal, return_softmax_lse=True,
            block_table=torch.from_numpy(table))
    assert [name for name, _ in emu.launches] == ["attention"]
    keys, _ = reference.paged_keys(k_cache, table, used)
    values, _ = reference.paged_keys(v_cache, table, used)
    config = AttentionConfig(target=target, dtype=dtype, head_dim=d, causal=causal)  # _compare reads dtype, causal
    _compare(config, q, keys, values, cu_q, cu_k, scale, _bits(out), lse.numpy())


def test_the_compiled_op_in_the_emulator_matches_the_eager_op():
    target, dtype, d, causal = "sm_100a", "bf16", 64, True
    lengths_q, lengths_k = (20, 0, 70), (30, 5, 64)
    _packed_kernel(varlen_config(target, dtype, d, causal, 1, max(lengths_k)))
    q, k, v, cu_q, cu_k = packed_batch(np.random.default_rng(5), lengths_q, lengths_k, 2, 2, d, dtype)
    q, k, v, cu_q, cu_k = (*(_torch(t, dtype) for t in (q, k, v)), torch.from_numpy(cu_q), torch.from_numpy(cu_k))
    torch._dynamo.reset()
    f = lambda *a: fa4_torch.flash_attn_varlen_func(*a, 70, 64, causal=True)  # noqa: E731
    with emulator(target=target):
        eager = f(q, k, v, cu_q, cu_k)
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, cu_q, cu_k)
    assert torch.equal(eager, compiled)


def test_a_decreasing_step_is_found_even_where_int32_would_wrap():
    # 2^31 - 1 -> -5: the int32 difference wraps to a positive length; the checks subtract in int64
    big = 2 ** 31 - 1
    with pytest.raises(LaunchError, match=rf"cu_seqlens_q must be non-decreasing, got cu_seqlens_q\[2\] = -5 < "
                                          rf"cu_seqlens_q\[1\] = {big}"):
        _call(_args(cu_seqlens_q=_cu(0, big, -5, 10), cu_seqlens_k=_cu(0, 5, 6, 12), max_seqlen_q=big))


def test_checked_prefix_sums_are_remembered_by_tensor_and_version():
    """The host copy is skipped only for the very tensors of the last checked call, unmodified, with the same
    rows and bounds: an in-place write, another tensor with equal values, or other bounds check again."""
    checked = serving.Checked()
    cu_q, cu_k = _cu(0, 3, 10), _cu(0, 5, 12)
    bounds = (10, 12, 7, 7)
    assert not checked.seen((cu_q, cu_k), bounds)
    checked.remember((cu_q, cu_k), bounds)
    assert checked.seen((cu_q, cu_k), bounds)
    assert not checked.seen((cu_q, cu_k), (10, 12, 7, 8))
    assert not checked.seen((cu_q.clone(), cu_k), bounds)
    assert not checked.seen((cu_q, None), bounds)
    cu_k[1] = 6  # torch bumps the version of an in-place write
    assert not checked.seen((cu_q, cu_k), bounds)
    checked.remember((cu_q, cu_k), bounds)
    del cu_q  # a freed tensor's entry never matches a new tensor at the same address
    assert not checked.seen((_cu(0, 3, 10), cu_k), bounds)


def test_an_in_place_change_of_checked_prefix_sums_is_checked_again():
    """A call refused after its prefix sums were changed in place since an accepted call with the same tensors."""
    args = _args()
    varlen._checked.remember((args["cu_seqlens_q"], args["cu_seqlens_k"]), (10, 12, 7, 7))
    args["cu_seqlens_q"][2] = 9
    with pytest.raises(LaunchError, match=r"cu_seqlens_q\[-1\] must be the rows of q \(10\), got 9"):
        _call(args)
