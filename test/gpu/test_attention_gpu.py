"""The attention forward on a real GPU: numerics against an f32 reference (error within 2x that of
torch SDPA's math backend in the same precision), odd lengths, causal, GQA / MQA, the LSE, every
output element written, strided inputs, and the op's errors."""

from __future__ import annotations

import math

import pytest

from fa4_mlir import runtime
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.kernels.attention import launch_geometry

# (batch, seq_q, seq_k, heads, kv heads, head dim, causal): tile multiples (128 rows, 64/128 keys),
# single rows and keys, ragged lengths either way, GQA and MQA.
SHAPES = [(1, 128, 128, 1, 1, 128, False), (2, 77, 200, 4, 4, 128, False), (1, 1, 1, 2, 2, 64, False),
          (1, 257, 129, 4, 1, 64, True), (2, 1000, 1000, 8, 2, 128, True), (1, 300, 700, 2, 2, 256, False),
          (1, 700, 300, 2, 2, 256, True), (1, 129, 1, 1, 1, 128, True), (3, 64, 4000, 2, 2, 64, False),
          (1, 2048, 2048, 4, 4, 128, True), (1, 333, 333, 8, 8, 256, True), (2, 511, 513, 8, 1, 128, False)]
GROUPS = (1, 4, 8)  # the GQA groups the GPU artifacts are built for (test/gpu/build_artifacts.py)


def reference(torch, q, k, v, causal, scale):
    """f32 attention and LSE of (B, S, H, D) inputs; K/V heads repeated for GQA."""
    group = q.shape[2] // k.shape[2]
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    kf, vf = kf.repeat_interleave(group, dim=1), vf.repeat_interleave(group, dim=1)
    s = torch.einsum("bhqd,bhkd->bhqk", qf, kf) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool, device=s.device).triu(1), -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    out = torch.einsum("bhqk,bhkd->bhqd", torch.softmax(s, dim=-1), vf)
    return out.transpose(1, 2), lse


def sdpa_math(torch, q, k, v, causal, scale):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, scale=scale,
            enable_gqa=q.shape[2] != k.shape[2])
    return out.transpose(1, 2)


def _errors(out, ref):
    diff = (out.float() - ref).abs()
    return float(diff.max()), float(diff.pow(2).mean().sqrt())


def _check(torch, q, k, v, causal, scale, out, what, lse=None):
    ref, ref_lse = reference(torch, q, k, v, causal, scale)
    theirs = sdpa_math(torch, q, k, v, causal, scale)
    assert not torch.isnan(out).any(), f"{what}: NaN in the output (an element was never written)"
    ours_max, ours_rms = _errors(out, ref)
    torch_max, torch_rms = _errors(theirs, ref)
    floor = 1e-6 * float(ref.abs().max()) + 1e-6
    assert ours_max <= 2 * torch_max + floor, f"{what}: max error {ours_max} vs SDPA math {torch_max}"
    assert ours_rms <= 2 * torch_rms + floor, f"{what}: rms error {ours_rms} vs SDPA math {torch_rms}"
    if lse is not None:
        assert lse.shape == ref_lse.shape and lse.dtype == torch.float32
        err = float((lse - ref_lse).abs().max())
        assert err <= 1e-3 * float(ref_lse.abs().max()) + 1e-3, f"{what}: LSE error {err}"


def _inputs(torch, b, sq, sk, h, hk, d, dtype, gen):
    q = torch.randn(b, sq, h, d, generator=gen).to(dtype).cuda()
    k = torch.randn(b, sk, hk, d, generator=gen).to(dtype).cuda()
    v = torch.randn(b, sk, hk, d, generator=gen).to(dtype).cuda()
    return q, k, v


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_matches_f32_reference_within_twice_sdpa_math_error(torch_gpu, dtype_name):
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(torch.seed())

    def draw(lo, hi):
        return int(torch.randint(lo, hi, (1,), generator=gen))

    drawn = []
    for _ in range(6):  # fresh random shapes every run, over the built head dims and groups
        hk, group = draw(1, 3), GROUPS[draw(0, len(GROUPS))]
        drawn.append((draw(1, 3), draw(1, 1500), draw(1, 1500), hk * group, hk, (64, 128, 256)[draw(0, 3)],
                      bool(draw(0, 2))))
    for b, sq, sk, h, hk, d, causal in SHAPES + drawn:
        q, k, v = _inputs(torch, b, sq, sk, h, hk, d, dtype, gen)
        scale = float(torch.empty(()).uniform_(0.02, 0.3))
        out, lse = flash_attention(q, k, v, causal=causal, softmax_scale=scale, return_lse=True)
        assert out.shape == q.shape and out.dtype == dtype and out.is_contiguous()
        _check(torch, q, k, v, causal, scale, out, f"{dtype} B{b} Sq{sq} Sk{sk} H{h}/{hk} D{d} causal={causal}", lse)


def test_default_scale_and_no_lse(torch_gpu):
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    q, k, v = _inputs(torch, 2, 300, 300, 4, 4, 128, torch.bfloat16, torch.Generator().manual_seed(3))
    out = flash_attention(q, k, v)
    assert isinstance(out, torch.Tensor)
    _check(torch, q, k, v, False, 1 / math.sqrt(128), out, "default scale")


def test_every_output_element_is_written(torch_gpu, gpu):
    """Through the runtime with a NaN-poisoned O: the kernel overwrites all of it, ragged query tiles
    included, and nothing past it (a guard position after Sq stays poisoned)."""
    torch = torch_gpu
    tensor = runtime.GlobalTensor
    for b, sq, sk, h, d, causal in [(2, 77, 300, 3, 128, False), (1, 1000, 129, 2, 64, True),
                                    (1, 200, 1000, 2, 256, True)]:
        config = AttentionConfig(target=runtime.device_target(gpu), head_dim=d, causal=causal)
        kernel = runtime.load("attention", config, device=gpu)
        q, k, v = _inputs(torch, b, sq, sk, h, h, d, torch.bfloat16, torch.Generator().manual_seed(sq))
        o = torch.full((b, sq + 1, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
        lse = torch.full((b, h, sq + 1), float("nan"), device="cuda")
        scale = 1 / math.sqrt(d)

        def view(t, s):
            strides = t.stride()
            return tensor(t.data_ptr(), "bf16", (b, s, h, d), strides, gpu)

        kernel.launch(launch_geometry(config, b, sq, h, sk),
                      {"q": view(q, sq), "k": view(k, sk), "v": view(v, sk), "o": view(o, sq),
                       "lse": lse.data_ptr(), "seq_q": sq, "seq_k": sk, "num_heads": h,
                       "scale_log2e": scale * math.log2(math.e), "write_lse": 0})
        torch.cuda.synchronize()
        what = f"B{b} Sq{sq} Sk{sk} H{h} D{d} causal={causal}"
        assert not torch.isnan(o[:, :sq]).any(), f"{what}: unwritten elements"
        assert torch.isnan(o[:, sq]).all(), f"{what}: the kernel wrote past O"
        assert torch.isnan(lse).all(), f"{what}: write_lse = 0 but the LSE was written"
        _check(torch, q, k, v, causal, scale, o[:, :sq], what)


def test_strided_inputs_from_a_packed_qkv(torch_gpu):
    """q, k, v as slices of one (B, S, 3, H, D) tensor: non-contiguous, TMA-legal strides."""
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    qkv = torch.randn(2, 333, 3, 4, 128, device="cuda").bfloat16()
    q, k, v = qkv.unbind(2)
    out = flash_attention(q, k, v, causal=True)
    _check(torch, q, k, v, True, 1 / math.sqrt(128), out, "packed qkv")


def test_fake_implementation_gives_shapes(torch_gpu):
    torch = torch_gpu
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 100, 8, 128, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(2, 50, 2, 128, dtype=torch.bfloat16, device="cuda")
        out, lse = torch.ops.fa4.flash_attention(q, k, k, True, None, True)
        assert out.shape == (2, 100, 8, 128) and out.dtype == torch.bfloat16
        assert lse.shape == (2, 8, 100) and lse.dtype == torch.float32


def test_op_works_under_torch_compile(torch_gpu):
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    q, k, v = _inputs(torch, 1, 256, 256, 2, 2, 64, torch.float16, torch.Generator().manual_seed(5))

    @torch.compile(fullgraph=True)
    def f(q, k, v):
        return flash_attention(q, k, v, causal=True) * 2

    _check(torch, q, k, v, True, 1 / 8, f(q, k, v) / 2, "torch.compile")


def test_empty_inputs(torch_gpu):
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    q = torch.empty(0, 5, 2, 64, dtype=torch.bfloat16, device="cuda")
    assert flash_attention(q, q, q).shape == (0, 5, 2, 64)
    q = torch.randn(1, 5, 2, 64, device="cuda").bfloat16()
    k = torch.empty(1, 0, 2, 64, dtype=torch.bfloat16, device="cuda")
    out, lse = flash_attention(q, k, k, return_lse=True)
    assert torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all()


def test_errors_name_what_is_wrong(torch_gpu):
    from fa4_mlir.errors import LaunchError
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    q = torch.randn(1, 64, 4, 128, device="cuda").bfloat16()
    k = torch.randn(1, 64, 2, 128, device="cuda").bfloat16()
    wide = torch.randn(1, 64, 4, 256, device="cuda").bfloat16()
    cases = [
        ((q.cpu(), k, k), {}, "q must be a CUDA tensor"),
        ((q.float(), k.float(), k.float()), {}, "dtype must be one of"),
        ((q, k.half(), k.half()), {}, "must have one dtype"),
        ((q[0], k, k), {}, "q must be 4-D"),
        ((q, k, k[:, :32]), {}, "k and v must have one shape"),
        ((q, wide[:, :, :2], wide[:, :, :2]), {}, r"head_dim=128"),
        ((q, k[:, :, :1].expand(1, 64, 3, 128), k[:, :, :1].expand(1, 64, 3, 128)), {}, "must divide q heads"),
        ((q[..., :96], k[..., :96], k[..., :96]), {}, "head_dim must be one of"),
        ((q.transpose(1, 3).contiguous().transpose(1, 3), k, k), {}, "unit stride along head_dim"),
        ((q, k, k), {"softmax_scale": -1.0}, "softmax_scale must be finite and > 0"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(LaunchError, match=message):
            flash_attention(*args, **kwargs)
    odd = torch.randn(1, 64, 4, 136, device="cuda").bfloat16()[..., :128]  # rows 272 bytes apart: fine
    assert flash_attention(odd, odd, odd).shape == (1, 64, 4, 128)
    bad = torch.randn(1, 64, 4 * 128 + 4, device="cuda").bfloat16()[..., 4:].view(1, 64, 4, 128)
    with pytest.raises(LaunchError, match="16-byte aligned|multiples of 8 elements"):
        flash_attention(bad, bad, bad)
