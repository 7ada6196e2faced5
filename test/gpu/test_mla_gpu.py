"""Multi-head latent attention (absorbed form, ``torch.ops.fa4.mla_attention``) on an sm_90 GPU and (the
``backend`` tests) in the emulator: numerics against the float64 reference (error within 2x that of the
same computation at the kernel's precision, ``fa4_mlir.reference``) for decode shapes (Sq 1..4, 16-128
heads packed into the tiles' rows, long caches) and prefill-like ones, causal and not, odd lengths, the
LSE, every output element written, a strided latent cache, the default scale, the op's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs.mla import MLAConfig
from fa4_mlir.kernels.attention.hopper_mla import launch_geometry
from fa4_mlir.torch.mla import tile_heads

# (batch, seq_q, seq_k, heads, causal): decode (one position, 16 or 128 heads, caches of 1 .. 8k keys),
# speculative decode (2-4 positions, causal: the top-left diagonal), prefill-like (Sq = Sk, few heads).
SHAPES = [(4, 1, 1, 128, False), (8, 1, 127, 16, False), (2, 1, 4097, 128, False), (1, 1, 8192, 128, False),
          (3, 2, 1000, 128, True), (2, 4, 333, 16, True), (1, 1000, 1000, 16, True), (2, 257, 300, 8, False),
          (1, 130, 130, 2, True), (1, 77, 3000, 128, False)]
EMULATOR_SHAPES = [(2, 1, 45, 16, False), (1, 3, 70, 16, True), (1, 70, 70, 2, True)]
HEADS = (2, 8, 16, 128)  # the op's tile_heads 2, 8, 16 and 64: the artifacts build_artifacts.py builds


def _inputs(rng, b, sq, sk, h, dtype):
    shapes = ((b, sq, h, 512), (b, sq, h, 64), (b, sk, 512), (b, sk, 64))  # q_nope, q_rope, kv_latent, k_rope
    return tuple(reference.random_bits(rng, shape, dtype, 1.0) for shape in shapes)


def _check(inputs, causal, scale, out, dtype, what, lse=None):
    values = [reference.to_f64(t, dtype) for t in inputs]
    ref, ref_lse = reference.mla_attention(*values, causal, scale)
    assert not np.isnan(reference.to_f32(out, dtype)).any(), f"{what}: NaN in the output (an element never written)"
    result = reference.compare(out, ref, reference.mla_attention_yardstick(*values, causal, scale, dtype), dtype)
    assert result.ok, f"{what}: {result.summary()}"
    if lse is not None:
        assert lse.shape == ref_lse.shape and lse.dtype == np.float32
        err = float(np.abs(lse - ref_lse).max())
        assert err <= reference.lse_tolerance(ref_lse), f"{what}: LSE error {err}"


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_matches_f64_reference_within_twice_the_same_precision_error(backend, dtype):
    if backend.name == "emulator":
        backend.one_dtype(dtype)
    rng = np.random.default_rng()
    drawn = [(int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 3000)),
              HEADS[int(rng.integers(0, len(HEADS)))], bool(rng.integers(0, 2))) for _ in range(4)]
    drawn = backend.pick(drawn, [(1, int(rng.integers(1, 4)), int(rng.integers(1, 100)), 16, bool(rng.integers(0, 2)))])
    for b, sq, sk, h, causal in backend.pick(SHAPES, EMULATOR_SHAPES) + drawn:
        inputs = _inputs(rng, b, sq, sk, h, dtype)
        scale = float(rng.uniform(0.02, 0.1))
        out, lse = backend.mla_attention(*inputs, causal, scale, dtype)
        assert out.shape == (b, sq, h, 512)
        _check(inputs, causal, scale, out, dtype, f"{backend}: {dtype} B{b} Sq{sq} Sk{sk} H{h} causal={causal} "
                                                  f"scale {scale}", lse)


def test_every_output_element_is_written(backend):
    """Through the runtime with a NaN-poisoned O one position longer: the kernel overwrites all of it,
    ragged position tiles included, and nothing past it; write_lse = 0 leaves the LSE alone."""
    poison = reference.POISON["bf16"]
    gpu_shapes = [(2, 77, 300, 16, False), (1, 3, 1000, 128, True), (3, 1, 129, 128, False)]
    for b, sq, sk, h, causal in backend.pick(gpu_shapes, [(1, 5, 40, 16, True)]):
        config = MLAConfig(target=backend.target, causal=causal, tile_heads=tile_heads(h))
        kernel = backend.load("mla-attention", config)
        q_nope, q_rope, kv, k_rope = _inputs(np.random.default_rng(sq), b, sq, sk, h, "bf16")
        o = backend.array(np.full((b, sq + 1, h, 512), poison, np.uint16))
        lse = backend.array(np.full((b, h, sq + 1), np.nan, np.float32))
        scale = 1 / math.sqrt(576)
        latent = [backend.array(np.ascontiguousarray(t).reshape(b, sk, 1, t.shape[2])) for t in (kv, k_rope)]
        backend.launch(kernel, launch_geometry(config, b, sq, h, sk),
                       {"q_nope": backend.tensor(backend.array(q_nope), "bf16"),
                        "q_rope": backend.tensor(backend.array(q_rope), "bf16"),
                        "kv": backend.tensor(latent[0], "bf16"), "k_rope": backend.tensor(latent[1], "bf16"),
                        "o": backend.tensor(o, "bf16", (b, sq, h, 512)), "lse": backend.pointer(lse), "seq_q": sq,
                        "seq_k": sk, "num_heads": h, "scale_log2e": scale * math.log2(math.e), "write_lse": 0})
        out, lse_out = backend.host(o), backend.host(lse)
        what = f"{backend}: B{b} Sq{sq} Sk{sk} H{h} causal={causal}"
        assert not (out[:, :sq] == poison).any(), f"{what}: unwritten elements"
        assert (out[:, sq] == poison).all(), f"{what}: the kernel wrote past O"
        assert np.isnan(lse_out).all(), f"{what}: write_lse = 0 but the LSE was written"
        _check((q_nope, q_rope, kv, k_rope), causal, scale, out[:, :sq], "bf16", what)


def _bits(torch, t) -> np.ndarray:
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


def test_default_scale_and_a_strided_latent_cache(torch_gpu):
    """kv_latent and k_rope as the two column slices of one (B, Sk, 576) cache ([kv_c | k_pe], as serving
    stacks keep it); the default scale 1 / sqrt(576); no LSE."""
    from fa4_mlir.torch import mla_attention

    torch = torch_gpu
    gen = torch.Generator().manual_seed(3)
    q_nope = torch.randn(4, 1, 128, 512, generator=gen).bfloat16().cuda()
    q_rope = torch.randn(4, 1, 128, 64, generator=gen).bfloat16().cuda()
    cache = torch.randn(4, 2000, 576, generator=gen).bfloat16().cuda()
    kv, k_rope = cache[..., :512], cache[..., 512:]
    out = mla_attention(q_nope, q_rope, kv, k_rope)
    assert isinstance(out, torch.Tensor) and out.shape == (4, 1, 128, 512)
    _check([_bits(torch, t) for t in (q_nope, q_rope, kv, k_rope)], False, 1 / math.sqrt(576), _bits(torch, out),
           "bf16", "strided cache")


def test_fake_implementation_and_torch_compile(torch_gpu):
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fa4_mlir.torch import mla_attention

    torch = torch_gpu
    with FakeTensorMode():
        q = torch.empty(2, 1, 128, 512, dtype=torch.bfloat16, device="cuda")
        qr = torch.empty(2, 1, 128, 64, dtype=torch.bfloat16, device="cuda")
        kv = torch.empty(2, 50, 512, dtype=torch.bfloat16, device="cuda")
        kr = torch.empty(2, 50, 64, dtype=torch.bfloat16, device="cuda")
        out, lse = torch.ops.fa4.mla_attention(q, qr, kv, kr, False, None, True)
        assert out.shape == (2, 1, 128, 512) and lse.shape == (2, 128, 1) and lse.dtype == torch.float32
    gen = torch.Generator().manual_seed(5)
    args = [torch.randn(*s, generator=gen).half().cuda() for s in ((1, 2, 16, 512), (1, 2, 16, 64), (1, 300, 512),
                                                                  (1, 300, 64))]

    @torch.compile(fullgraph=True)
    def f(*args):
        return mla_attention(*args, causal=True, softmax_scale=0.05) * 2

    _check([_bits(torch, t) for t in args], True, 0.05, _bits(torch, f(*args) / 2), "fp16", "torch.compile")


def test_errors_name_what_is_wrong(torch_gpu):
    from fa4_mlir.errors import LaunchError
    from fa4_mlir.torch import mla_attention

    torch = torch_gpu
    q, qr = torch.randn(1, 2, 16, 512, device="cuda").bfloat16(), torch.randn(1, 2, 16, 64, device="cuda").bfloat16()
    kv, kr = torch.randn(1, 9, 512, device="cuda").bfloat16(), torch.randn(1, 9, 64, device="cuda").bfloat16()
    cases = [((q.cpu(), qr, kv, kr), r"q_nope must be a CUDA tensor"),
             ((q, qr, kv.float(), kr), r"must have one dtype"),
             ((q, qr, kv[None], kr), r"kv_latent must be 3-D"),
             ((q, qr, kv, kr[:, :4]), r"k_rope must be \(batch, seqlen_k, 64\) = \(1, 9, 64\)")]
    for args, message in cases:
        with pytest.raises(LaunchError, match=message):
            mla_attention(*args)
    out, lse = mla_attention(q, qr, kv[:, :0], kr[:, :0], return_lse=True)  # no keys: zeros and -inf
    assert torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all()


# the prefill form (dtype, batch, seq_q, seq_k, heads, group, causal): q/k 192 = 128 + 64, v 128
PREFILL = [("bf16", 1, 1000, 1000, 16, 1, True), ("bf16", 2, 777, 1500, 8, 4, False),
           ("fp16", 1, 2048, 2048, 4, 4, True),
           ("fp16", 3, 129, 65, 2, 1, False)]


@pytest.mark.parametrize("dtype, b, sq, sk, h, group, causal", PREFILL)
def test_prefill_form_matches_f64_reference(torch_gpu, dtype, b, sq, sk, h, group, causal):
    """The prefill-form kernel (``fa4_mlir.torch.mla.launch_prefill``) against the attention of the
    concatenations [q_nope | q_rope], [k_nope | k_rope] and v, with the LSE."""
    from fa4_mlir import runtime
    from fa4_mlir.torch.mla import launch_prefill

    torch = torch_gpu
    kind = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    config = MLAConfig(form="prefill", dtype=dtype, causal=causal, group=group)
    kernel = runtime.load("mla-attention", config)
    gen = torch.Generator().manual_seed(sq + sk)
    hk = h // group
    shapes = ((b, sq, h, 128), (b, sq, h, 64), (b, sk, hk, 128), (b, sk, hk, 64), (b, sk, hk, 128))
    q_nope, q_rope, k_nope, k_rope, v = (torch.randn(*s, generator=gen).to(kind).cuda() for s in shapes)
    out = torch.full((b, sq, h, 128), math.nan, dtype=kind, device="cuda")
    lse = torch.full((b, h, sq), math.nan, device="cuda")
    scale = 1 / math.sqrt(192)
    launch_prefill(config, kernel, q_nope, q_rope, k_nope, k_rope, v, out, lse, scale)
    torch.cuda.synchronize()
    q = np.concatenate([reference.to_f64(_bits(torch, t), dtype) for t in (q_nope, q_rope)], axis=-1)
    k = np.concatenate([reference.to_f64(_bits(torch, t), dtype) for t in (k_nope, k_rope)], axis=-1)
    vf = reference.to_f64(_bits(torch, v), dtype)
    ref, ref_lse = reference.attention(q, k, vf, causal, scale)
    result = reference.compare(_bits(torch, out), ref, reference.attention_yardstick(q, k, vf, causal, scale, dtype),
                               dtype)
    assert result.ok and result.unwritten == 0, result.summary()
    assert float(np.abs(lse.cpu().numpy() - ref_lse).max()) <= reference.lse_tolerance(ref_lse)
