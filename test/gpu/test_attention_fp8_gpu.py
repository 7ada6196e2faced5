"""fp8 e4m3 attention (sm_90a) on a real GPU through ``fa4_mlir.torch.flash_attention``: head dims
64/128/256, causal and not, GQA, odd lengths, tensor-wise and per-token Q/K scales, V's scale, the LSE.

The reference is float64 attention of the dequantized inputs; the kernel's max and rms errors must be at
most twice those of a yardstick that rounds P (times 2^8, the kernel's exp2 bias) to e4m3 before P @ V and
the output to bf16 (``reference.attention_fp8_yardstick``, ``reference.compare``; at head dims 64 and 128 the
tensor core sums P's rows, so the yardstick's sums are of the rounded P too, and the LSE is within
``reference.fp8_lse_limit`` of the float64 one). Per-token scales are
log-uniform in 1e-3..1e3, each token's fp8 values N(0, 1) / scale (the factor clipped to 2^-6..2^8), so
the dequantized values stay near N(0, 1). The emulator runs the same checks on small shapes
(test/python/test_attention_fp8_hopper.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs.attention import SM90_FP8_ROW_SUMS
from fa4_mlir.kernels.attention import hopper_fp8

FP8_GROUPS = (1, 2, 4)  # the GQA groups drawn (one sm_90a artifact serves every group: test/gpu/build_artifacts.py)
# (batch, seq_q, seq_k, heads, kv heads, head dim, causal, per-token scales)
SHAPES = [(1, 128, 128, 1, 1, 128, False, False), (2, 77, 200, 4, 4, 128, False, True),
          (1, 1, 1, 2, 2, 64, False, True), (1, 257, 129, 4, 1, 64, True, False), (2, 1000, 1000, 8, 2, 128, True, True),
          (1, 300, 700, 2, 2, 256, False, False), (1, 700, 300, 8, 2, 256, True, True), (3, 64, 4000, 2, 2, 64, False, True),
          (1, 2048, 2048, 4, 4, 128, True, False), (1, 333, 333, 8, 8, 256, True, True),
          (2, 511, 513, 4, 1, 64, False, False),
          # 16k keys a row: the row sums' precision across many tiles (one running sum in the tensor core's fp8
          # accumulator lost the small terms there: 0.32 relative error against bf16, 0.054 summed per tile)
          (1, 128, 16384, 2, 2, 128, False, False), (1, 192, 16384, 2, 1, 64, False, True)]


def _log_uniform(torch, gen, shape):
    return torch.exp(torch.empty(shape, dtype=torch.float64).uniform_(math.log(1e-3), math.log(1e3), generator=gen))


def _quantized(torch, gen, shape, scale):
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if isinstance(scale, torch.Tensor):
        factor = (1 / scale).clamp(2.0 ** -6, 2.0 ** 8).permute(0, 2, 1)[..., None]
    else:
        factor = 1 / scale
    return (x * factor).clamp(-448, 448).to(torch.float8_e4m3fn)


def _run(torch, case, seed):
    from fa4_mlir.torch import flash_attention

    b, sq, sk, h, hk, d, causal, tokens = case
    gen = torch.Generator().manual_seed(seed)
    if tokens:
        qs, ks = _log_uniform(torch, gen, (b, h, sq)), _log_uniform(torch, gen, (b, hk, sk))
    else:
        qs, ks = float(torch.rand(1, generator=gen)) + 0.5, float(torch.rand(1, generator=gen)) * 0.1 + 0.02
    vs = float(torch.rand(1, generator=gen)) * 4 + 0.1
    q, k, v = (_quantized(torch, gen, shape, s) for shape, s in (((b, sq, h, d), qs), ((b, sk, hk, d), ks),
                                                                 ((b, sk, hk, d), vs)))
    scale = float(torch.rand(1, generator=gen)) * 0.2 + 0.02
    dev = [t.cuda() for t in (q, k, v)]
    args = dict(q_scale=qs.float().cuda(), k_scale=ks.float().cuda()) if tokens else dict(q_scale=qs, k_scale=ks)
    out, lse = flash_attention(*dev, causal=causal, softmax_scale=scale, return_lse=True, v_scale=vs, **args)
    assert out.dtype == torch.bfloat16 and out.shape == (b, sq, h, d)

    def host(x):
        return x.float().numpy() if isinstance(x, torch.Tensor) else float(np.float32(x))

    bits = [t.view(torch.uint8).numpy() for t in (q, k, v)]
    qf, kf, vf = (reference.dequantize(x, host(s)) for x, s in zip(bits, (qs, ks, vs)))
    ref, ref_lse = reference.attention(qf, kf, vf, causal, scale)
    rounded = d in SM90_FP8_ROW_SUMS  # the tensor core sums the e4m3 P it multiplies
    yard = reference.attention_fp8_yardstick(qf, kf, vf, causal, scale, hopper_fp8.P_BIAS, rounded_sums=rounded)
    result = reference.compare(out.cpu().view(torch.int16).numpy().view(np.uint16), ref, yard, "bf16")
    what = f"fp8 B{b} Sq{sq} Sk{sk} H{h}/{hk} D{d} causal={causal} tokens={tokens} scale {scale}"
    assert result.ok, f"{what}: {result.summary()}"
    err = float(np.abs(lse.cpu().numpy() - ref_lse).max())
    limit = reference.fp8_lse_limit(ref_lse, reference.attention_fp8_lse_yardstick(qf, kf, causal, scale,
                                                                                  hopper_fp8.P_BIAS)) \
        if rounded else reference.lse_tolerance(ref_lse)
    assert err <= limit, f"{what}: LSE error {err} (limit {limit})"


@pytest.mark.parametrize("case", SHAPES, ids=lambda c: "B{}-Sq{}-Sk{}-H{}/{}-D{}-causal{}-tokens{}".format(*c))
def test_fp8_matches_f64_reference_of_the_dequantized_inputs(torch_gpu, case):
    _run(torch_gpu, case, seed=sum(case[:6]))


def test_fp8_random_shapes(torch_gpu):
    rng = np.random.default_rng()
    for _ in range(6):  # fresh shapes every run, over the built head dims and groups
        hk, group = int(rng.integers(1, 3)), FP8_GROUPS[int(rng.integers(0, len(FP8_GROUPS)))]
        case = (int(rng.integers(1, 3)), int(rng.integers(1, 1500)), int(rng.integers(1, 1500)), hk * group, hk,
                (64, 128, 256)[int(rng.integers(0, 3))], bool(rng.integers(0, 2)), bool(rng.integers(0, 2)))
        _run(torch_gpu, case, seed=int(rng.integers(0, 1 << 30)))


def test_fp8_errors_on_the_gpu(torch_gpu):
    from fa4_mlir.errors import LaunchError
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    f8 = torch.zeros(1, 8, 2, 512, device="cuda").to(torch.float8_e4m3fn)
    with pytest.raises(LaunchError, match="head_dim must be one of 64, 128, 256 on this GPU for fp8, got 512"):
        flash_attention(f8, f8, f8)
    f8 = f8[..., :128]
    with pytest.raises(LaunchError, match=r"k_scale must broadcast to \(batch, heads, seqlen\)"):
        flash_attention(f8.contiguous(), f8.contiguous(), f8.contiguous(), k_scale=torch.ones(1, 2, 9, device="cuda"))


def test_triton_v_transpose_matches_the_torch_copy_on_the_gpu(torch_gpu):
    from fa4_mlir.torch import v_transpose as vt

    torch = torch_gpu
    kernel = vt._triton_kernel()
    assert kernel is not None, "Triton is missing: the op falls back to torch's slower strided copy"
    for shape in [(2, 1000, 3, 64), (1, 4096, 2, 128), (2, 77, 4, 256)]:
        v = (torch.randn(shape, device="cuda") * 8).to(torch.float8_e4m3fn)
        strided = torch.cat([v, v], dim=2)[:, :, shape[2]:]
        for x in (v, strided):
            assert torch.equal(vt._torch_transposed(x).view(torch.uint8), vt._triton_transposed(kernel, x).view(torch.uint8))
