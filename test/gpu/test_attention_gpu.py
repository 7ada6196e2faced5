"""The attention forward on a real GPU and (the ``backend`` tests) in the emulator: numerics against
the float64 reference (error within 2x that of the same computation at the kernel's precision,
``fa4_mlir.reference``), odd lengths, causal, GQA / MQA, the LSE, every output element written,
strided inputs, and the op's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.attention_op import default_num_q
from fa4_mlir.kernels.attention import gqa_arguments, launch_geometry, walk_arguments

# (batch, seq_q, seq_k, heads, kv heads, head dim, causal): tile multiples (128 rows, 64/128 keys),
# single rows and keys, ragged lengths either way, GQA and MQA; head dim 512 (64-row tiles, O split
# over the two consumer warpgroups); head dims 96 (the 128 tile on zero-filled columns) and 192.
SHAPES = [(1, 128, 128, 1, 1, 128, False), (2, 77, 200, 4, 4, 128, False), (1, 1, 1, 2, 2, 64, False),
          (1, 257, 129, 4, 1, 64, True), (2, 1000, 1000, 8, 2, 128, True), (1, 300, 700, 2, 2, 256, False),
          (1, 700, 300, 2, 2, 256, True), (1, 129, 1, 1, 1, 128, True), (3, 64, 4000, 2, 2, 64, False),
          (1, 2048, 2048, 4, 4, 128, True), (1, 333, 333, 8, 8, 256, True), (2, 511, 513, 8, 1, 128, False),
          (1, 300, 700, 2, 2, 512, False), (2, 700, 300, 8, 2, 512, True), (1, 1, 1, 1, 1, 512, True),
          (1, 1024, 1024, 4, 1, 512, True), (1, 300, 257, 4, 1, 96, True), (2, 130, 1000, 2, 2, 96, False),
          (1, 500, 333, 2, 2, 192, False), (1, 1000, 1000, 4, 1, 192, True)]
# Small shapes on a few kernel configs per dtype (each config compiles once, about 2 s, in a fresh cache).
EMULATOR_SHAPES = {
    "bf16": [(1, 128, 128, 1, 1, 128, False), (1, 1, 1, 2, 2, 128, False), (1, 129, 200, 4, 1, 64, True),
             (1, 130, 150, 2, 2, 512, True)],
    "fp16": [(1, 77, 100, 1, 1, 256, True), (2, 64, 130, 2, 2, 64, False)],
}
# the GQA groups drawn: on sm_90a one artifact serves every group (the kernel takes it at launch,
# AttentionConfig.runtime_group; test/gpu/build_artifacts.py)
GROUPS = (1, 2, 3, 4, 8)


def _check(q, k, v, causal, scale, out, dtype, what, lse=None):
    """``out`` (bits) and ``lse`` against the float64 reference; the yardstick rounds P to ``dtype``
    before P @ V, as the kernel does."""
    qf, kf, vf = (reference.to_f64(t, dtype) for t in (q, k, v))
    ref, ref_lse = reference.attention(qf, kf, vf, causal, scale)
    assert not np.isnan(reference.to_f32(out, dtype)).any(), f"{what}: NaN in the output (an element never written)"
    result = reference.compare(out, ref, reference.attention_yardstick(qf, kf, vf, causal, scale, dtype), dtype)
    assert result.ok, f"{what}: {result.summary()}"
    if lse is not None:
        assert lse.shape == ref_lse.shape and lse.dtype == np.float32
        err = float(np.abs(lse - ref_lse).max())
        assert err <= reference.lse_tolerance(ref_lse), f"{what}: LSE error {err}"


def _inputs(rng, b, sq, sk, h, hk, d, dtype):
    return tuple(reference.random_bits(rng, shape, dtype, 1.0) for shape in ((b, sq, h, d), (b, sk, hk, d),
                                                                            (b, sk, hk, d)))


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_matches_f64_reference_within_twice_the_same_precision_error(backend, dtype):
    if backend.name == "emulator":
        backend.one_dtype(dtype)
    rng = np.random.default_rng()

    def draw(lo, hi):
        return int(rng.integers(lo, hi))

    drawn = []
    for _ in range(6):  # fresh random shapes every run, over the built head dims and groups
        hk, group = draw(1, 3), GROUPS[draw(0, len(GROUPS))]
        drawn.append((draw(1, 3), draw(1, 1500), draw(1, 1500), hk * group, hk, (64, 96, 128, 192, 256, 512)[draw(0, 6)],
                      bool(draw(0, 2))))
    # The emulator draws lengths for one of its configs.
    _, _, _, h, hk, d, causal = EMULATOR_SHAPES[dtype][draw(0, len(EMULATOR_SHAPES[dtype]))]
    drawn = backend.pick(drawn, [(1, draw(1, 300), draw(1, 300), h, hk, d, causal)])
    for b, sq, sk, h, hk, d, causal in backend.pick(SHAPES, EMULATOR_SHAPES[dtype]) + drawn:
        q, k, v = _inputs(rng, b, sq, sk, h, hk, d, dtype)
        scale = float(rng.uniform(0.02, 0.3))
        out, lse = backend.flash_attention(q, k, v, causal, scale, dtype)
        assert out.shape == q.shape
        _check(q, k, v, causal, scale, out, dtype, f"{backend}: {dtype} B{b} Sq{sq} Sk{sk} H{h}/{hk} D{d} "
                                                   f"causal={causal} scale {scale}", lse)


def _torch_inputs(torch, b, sq, sk, h, hk, d, dtype, gen):
    q = torch.randn(b, sq, h, d, generator=gen).to(dtype).cuda()
    k = torch.randn(b, sk, hk, d, generator=gen).to(dtype).cuda()
    v = torch.randn(b, sk, hk, d, generator=gen).to(dtype).cuda()
    return q, k, v


def _check_torch(torch, q, k, v, causal, scale, out, what):
    """``_check`` of torch tensors."""
    dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}[q.dtype]
    bits = [t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16) for t in (q, k, v, out)]
    _check(*bits[:3], causal, scale, bits[3], dtype, what)


def test_default_scale_and_no_lse(torch_gpu):
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    q, k, v = _torch_inputs(torch, 2, 300, 300, 4, 4, 128, torch.bfloat16, torch.Generator().manual_seed(3))
    out = flash_attention(q, k, v)
    assert isinstance(out, torch.Tensor)
    _check_torch(torch, q, k, v, False, 1 / math.sqrt(128), out, "default scale")


def _run_poisoned(backend, config, b, sq, sk, h, hk, d, write_lse: bool):
    """Launch ``config``'s kernel through the runtime on random inputs into a NaN-poisoned O with a guard
    position after Sq (and a NaN LSE); check that every element of O is written and none past it, and
    the numbers (and the LSE when written) against float64. Returns the LSE as the kernel left it."""
    poison = reference.POISON["bf16"]
    kernel = backend.load("attention", config)
    q, k, v = _inputs(np.random.default_rng(sq + d), b, sq, sk, h, hk, d, "bf16")
    o = backend.array(np.full((b, sq + 1, h, d), poison, np.uint16))
    lse = backend.array(np.full((b, h, sq), np.nan, np.float32))
    scale = 1 / math.sqrt(d)
    grid = launch_geometry(config, b, sq, h, sk, kernel.resident_ctas)
    backend.launch(kernel, grid,
                   {"q": backend.tensor(backend.array(q), "bf16"), "k": backend.tensor(backend.array(k), "bf16"),
                    "v": backend.tensor(backend.array(v), "bf16"), "o": backend.tensor(o, "bf16", (b, sq, h, d)),
                    "lse": backend.pointer(lse), "seq_q": sq, "seq_k": sk, "num_heads": h,
                    **gqa_arguments(config, h, hk), **walk_arguments(config, b),
                    "scale_log2e": scale * math.log2(math.e), "write_lse": int(write_lse)})
    out, lse_out = backend.host(o), backend.host(lse)
    what = f"{backend}: {config.describe()} B{b} Sq{sq} Sk{sk} H{h}/{hk}"
    assert not (out[:, :sq] == poison).any(), f"{what}: unwritten elements"
    assert (out[:, sq] == poison).all(), f"{what}: the kernel wrote past O"
    _check(q, k, v, config.causal, scale, out[:, :sq], "bf16", what, lse_out if write_lse else None)
    return lse_out


def test_every_output_element_is_written(backend):
    """Through the runtime with a NaN-poisoned O: the kernel overwrites all of it, ragged query tiles
    included, and nothing past it (a guard position after Sq stays poisoned); no LSE when not asked.
    Causal with 32 query tiles a head or more: the heads in several sections (``causal_order``; head dim 128,
    8 heads a section at 32 tiles: 8 + 2 heads across the batch), and head dim 64 there (each head in turn)."""
    for b, sq, sk, h, d, causal in backend.pick([(2, 77, 300, 3, 128, False), (1, 1000, 129, 2, 64, True),
                                                 (1, 200, 1000, 2, 256, True), (2, 77, 300, 3, 512, False),
                                                 (1, 200, 1000, 2, 512, True), (2, 4096, 4096, 5, 128, True),
                                                 (1, 4200, 4200, 9, 64, True)], [(2, 77, 130, 2, 128, False)]):
        # the op's tile (head dim 64: three warpgroups, SM90_NUM_Q), whose artifact build_artifacts.py builds
        config = AttentionConfig(target=backend.target, head_dim=d, causal=causal,
                                 num_q=default_num_q(backend.target, "bf16", d, causal))
        lse = _run_poisoned(backend, config, b, sq, sk, h, h, d, write_lse=False)
        assert np.isnan(lse).all(), f"{backend}: {config.describe()}: write_lse = 0 but the LSE was written"


def test_the_persistent_tile_walk_writes_every_element(backend):
    """The persistent kernel (``AttentionConfig.persistent``: one CTA per resident slot walks the tiles):
    every element written, nothing past it, the numbers and the LSE against float64; ragged tiles, GQA,
    batches, causal (the longest rows first)."""
    for b, sq, sk, h, hk, d, causal in backend.pick([(2, 1000, 700, 4, 2, 128, True), (3, 300, 1000, 2, 2, 64, False),
                                                     (1, 2000, 2500, 8, 1, 128, False), (1, 129, 77, 2, 1, 96, True)],
                                                    [(2, 77, 130, 2, 1, 128, True)]):
        config = AttentionConfig(target=backend.target, head_dim=d, causal=causal, persistent=True)
        assert launch_geometry(config, b, sq, h, sk, 132)[1:] == (1, 1)
        _run_poisoned(backend, config, b, sq, sk, h, hk, d, write_lse=True)


def test_one_consumer_role_writes_every_element(backend):
    """``AttentionConfig.one_consumer_role`` (one copy of the consumers' code, the op's at head dims 128 and 256
    past the persistent walk's lengths): every element written, nothing past it, the numbers and the LSE against
    float64; ragged tiles, GQA, batches, causal."""
    for b, sq, sk, h, hk, d, causal in backend.pick([(2, 777, 3000, 4, 2, 128, False), (1, 3000, 3000, 2, 1, 128, True),
                                                     (1, 1000, 700, 2, 2, 256, True), (2, 300, 2500, 3, 3, 256, False)],
                                                    [(1, 130, 150, 2, 1, 128, True)]):
        config = AttentionConfig(target=backend.target, head_dim=d, causal=causal, one_consumer_role=True)
        _run_poisoned(backend, config, b, sq, sk, h, hk, d, write_lse=True)


def test_strided_inputs_from_a_packed_qkv(torch_gpu):
    """q, k, v as slices of one (B, S, 3, H, D) tensor: non-contiguous, TMA-legal strides."""
    from fa4_mlir.torch import flash_attention

    torch = torch_gpu
    qkv = torch.randn(2, 333, 3, 4, 128, device="cuda").bfloat16()
    q, k, v = qkv.unbind(2)
    out = flash_attention(q, k, v, causal=True)
    _check_torch(torch, q, k, v, True, 1 / math.sqrt(128), out, "packed qkv")


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
    q, k, v = _torch_inputs(torch, 1, 256, 256, 2, 2, 64, torch.float16, torch.Generator().manual_seed(5))

    @torch.compile(fullgraph=True)
    def f(q, k, v):
        return flash_attention(q, k, v, causal=True) * 2

    _check_torch(torch, q, k, v, True, 1 / 8, f(q, k, v) / 2, "torch.compile")


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
        ((q[..., :80], k[..., :80], k[..., :80]), {}, "head_dim must be one of 64, 96, 128, 192, 256, 512"),
        ((q.transpose(1, 3).contiguous().transpose(1, 3), k, k), {}, "unit innermost stride"),
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
