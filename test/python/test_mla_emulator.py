"""The MLA forward (sm_90a) in the PTX emulator (race checks on) against the float64 reference, within
twice the error of the same computation at the kernel's precision (``fa4_mlir.reference``): the
absorbed form's decode shapes (Sq 1..3, 16-64 heads packed into a tile's rows) and prefill-like ones
(Sq = Sk ~ 130, few heads), the prefill form (192 / 128, GQA), odd lengths, causal and not, every
output element written; and ``torch.ops.fa4.mla_attention``: its
emulator path (sm_90a and sm_100a; on sm_100a also an fp8 latent with a bf16 rope), fake implementation
and errors. Small shapes: each case compiles (once per config in a
fresh cache, a few seconds) and emulates a few CTAs."""

from __future__ import annotations

import math

import ci_sample
import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs.mla import MLAConfig
from fa4_mlir.torch.mla import tile_heads

# (dtype, causal, batch, seq_q, seq_k, heads): decode (one position of 16 heads: a 64-row tile holds 4
# positions; 3 positions of 32 heads, causal; 2 positions of 64 heads: two CTAs) and prefill-like
# (130 positions of 2 heads: 32 positions a tile; 1 head: 64), ragged key tiles, several ring wraps.
CASES = [("bf16", False, 2, 1, 77, 16), ("bf16", True, 1, 3, 100, 32), ("fp16", False, 1, 2, 45, 64),
         ("bf16", True, 1, 130, 130, 2), ("fp16", False, 1, 130, 131, 1)]


def _inputs(rng, b, sq, sk, h, dtype):
    shapes = ((b, sq, h, 512), (b, sq, h, 64), (b, sk, 512), (b, sk, 64))  # q_nope, q_rope, kv_latent, k_rope
    return tuple(reference.random_bits(rng, shape, dtype, 1.0) for shape in shapes)


def _check(inputs, causal, scale, out, lse, dtype, what):
    values = [reference.to_f64(t, dtype) for t in inputs]
    ref, ref_lse = reference.mla_attention(*values, causal, scale)
    yard = reference.mla_attention_yardstick(*values, causal, scale, dtype)
    result = reference.compare(out, ref, yard, dtype)
    assert result.ok and result.unwritten == 0, f"{what}: {result.summary()}"
    if lse is not None:
        err = float(np.abs(lse - ref_lse).max())
        assert err <= reference.lse_tolerance(ref_lse), f"{what}: LSE error {err}"


# CI: every other case (the H100 runs this sm_90a kernel, test/gpu/test_mla_gpu.py); FA4_EMU_FULL_MATRIX=1: all
@pytest.mark.parametrize("dtype, causal, b, sq, sk, h", ci_sample.in_ci(CASES, range(0, len(CASES), 2)))
def test_matches_f64_reference_in_the_emulator(dtype, causal, b, sq, sk, h):
    """Through the launch the op makes, into a NaN-poisoned O one position longer than Sq: every row
    written, the guard position untouched, the LSE per (batch, head, position)."""
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_mla_attention

    config = MLAConfig(dtype=dtype, causal=causal, tile_heads=tile_heads(h))
    kernel = runtime.load("mla-attention", config, device="emulator")
    rng = np.random.default_rng(sq * sk + h)
    inputs = _inputs(rng, b, sq, sk, h, dtype)
    poison = reference.POISON[dtype]
    o = np.full((b, sq + 1, h, 512), poison, np.uint16)
    lse = np.full((b, h, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(576)
    launch_mla_attention(kernel, config, *inputs, o[:, :sq], lse, scale, seed=sq + sk)
    what = f"{dtype} causal={causal} B{b} Sq{sq} Sk{sk} H{h}"
    assert (o[:, sq] == poison).all(), f"{what}: the kernel wrote past O"
    _check(inputs, causal, scale, o[:, :sq], lse, dtype, what)


def test_split_kv_matches_f64_reference_in_the_emulator():
    """Split KV (decode over a cache): 3 key ranges of 2, 2 and 1 tiles (the last one ragged), fp32
    partials merged by the attention-combine kernel (16 rows: 4 CTAs of 4 warps); O and the LSE against
    the reference."""
    torch = pytest.importorskip("torch")
    from fa4_mlir import runtime
    from fa4_mlir.torch import emulator
    from fa4_mlir.torch.mla import launch

    config = MLAConfig(tile_heads=16, split_kv=True)
    kernel = runtime.load("mla-attention", config, device="emulator")
    inputs = _inputs(np.random.default_rng(5), 1, 1, 150, 16, "bf16")
    out = torch.full((1, 1, 16, 512), math.nan, dtype=torch.bfloat16)
    lse = torch.full((1, 16, 1), math.nan)
    with emulator(target="sm_90a", seed=1) as emu:
        launch(config, kernel, *(_torch(t, "bf16") for t in inputs), out, lse, 0.06, emulated=emu, splits=3)
    assert [(name, stats.ctas) for name, stats in emu.launches] == [("mla_attention", 3), ("attention_combine", 4)]
    _check(inputs, False, 0.06, out.view(torch.int16).numpy().view(np.uint16), lse.numpy(), "bf16", "split KV")


# prefill form (dtype, causal, batch, seq_q, seq_k, heads, group): 128-row CTAs, ragged both ways, GQA
PREFILL_CASES = [("bf16", True, 1, 130, 150, 2, 1), ("fp16", False, 2, 77, 100, 4, 2)]


@pytest.mark.parametrize("dtype, causal, b, sq, sk, h, group", PREFILL_CASES)
def test_prefill_form_matches_f64_reference_in_the_emulator(dtype, causal, b, sq, sk, h, group):
    """q = [q_nope | q_rope] (192) against k = [k_nope | k_rope], v (128): attention of the
    concatenations, every row written (NaN-poisoned O), the LSE."""
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_mla_prefill

    config = MLAConfig(form="prefill", dtype=dtype, causal=causal, group=group, block_n=64)
    kernel = runtime.load("mla-attention", config, device="emulator")
    rng = np.random.default_rng(sq + sk)
    hk = h // group
    q_nope, q_rope = (reference.random_bits(rng, (b, sq, h, d), dtype, 1.0) for d in (128, 64))
    k_nope, k_rope, v = (reference.random_bits(rng, (b, sk, hk, d), dtype, 1.0) for d in (128, 64, 128))
    o = np.full((b, sq, h, 128), reference.POISON[dtype], np.uint16)
    lse = np.full((b, h, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(192)
    launch_mla_prefill(kernel, config, q_nope, q_rope, k_nope, k_rope, v, o, lse, scale, seed=sk)
    q = np.concatenate([reference.to_f64(q_nope, dtype), reference.to_f64(q_rope, dtype)], axis=-1)
    k = np.concatenate([reference.to_f64(k_nope, dtype), reference.to_f64(k_rope, dtype)], axis=-1)
    vf = reference.to_f64(v, dtype)
    ref, ref_lse = reference.attention(q, k, vf, causal, scale)
    result = reference.compare(o, ref, reference.attention_yardstick(q, k, vf, causal, scale, dtype), dtype)
    assert result.ok and result.unwritten == 0, result.summary()
    assert float(np.abs(lse - ref_lse).max()) <= reference.lse_tolerance(ref_lse)


def _torch(bits: np.ndarray, dtype: str):
    import torch

    return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(
        {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype])


def test_torch_op_in_the_emulator():
    """``torch.ops.fa4.mla_attention`` on CPU tensors: the default scale 1 / sqrt(576), the LSE, a strided
    kv_latent (a slice of a wider cache row, as a [kv_c | k_pe] cache holds it) and no LSE. (k_rope is its
    own tensor here: the emulator places views of one torch buffer that overlap without one containing
    the other as one allocation, the first, which the second's reads then overrun.)"""
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft

    rng = np.random.default_rng(7)
    q_nope, q_rope, kv, k_rope = _inputs(rng, 1, 1, 70, 16, "bf16")
    cache = _torch(np.concatenate([kv, k_rope], axis=-1), "bf16")  # (B, Sk, 576): kv_c then k_pe
    args = (_torch(q_nope, "bf16"), _torch(q_rope, "bf16"), cache[..., :512], _torch(k_rope, "bf16"))
    with ft.emulator(target="sm_90a", seed=3) as emu:
        out, lse = ft.mla_attention(*args, return_lse=True)
        plain = torch.ops.fa4.mla_attention(*args, True, 0.1, False)
    assert [name for name, _ in emu.launches] == ["mla_attention", "mla_attention"]
    assert out.shape == (1, 1, 16, 512) and out.dtype == torch.bfloat16 and lse.shape == (1, 16, 1)
    bits = out.view(torch.int16).numpy().view(np.uint16)
    _check((q_nope, q_rope, kv, k_rope), False, 1 / math.sqrt(576), bits, lse.numpy(), "bf16", "op")
    assert plain[1].shape == (0,)
    _check((q_nope, q_rope, kv, k_rope), True, 0.1, plain[0].view(torch.int16).numpy().view(np.uint16), None,
           "bf16", "op causal")


def test_fake_implementation_and_empty_inputs():
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 3, 128, 512, dtype=torch.bfloat16)
        qr = torch.empty(2, 3, 128, 64, dtype=torch.bfloat16)
        kv, kr = torch.empty(2, 50, 512, dtype=torch.bfloat16), torch.empty(2, 50, 64, dtype=torch.bfloat16)
        out, lse = torch.ops.fa4.mla_attention(q, qr, kv, kr, False, None, True)
        assert out.shape == (2, 3, 128, 512) and lse.shape == (2, 128, 3) and lse.dtype == torch.float32
    q, qr = torch.randn(1, 2, 4, 512).bfloat16(), torch.randn(1, 2, 4, 64).bfloat16()
    with ft.emulator(target="sm_90a") as emu:
        out, lse = ft.mla_attention(q, qr, torch.empty(1, 0, 512).bfloat16(), torch.empty(1, 0, 64).bfloat16(),
                                    return_lse=True)
        assert ft.mla_attention(q[:0], qr[:0], torch.empty(0, 5, 512).bfloat16(),
                                torch.empty(0, 5, 64).bfloat16()).shape == (0, 2, 4, 512)
    assert torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all() and emu.launches == []


def test_errors_name_what_is_wrong():
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft
    from fa4_mlir.errors import LaunchError

    q, qr = torch.randn(1, 2, 4, 512).bfloat16(), torch.randn(1, 2, 4, 64).bfloat16()
    kv, kr = torch.randn(1, 9, 512).bfloat16(), torch.randn(1, 9, 64).bfloat16()
    wide = torch.randn(1, 2, 4, 516).bfloat16()[..., :512]  # heads 1032 bytes apart: not a multiple of 16
    shifted = torch.randn(1 * 9 * 512 + 1).bfloat16()[1:].view(1, 9, 512)  # starts 2 bytes past alignment
    cases = [
        ((q[0], qr, kv, kr), {}, r"mla_attention: q_nope must be 4-D \(batch, seqlen_q, heads, 512\), got shape "
                                 r"\(2, 4, 512\)"),
        ((q, qr, kv[None], kr), {}, r"kv_latent must be 3-D \(batch, seqlen_k, 512\), got shape \(1, 1, 9, 512\)"),
        ((q, qr, kv, kr[0]), {}, r"k_rope must be 3-D"),
        ((q, qr[..., :32], kv, kr), {}, r"q_rope must be \(batch, seqlen_q, heads, 64\) = \(1, 2, 4, 64\), got "
                                        r"shape \(1, 2, 4, 32\)"),
        ((q[..., :256], qr, kv, kr), {}, r"q_nope must be \(batch, seqlen_q, heads, 512\) = \(1, 2, 4, 512\)"),
        ((q, qr[:, :, :2], kv, kr), {}, r"q_rope must be .* = \(1, 2, 4, 64\), got shape \(1, 2, 2, 64\)"),
        ((q, qr, kv, kr[:, :5]), {}, r"k_rope must be \(batch, seqlen_k, 64\) = \(1, 9, 64\), got shape \(1, 5, 64\)"),
        ((q, qr, torch.cat([kv, kv]), kr), {}, r"kv_latent must be .* = \(1, 9, 512\), got shape \(2, 9, 512\)"),
        ((q.float(), qr, kv, kr), {}, r"mla_attention: q_nope dtype must be one of torch.bfloat16, torch.float16, "
                                      r"torch.float8_e4m3fn, got torch.float32"),
        ((q, qr, kv.half(), kr), {}, r"must have one dtype, got torch.bfloat16, torch.bfloat16, torch.float16"),
        ((q.transpose(2, 3).contiguous().transpose(2, 3), qr, kv, kr), {},
         r"q_nope must have a unit innermost stride"),
        ((wide, qr, kv, kr), {}, r"q_nope strides must be multiples of 8 elements \(16 bytes\), got strides "
                                 r"\(4128, 2064, 516, 1\)"),
        ((q, qr, shifted, kr), {}, r"kv_latent must start 16-byte aligned"),
        ((q, qr, kv, kr), {"softmax_scale": 0.0}, r"softmax_scale must be finite and > 0, got 0.0"),
        ((q, qr, kv, kr), {"softmax_scale": math.inf}, r"softmax_scale must be finite and > 0, got inf"),
    ]
    with ft.emulator(target="sm_90a") as emu:
        for args, kwargs, message in cases:
            with pytest.raises(LaunchError, match=message):
                ft.mla_attention(*args, **kwargs)
    assert emu.launches == []
    with pytest.raises(LaunchError, match=r"mla_attention: q_nope must be a CUDA tensor, got device 'cpu'"):
        ft.mla_attention(q, qr, kv, kr)
    with ft.emulator(target="sm_100a"), pytest.raises(
            LaunchError, match=r"mla_attention: q_rope must be 4-D"):  # sm_100a: the same checks
        ft.mla_attention(q, qr[0], kv, kr)


def test_torch_op_runs_the_sm100a_pair_kernel_in_the_emulator():
    """On sm_100a the op runs the depth-512 pair kernel with a rope chunk (``MLAConfig(target="sm_100a",
    tile_heads=H)``): a decode step of 16 heads, causal with two positions, and the LSE."""
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft

    rng = np.random.default_rng(11)
    inputs = _inputs(rng, 1, 2, 90, 16, "bf16")
    with ft.emulator(target="sm_100a", seed=2) as emu:
        out, lse = ft.mla_attention(*(_torch(x, "bf16") for x in inputs), causal=True, return_lse=True)
    assert [name for name, _ in emu.launches] == ["mla_attention"]
    _check(inputs, True, 1 / math.sqrt(576), out.view(torch.int16).numpy().view(np.uint16), lse.numpy(), "bf16",
           "sm_100a op")


# -- fp8: an e4m3 latent with tensor-wise scales and a bf16 rope (sm_100a) ------------------------------------

def _fp8(gen, shape, scale):
    """e4m3 values whose dequantized values (times ``scale``) are about N(0, 1)."""
    import torch

    return (torch.randn(shape, generator=gen, dtype=torch.float64) / scale).clamp(-448, 448).to(torch.float8_e4m3fn)


def test_torch_op_runs_an_fp8_latent_on_sm100a_in_the_emulator():
    """fp8 q_nope and kv_latent with q_scale, k_scale, v_scale (distinct) and bf16 q_rope / k_rope, a decode
    step (Sq 2, 16 heads, 100 keys): the bf16 output and the LSE against float64 attention of the dequantized
    inputs, S = scale (q_scale k_scale q_nope kv' + q_rope k_rope') and V = v_scale kv, within twice the
    error of ``reference.mla_attention_fp8_yardstick`` (P 2^p_bias rounded to e4m3, bf16 output)."""
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft
    from fa4_mlir.configs.depth512 import Depth512Config

    b, sq, sk, h = 1, 2, 100, 16
    gen = torch.Generator().manual_seed(5)
    qs, ks, vs = (float(np.float32(x)) for x in (0.75, 0.04, 2.5))
    q_nope, kv = _fp8(gen, (b, sq, h, 512), qs), _fp8(gen, (b, sk, 512), ks)
    q_rope = torch.randn((b, sq, h, 64), generator=gen).bfloat16()
    k_rope = torch.randn((b, sk, 64), generator=gen).bfloat16()
    scale = 1 / math.sqrt(576)
    with ft.emulator(target="sm_100a", seed=1) as emu:
        out, lse = ft.mla_attention(q_nope, q_rope, kv, k_rope, return_lse=True, q_scale=qs, k_scale=ks, v_scale=vs)
    assert [name for name, _ in emu.launches] == ["mla_attention"]
    assert out.dtype == torch.bfloat16 and out.shape == (b, sq, h, 512) and lse.shape == (b, h, sq)
    latent = reference.e4m3_values(kv.view(torch.uint8).numpy())
    # the MLA functions take one latent as K and V: give them V = v_scale kv and fold k_scale / v_scale into
    # q_nope, which leaves the logits q_scale k_scale q_nope kv' (in float64)
    inputs = (reference.e4m3_values(q_nope.view(torch.uint8).numpy()) * (qs * ks / vs), q_rope.double().numpy(),
              latent * vs, k_rope.double().numpy())
    ref, ref_lse = reference.mla_attention(*inputs, False, scale)
    yard = reference.mla_attention_fp8_yardstick(*inputs, False, scale, Depth512Config(dtype="fp8_e4m3").p_bias)
    result = reference.compare(out.view(torch.int16).numpy().view(np.uint16), ref, yard, "bf16")
    print(result.summary())
    assert result.ok and result.unwritten == 0, result.summary()
    err = float(np.abs(lse.numpy() - ref_lse).max())
    print(f"LSE error {err:.3g} (tolerance {reference.lse_tolerance(ref_lse):.3g})")
    assert err <= reference.lse_tolerance(ref_lse), f"LSE error {err}"


def test_fp8_errors_and_fake():
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fa4_mlir.errors import LaunchError
    from fa4_mlir.torch.mla import _config, launch

    f8 = torch.float8_e4m3fn
    q, qr = torch.randn(1, 2, 4, 512).to(f8), torch.randn(1, 2, 4, 64).bfloat16()
    kv, kr = torch.randn(1, 9, 512).to(f8), torch.randn(1, 9, 64).bfloat16()
    bq, bkv = q.bfloat16(), kv.bfloat16()
    cases = [
        ("sm_100a", (bq, qr, bkv, kr), {"q_scale": 0.5}, r"mla_attention: q_scale must be None for bf16 inputs "
                                                         r"\(scales dequantize fp8 inputs\), got 0.5"),
        ("sm_100a", (bq.half(), qr.half(), bkv.half(), kr.half()), {"v_scale": 2.0},
         r"mla_attention: v_scale must be None for fp16 inputs .* got 2.0"),
        ("sm_90a", (q, qr, kv, kr), {}, r"mla_attention: q_nope dtype must be torch.bfloat16 or torch.float16 on "
                                        r"sm_90a \(fp8 runs on sm_100a\), got torch.float8_e4m3fn"),
        ("sm_100a", (q, qr.half(), kv, kr), {}, r"mla_attention: q_rope dtype must be torch.bfloat16 with fp8 "
                                                r"inputs \(rescaled by 1 / \(q_scale k_scale\), which could overflow "
                                                r"fp16\), got torch.float16"),
        ("sm_100a", (q, qr, kv, kr.half()), {}, r"k_rope dtype must be torch.bfloat16 with fp8 inputs .* got "
                                                r"torch.float16"),
        ("sm_100a", (q, qr, bkv, kr), {}, r"mla_attention: kv_latent dtype must be torch.float8_e4m3fn with an fp8 "
                                          r"q_nope, got torch.bfloat16"),
        ("sm_100a", (q, qr, kv, kr), {"q_scale": 0.0}, r"mla_attention: q_scale must be finite and > 0, got 0.0"),
        ("sm_100a", (q, qr, kv, kr), {"k_scale": -1.0}, r"mla_attention: k_scale must be finite and > 0, got -1.0"),
        ("sm_100a", (q, qr, kv, kr), {"v_scale": math.nan}, r"mla_attention: v_scale must be finite and > 0, got nan"),
    ]
    for target, args, kwargs, message in cases:
        with ft.emulator(target=target) as emu, pytest.raises(LaunchError, match=message):
            ft.mla_attention(*args, **kwargs)
        assert emu.launches == []
    config = _config("sm_100a", "fp8_e4m3", False, 4, False)
    with pytest.raises(LaunchError, match=r"mla_attention: v_scale must be given exactly for fp8 kernels, got None "
                                          r"for MLAConfig sm_100a fp8_e4m3 \(bf16 rope\)"):
        launch(config, None, q, qr, kv, kr, None, None, 0.1)
    with FakeTensorMode():
        fq, fqr = torch.empty(2, 3, 16, 512, dtype=f8), torch.empty(2, 3, 16, 64, dtype=torch.bfloat16)
        fkv, fkr = torch.empty(2, 50, 512, dtype=f8), torch.empty(2, 50, 64, dtype=torch.bfloat16)
        out, lse = torch.ops.fa4.mla_attention(fq, fqr, fkv, fkr, False, None, True, 0.5, 0.1, 2.0)
        assert out.shape == (2, 3, 16, 512) and out.dtype == torch.bfloat16 and lse.shape == (2, 16, 3)
        with pytest.raises(LaunchError, match=r"mla_attention: k_scale must be finite and > 0, got 0.0"):
            torch.ops.fa4.mla_attention(fq, fqr, fkv, fkr, False, None, True, None, 0.0, None)
