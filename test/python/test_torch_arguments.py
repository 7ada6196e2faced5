"""Arguments of the torch ops that are not what they must be (the torch-op fuzzer's findings, test/fuzz/fuzz_torch.py):
None where a tensor is required (torch's schema check lets it through), a scale that is not a number, and scales whose
product overflows. Each is an fa4 LaunchError naming the argument, from the op and from its fake; no GPU needed."""

from __future__ import annotations

import importlib

import pytest

torch = pytest.importorskip("torch")

import fa4_mlir.torch as fa4_torch  # noqa: E402
from fa4_mlir.errors import LaunchError  # noqa: E402
from fa4_mlir.torch import attention, kvcache, mla, ops, varlen  # noqa: E402

mla_prefill = importlib.import_module("fa4_mlir.torch.mla_prefill")  # the package exports the function by that name


def _t(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


Q, K, V = _t(1, 8, 2, 64), _t(1, 8, 2, 64), _t(1, 8, 2, 64)
CU = torch.tensor([0, 8], dtype=torch.int32)
LATENT = (_t(1, 2, 16, 512), _t(1, 2, 16, 64), _t(1, 9, 512), _t(1, 9, 64))
PREFILL = (_t(1, 8, 2, 128), _t(1, 8, 2, 64), _t(1, 8, 2, 128), _t(1, 8, 1, 64), _t(1, 8, 2, 128))
CACHE = (_t(1, 1, 8, 64), _t(2, 64, 2, 64), _t(2, 64, 2, 64))


@pytest.mark.parametrize("call, message", [
    (lambda: fa4_torch.flash_attention(None, K, V), r"flash_attention: q must be a torch.Tensor, got NoneType"),
    (lambda: torch.ops.fa4.flash_attention(Q, None, V), r"flash_attention: k must be a torch.Tensor, got NoneType"),
    (lambda: attention._flash_attention_fake(Q, K, None), r"flash_attention: v must be a torch.Tensor, got NoneType"),
    (lambda: fa4_torch.gemm_residual(_t(8, 8), None, _t(8, 8)),
     r"gemm_residual: b must be a torch.Tensor, got NoneType"),
    (lambda: ops._gemm_residual_fake(_t(8, 8), _t(8, 8), None),
     r"gemm_residual: c must be a torch.Tensor, got NoneType"),
    (lambda: fa4_torch.copy_pipeline(None, 1.0), r"copy_pipeline: x must be a torch.Tensor, got NoneType"),
    (lambda: fa4_torch.flash_attn_with_kvcache(CACHE[0], None, CACHE[2]),
     r"flash_attn_with_kvcache: k_cache must be a torch.Tensor, got NoneType"),
    (lambda: kvcache._flash_attn_with_kvcache_fake(CACHE[0], CACHE[1], None),
     r"flash_attn_with_kvcache: v_cache must be a torch.Tensor, got NoneType"),
    (lambda: fa4_torch.mla_attention(LATENT[0], LATENT[1], None, LATENT[3]),
     r"mla_attention: kv_latent must be a torch.Tensor, got NoneType"),
    (lambda: mla._mla_attention_fake(LATENT[0], None, LATENT[2], LATENT[3]),
     r"mla_attention: q_rope must be a torch.Tensor, got NoneType"),
    (lambda: fa4_torch.mla_prefill(*PREFILL[:4], None), r"mla_prefill: v must be a torch.Tensor, got NoneType"),
    (lambda: mla_prefill._mla_prefill_fake(*PREFILL[:3], None, PREFILL[4]),
     r"mla_prefill: k_rope must be a torch.Tensor, got NoneType"),
    (lambda: fa4_torch.flash_attn_varlen_func(Q[0], K[0], V[0], None, CU, 8, 8),
     r"flash_attn_varlen: cu_seqlens_q must be a torch.Tensor, got NoneType"),
    (lambda: varlen._flash_attn_varlen_fake(Q[0], K[0], V[0], CU, None, 8, 8),
     r"flash_attn_varlen: cu_seqlens_k must be a torch.Tensor, got NoneType"),
    (lambda: varlen._flash_attn_varlen_fake(None, K[0], V[0], CU, CU, 8, 8),
     r"flash_attn_varlen: q must be a torch.Tensor, got NoneType"),
])
def test_a_missing_tensor_is_named(call, message):
    with pytest.raises(LaunchError, match=message):
        call()


F8 = torch.float8_e4m3fn


@pytest.mark.parametrize("kwargs, message", [
    ({"q_scale": "2"}, r"flash_attention: q_scale must be a float, got str"),
    ({"k_scale": True}, r"flash_attention: k_scale must be a float, got bool"),
    ({"q_scale": -1.0}, r"flash_attention: q_scale must be finite and > 0, got -1.0"),
    ({"q_scale": 1e200, "k_scale": 1e200},
     r"flash_attention: q_scale \* k_scale must be finite and > 0 \(it scales the softmax\), "
     r"got 1e\+200 \* 1e\+200 = inf"),
    ({"v_scale": "x", "q_scale": torch.ones(1, 2, 8)}, r"flash_attention: v_scale must be a float, got str"),
])
def test_fp8_scales_must_be_positive_numbers(kwargs, message):
    q, k, v = (t.to(F8) for t in (Q, K, V))
    with pytest.raises(LaunchError, match=message):
        if "v_scale" in kwargs:  # reached in the op: the per-token path goes through the dispatcher
            attention._scales("fp8_e4m3", kwargs["q_scale"], None, kwargs["v_scale"], ((1, 2, 8), (1, 2, 8)))
        else:
            fa4_torch.flash_attention(q, k, v, **kwargs)


@pytest.mark.parametrize("scales, message", [
    ((True, None, None), r"mla_attention: q_scale must be a float, got bool"),
    ((None, None, torch.ones(())), r"mla_attention: v_scale must be a float, got Tensor"),
])
def test_mla_scales_must_be_numbers(scales, message):
    with pytest.raises(LaunchError, match=message):
        mla.check_scales("fp8_e4m3", *scales)


def test_the_fuzzer_finds_nothing_on_a_fixed_slice():
    """The torch-op fuzzer's CI slice (test/fuzz/fuzz_torch.py): 1000 mutated calls, every one ends in an accepted
    call, torch's schema error or an fa4 error naming the argument."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
    import fuzz_torch

    findings = [(i, verdict) for i in range(1000) for _, verdict, _ in [fuzz_torch.run_case(19, i)] if verdict != "ok"]
    assert findings == []


def test_the_fuzzers_classifier_flags_an_error_from_inside_fa4():
    """A non-fa4 exception raised in fa4 code is a finding; a clean fa4 error, the stop at the kernel and an
    exception with no fa4 frame are not."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
    import fuzz_torch

    def raised(fn):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001
            return exc
        raise AssertionError("no exception")

    from fa4_mlir.torch.tensors import check_tma_operand

    inside = raised(lambda: check_tma_operand("op", "x", None))  # an unchecked None: AttributeError in fa4 code
    assert fuzz_torch.classify(inside).startswith("AttributeError at torch/tensors.py:")
    assert fuzz_torch.classify(raised(lambda: ops._check_shape(torch.zeros(3)))) == "ok"  # LaunchError with a message
    assert fuzz_torch.classify(LaunchError("")) == "fa4 error without a message"
    assert fuzz_torch.classify(fuzz_torch.Accepted("attention")) == "ok"
    assert fuzz_torch.classify(raised(lambda: torch.zeros(2) + torch.zeros(3))) == "ok"  # no fa4 frame
