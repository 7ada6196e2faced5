"""fp8 e4m3 attention at head dims 256 and 512 on sm_100a (the depth-512 pair kernel,
``fa4_mlir.kernels.attention.depth512``) in the PTX emulator, race checks on: plain attention through
``torch.ops.fa4.flash_attention`` on CPU tensors (causal and not, GQA fused and not, odd lengths,
tensor-wise Q/K/V scales, bf16 output) and the absorbed MLA with an fp8 latent and a bf16 rope through
the runtime (``mla.build``).

The reference is float64 attention of the dequantized inputs; the kernel's max and rms errors must be
at most twice those of ``reference.attention_fp8_yardstick`` (MLA: ``mla_attention_fp8_yardstick``) with
the kernel's exp2 bias (``Depth512Config.p_bias``, 6: P = exp(S - max) 2^6 rounded to e4m3) plus 1e-6
max|ref| (``reference.compare``); the LSE within ``reference.lse_tolerance``. Also: the new configs
through the whole compiler (protocol verifier, ptxas, zero spills), their PTX's MMA kinds, and the new
errors. The default (CI) run takes two plain cases, one MLA case and three compiles (about a minute);
FA4_EMU_FULL_MATRIX=1 runs every case and compiles every config.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile

import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.depth512 import Depth512Config
from fa4_mlir.errors import ConfigError

torch = pytest.importorskip("torch")

FULL = os.environ.get("FA4_EMU_FULL_MATRIX", "0") == "1"
# (batch, seq_q, seq_k, heads, kv heads, head dim, causal)
CASES = [(1, 70, 300, 2, 1, 512, False), (1, 129, 200, 4, 1, 256, True),
         (1, 1, 1, 1, 1, 512, True), (2, 65, 129, 2, 2, 256, False),
         (1, 150, 90, 3, 1, 512, True), (1, 40, 257, 8, 2, 256, False)]
DEFAULT = (0, 1)  # the CI run: d512 GQA 2:1 full, d256 fused GQA 4:1 causal with a second K/V tile
COMPILED = [dict(head_dim=h, causal=c, group=g) for h in (256, 512) for c in (False, True) for g in (1, 3, 4)]
P_BIAS = Depth512Config(dtype="fp8_e4m3").p_bias


def _quantized(gen, shape, scale):
    """fp8 values whose dequantized values (times ``scale``) are about N(0, 1)."""
    x = torch.randn(shape, generator=gen, dtype=torch.float64) / scale
    return x.clamp(-448, 448).to(torch.float8_e4m3fn)


def _bits(t):
    return t.view(torch.uint8).numpy()


@pytest.mark.parametrize("index, case", list(enumerate(CASES)),
                         ids=["B{}-Sq{}-Sk{}-H{}/{}-D{}-causal{}".format(*c) for c in CASES])
def test_matches_f64_reference_of_the_dequantized_inputs(index, case):
    if not FULL and index not in DEFAULT:
        pytest.skip("FA4_EMU_FULL_MATRIX=1 runs every case")
    from fa4_mlir.torch import flash_attention
    from fa4_mlir.torch.emulated import emulator

    b, sq, sk, h, hk, d, causal = case
    gen = torch.Generator().manual_seed(sq * 1000 + sk)
    qs, ks = float(torch.rand(1, generator=gen)) + 0.5, float(torch.rand(1, generator=gen)) * 0.1 + 0.02
    vs = float(torch.rand(1, generator=gen)) * 4 + 0.1
    q = _quantized(gen, (b, sq, h, d), qs)
    k, v = _quantized(gen, (b, sk, hk, d), ks), _quantized(gen, (b, sk, hk, d), vs)
    scale = 1 / math.sqrt(d)
    with emulator(target="sm_100a", seed=sq):
        out, lse = flash_attention(q, k, v, causal=causal, return_lse=True, q_scale=qs, k_scale=ks, v_scale=vs)
    assert out.dtype == torch.bfloat16 and out.shape == (b, sq, h, d)
    f32 = float(np.float32(qs)), float(np.float32(ks))
    qf, kf, vf = reference.dequantize(_bits(q), f32[0]), reference.dequantize(_bits(k), f32[1]), \
        reference.dequantize(_bits(v), vs)
    ref, ref_lse = reference.attention(qf, kf, vf, causal, scale)
    yard = reference.attention_fp8_yardstick(qf, kf, vf, causal, scale, P_BIAS)
    result = reference.compare(out.view(torch.int16).numpy().view(np.uint16), ref, yard, "bf16")
    assert result.ok, f"{case}: {result.summary()}"
    err = float(np.abs(lse.numpy() - ref_lse).max())
    assert err <= reference.lse_tolerance(ref_lse), f"{case}: LSE error {err}"


# -- MLA: fp8 latent (q_nope, kv), bf16 rope -------------------------------------------------------------
# (heads, causal, batch, seq_q, seq_k)
MLA_CASES = [(16, True, 1, 2, 300), (128, False, 1, 1, 257), (3, True, 1, 5, 70), (16, False, 2, 130, 129)]
_mla: dict = {}


def _mla_kernel(heads: int, causal: bool):
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.kernels.attention.depth512 import mla
    from fa4_mlir.runtime import EmulatedKernel
    from fa4_mlir.runtime.artifacts import read_artifact

    if (heads, causal) not in _mla:
        config = Depth512Config(dtype="fp8_e4m3", rope_depth=64, rope_dtype="bf16", group=heads)
        result = compile_kernel(mla.build(config, causal=causal))
        m = result.manifest
        assert (m["spill_stores"], m["spill_loads"], m["stack_frame"]) == (0, 0, 0), m
        out = tempfile.TemporaryDirectory(prefix="fa4-mla-fp8-")
        result.write(out.name)
        _mla[heads, causal] = config, EmulatedKernel(read_artifact(out.name)), out
    return _mla[heads, causal][:2]


@pytest.mark.parametrize("index, case", list(enumerate(MLA_CASES)),
                         ids=["H{}-causal{}-B{}-Sq{}-Sk{}".format(*c) for c in MLA_CASES])
def test_fp8_mla_matches_f64_reference(index, case):
    """S = scale (q_nope kv' + q_rope k_rope') of the dequantized inputs: q_nope and kv e4m3 with
    tensor-wise scales (folded into scale_log2e; kv's is also ``v_scale``), the bf16 rope columns
    sharing them (the kernel's contract: the rope parts are in the latent's scaled units)."""
    if not FULL and index:
        pytest.skip("FA4_EMU_FULL_MATRIX=1 runs every case")
    from fa4_mlir.kernels.attention.depth512 import mla
    from fa4_mlir.runtime import GlobalTensor

    heads, causal, b, sq, sk = case
    config, kernel = _mla_kernel(heads, causal)
    rng = np.random.default_rng(index)
    qs, ks = float(np.float32(rng.uniform(0.5, 1.5))), float(np.float32(rng.uniform(0.02, 0.1)))
    qn = reference.round_e4m3(rng.standard_normal((b, sq, heads, mla.LATENT)) / qs)
    kv = reference.round_e4m3(rng.standard_normal((b, sk, mla.LATENT)) / ks)
    qr = reference.random_bits(rng, (b, sq, heads, mla.ROPE), "bf16", 1.0)
    kr = reference.random_bits(rng, (b, sk, mla.ROPE), "bf16", 1.0)
    o = np.full((b, sq, heads, mla.LATENT), reference.POISON["bf16"], np.uint16)
    lse = np.full((b, heads, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(mla.LATENT + mla.ROPE)
    kv4 = reference.e4m3_bits(kv).reshape(b, sk, 1, mla.LATENT)
    f8, bf = (lambda a: GlobalTensor.host(a, "fp8_e4m3")), (lambda a: GlobalTensor.host(a, "bf16"))  # noqa: E731
    kernel.launch(mla.launch_geometry(config, b, sq, heads, sk),
                  {"q_nope": f8(reference.e4m3_bits(qn)), "q_rope": bf(qr), "kv": f8(kv4), "kv_v": f8(kv4),
                   "k_rope": bf(kr.reshape(b, sk, 1, mla.ROPE)), "o": bf(o), "lse": lse, "seq_q": sq, "seq_k": sk,
                   "num_heads": heads, "scale_log2e": scale * qs * ks * math.log2(math.e), "write_lse": 1,
                   "v_scale": ks}, seed=index)
    f = [qn * qs, reference.to_f64(qr, "bf16") * qs, kv * ks, reference.to_f64(kr, "bf16") * ks]
    ref, ref_lse = reference.mla_attention(*f, causal, scale)
    yard = reference.mla_attention_fp8_yardstick(*f, causal, scale, P_BIAS)
    result = reference.compare(o, ref, yard, "bf16")
    assert result.ok, f"{case}: {result.summary()}"
    err = float(np.abs(lse - ref_lse).max())
    assert err <= reference.lse_tolerance(ref_lse), f"{case}: LSE error {err}"


# -- the compiler: verifier, ptxas, spills, MMA kinds ---------------------------------------------------------
DEFAULT_COMPILED = (dict(head_dim=256, causal=True, group=4), dict(head_dim=512, causal=True, group=3))


@pytest.mark.parametrize("kwargs", COMPILED, ids=[json.dumps(k) for k in COMPILED])
def test_every_fp8_config_verifies_and_assembles_without_spills(kwargs):
    if not FULL and kwargs not in DEFAULT_COMPILED:
        pytest.skip("FA4_EMU_FULL_MATRIX=1 compiles every config")
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.kernels import attention

    config = AttentionConfig(target="sm_100a", dtype="fp8_e4m3", **kwargs)
    result = compile_kernel(attention.build(config))  # the protocol verifier runs
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"], m["stack_frame"]) == (0, 0, 0), m
    assert m["smem_bytes"] == config.depth512.smem_used == {512: 229892, 256: 148228}[kwargs["head_dim"]]
    kinds = set(re.findall(r"tcgen05\.mma\.cta_group::2\.kind::(\w+)", result.ptx))
    assert kinds == {"f8f6f4"} and "cvt.rn.satfinite.e4m3x2.f32" in result.ptx
    assert [p.name for p in attention.build(config).params][-1] == "v_scale"


@pytest.mark.parametrize("heads, causal", [(16, True), (128, False), (128, True), (3, False)])
def test_every_fp8_mla_kernel_verifies_and_assembles_without_spills(heads, causal):
    """The latent chunks are kind::f8f6f4 MMAs, the rope chunk kind::f16, into the same S."""
    if not FULL and (heads, causal) != (128, True):
        pytest.skip("FA4_EMU_FULL_MATRIX=1 compiles every config")
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.kernels.attention.depth512 import mla

    config = Depth512Config(dtype="fp8_e4m3", rope_depth=64, rope_dtype="bf16", group=heads)
    result = compile_kernel(mla.build(config, causal=causal))
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"], m["stack_frame"]) == (0, 0, 0), m
    assert m["smem_bytes"] == config.smem_used == 221684
    kinds = re.findall(r"tcgen05\.mma\.cta_group::2\.kind::(\w+)", result.ptx)
    # the MMA warp's code has Q@K' three times (first tile, odd, even: 4 latent chunks x 4 k32 steps and the
    # rope chunk's 4 k16 steps) and P@V twice (2 O halves x 2 slots x 4 k32 steps)
    assert (kinds.count("f8f6f4"), kinds.count("f16"), len(kinds)) == (3 * 16 + 2 * 16, 3 * 4, 92)


# -- rules and errors -------------------------------------------------------------------------------------------
def test_the_fp8_softmax_constants_are_the_specs():
    c = Depth512Config(dtype="fp8_e4m3")
    assert (c.rescale_threshold, c.p_bias, c.swizzle_bytes, c.mma_k) == (-2.0, 6.0, 64, 32)
    assert 2.0 ** (-c.rescale_threshold + c.p_bias) <= 448  # the largest biased P is finite in e4m3
    b = Depth512Config()
    assert (b.rescale_threshold, b.p_bias, b.swizzle_bytes) == (-8.0, 0.0, 128)


@pytest.mark.parametrize("kwargs, message", [
    (dict(rope_depth=64, dtype="fp8_e4m3"), r"Depth512Config.rope_dtype must be bf16 or fp16 with an fp8_e4m3 "
                                            r"dtype \(else None or the dtype\) with rope_depth 64, got None"),
    (dict(rope_depth=64, dtype="fp8_e4m3", rope_dtype="fp8_e4m3"), r"rope_dtype must be bf16 or fp16 with an "
                                                                   r"fp8_e4m3 dtype .* got 'fp8_e4m3'"),
    (dict(rope_depth=64, dtype="bf16", rope_dtype="fp16"), r"rope_dtype must be .* got 'fp16'"),
    (dict(rope_dtype="bf16"), r"Depth512Config.rope_dtype must be None without rope columns \(rope_depth 0\), "
                              r"got 'bf16'"),
])
def test_rope_dtype_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Depth512Config(**kwargs)


@pytest.mark.parametrize("head_dim", [256, 512])
def test_per_token_scales_are_not_taken_at_head_dims_256_and_512(head_dim):
    with pytest.raises(ConfigError, match=r"AttentionConfig.token_scales must be False for head dim 256/512 on "
                                          r"sm_100a \(the depth-512 kernel takes tensor-wise fp8 scales\), got True"):
        AttentionConfig(target="sm_100a", dtype="fp8_e4m3", head_dim=head_dim, token_scales=True)
    AttentionConfig(target="sm_100a", dtype="fp8_e4m3", head_dim=head_dim).validate()
