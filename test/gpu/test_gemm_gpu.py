"""The GEMM with residual epilogue on a real GPU: numerics against an f32 reference (error within 2x
that of torch.addmm in the same precision), every output element written, beta = 0 ignores C, both
B layouts, and the op's errors."""

from __future__ import annotations

import pytest

from fa4_mlir import runtime
from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.kernels import gemm

# Tile multiples, ragged M / N / K (tiles are 128 x 256 x 64), single rows, K below one K block.
SHAPES = [(128, 256, 64), (256, 512, 1024), (1, 8, 8), (77, 264, 200), (257, 136, 1032), (1000, 1000, 72),
          (3000, 520, 8), (129, 4104, 520), (2048, 2048, 2048)]


def _errors(torch, out, ref):
    diff = (out.float() - ref).abs()
    return float(diff.max()), float(diff.pow(2).mean().sqrt())


def _check(torch, a, b, c, alpha, beta, out, what):
    """``out`` against the f32 reference, with torch.addmm in ``a``'s precision as the yardstick."""
    ref = torch.addmm(c.float(), a.float(), b.float(), beta=beta, alpha=alpha)
    if beta == 0:
        ref = torch.mm(a.float(), b.float()) * alpha
        c_torch = torch.zeros_like(c)
    else:
        c_torch = c
    theirs = torch.addmm(c_torch, a, b, beta=beta, alpha=alpha)
    assert not torch.isnan(out).any(), f"{what}: NaN in the output (an element was never written, or C leaked)"
    ours_max, ours_rms = _errors(torch, out, ref)
    torch_max, torch_rms = _errors(torch, theirs, ref)
    floor = 1e-6 * float(ref.abs().max()) + 1e-6
    assert ours_max <= 2 * torch_max + floor, f"{what}: max error {ours_max} vs torch.addmm {torch_max}"
    assert ours_rms <= 2 * torch_rms + floor, f"{what}: rms error {ours_rms} vs torch.addmm {torch_rms}"


def _operands(torch, m, n, k, dtype, b_major, gen):
    a = torch.randn(m, k, generator=gen).to(dtype).cuda()
    b = torch.randn(k, n, generator=gen).to(dtype).cuda()
    if b_major == "k":  # the transpose of a row-major (N, K) tensor, as an nn.Linear weight
        b = b.t().contiguous().t()
    c = torch.randn(m, n, generator=gen).to(dtype).cuda()
    return a, b, c


@pytest.mark.parametrize("b_major", ["k", "mn"])
@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_matches_f32_reference_within_twice_torch_error(torch_gpu, dtype_name, b_major):
    torch = torch_gpu
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(torch.seed())
    drawn = [tuple(int(torch.randint(1, 400, (1,), generator=gen)) * s for s in (1, 8, 8)) for _ in range(6)]
    for m, n, k in SHAPES + drawn:
        a, b, c = _operands(torch, m, n, k, dtype, b_major, gen)
        alpha, beta = float(torch.empty(()).uniform_(-2, 2)), float(torch.empty(()).uniform_(-2, 2))
        out = torch.ops.fa4.gemm_residual(a, b, c, alpha, beta)
        assert out.shape == (m, n) and out.dtype == dtype and out.is_contiguous()
        _check(torch, a, b, c, alpha, beta, out, f"{dtype} B {b_major}-major {m}x{n}x{k} alpha {alpha} beta {beta}")


@pytest.mark.parametrize("b_major", ["k", "mn"])
def test_beta_zero_never_reads_c(torch_gpu, b_major):
    torch = torch_gpu
    gen = torch.Generator().manual_seed(torch.seed())
    for m, n, k in [(300, 264, 136), (128, 256, 64), (1000, 1000, 1000)]:
        a, b, c = _operands(torch, m, n, k, torch.bfloat16, b_major, gen)
        c.fill_(float("nan"))
        out = torch.ops.fa4.gemm_residual(a, b, c, 1.5, 0.0)
        _check(torch, a, b, c, 1.5, 0.0, out, f"beta 0 {m}x{n}x{k}")


def test_every_output_element_is_written(torch_gpu, gpu):
    """Through the runtime with a NaN-poisoned D: the kernel must overwrite all of it, ragged tiles
    included, and nothing outside (a guard row after D stays poisoned)."""
    torch = torch_gpu
    for m, n, k in [(77, 264, 200), (1000, 1032, 520), (129, 4104, 72)]:
        config = GemmConfig(target=runtime.device_target(gpu), b_major="mn")
        kernel = runtime.load("gemm", config, device=gpu)
        a, b, c = _operands(torch, m, n, k, torch.bfloat16, "mn", torch.Generator().manual_seed(m))
        d = torch.full((m + 1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        grid, scalars = gemm.launch_geometry(config, m, n, k, kernel.resident_ctas)
        tensor = runtime.GlobalTensor
        kernel.launch(grid, {"a": tensor.contiguous(a.data_ptr(), "bf16", (m, k), gpu),
                             "b": tensor.contiguous(b.data_ptr(), "bf16", (k, n), gpu),
                             "c": tensor.contiguous(c.data_ptr(), "bf16", (m, n), gpu),
                             "d": tensor.contiguous(d.data_ptr(), "bf16", (m, n), gpu),
                             **scalars, "alpha": 1.0, "beta": 1.0, "has_c": 1})
        torch.cuda.synchronize()
        assert not torch.isnan(d[:m]).any(), f"{m}x{n}x{k}: unwritten elements"
        assert torch.isnan(d[m]).all(), f"{m}x{n}x{k}: the kernel wrote past D"
        _check(torch, a, b, c, 1.0, 1.0, d[:m], f"runtime {m}x{n}x{k}")


def test_small_grid_walks_every_tile(torch_gpu, gpu):
    """Fewer CTAs than tiles: each CTA loops over many tiles (the persistent schedule and the
    pipelines' phases across tiles)."""
    torch = torch_gpu
    config = GemmConfig(target=runtime.device_target(gpu))
    kernel = runtime.load("gemm", config, device=gpu)
    m, n, k = 1100, 2056, 320
    a, b, c = _operands(torch, m, n, k, torch.bfloat16, "k", torch.Generator().manual_seed(7))
    for ctas in (1, 3, 7):
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        grid, scalars = gemm.launch_geometry(config, m, n, k, ctas)
        tensor = runtime.GlobalTensor
        kernel.launch(grid, {"a": tensor.contiguous(a.data_ptr(), "bf16", (m, k), gpu),
                             "b": tensor.contiguous(b.t().data_ptr(), "bf16", (n, k), gpu),
                             "c": tensor.contiguous(c.data_ptr(), "bf16", (m, n), gpu),
                             "d": tensor.contiguous(d.data_ptr(), "bf16", (m, n), gpu),
                             **scalars, "alpha": 0.5, "beta": 2.0, "has_c": 1})
        torch.cuda.synchronize()
        _check(torch, a, b, c, 0.5, 2.0, d, f"{ctas} CTAs")


def test_k_zero_and_empty_outputs(torch_gpu):
    torch = torch_gpu
    c = torch.randn(5, 8, device="cuda").bfloat16()
    a, b = torch.empty(5, 0, device="cuda").bfloat16(), torch.empty(0, 8, device="cuda").bfloat16()
    assert torch.equal(torch.ops.fa4.gemm_residual(a, b, c, 1.0, 2.0), c * 2.0)
    assert torch.ops.fa4.gemm_residual(torch.empty(0, 8, device="cuda").bfloat16(),
                                       torch.empty(8, 8, device="cuda").bfloat16(),
                                       torch.empty(0, 8, device="cuda").bfloat16()).shape == (0, 8)


def test_errors_name_what_is_wrong(torch_gpu):
    torch = torch_gpu
    a = torch.randn(64, 64, device="cuda").bfloat16()
    b = torch.randn(64, 32, device="cuda").bfloat16()
    c = torch.randn(64, 32, device="cuda").bfloat16()
    cases = [
        ((a.cpu(), b, c), "a must be a CUDA tensor"),
        ((a.float(), b.float(), c.float()), "dtype must be one of"),
        ((a, b.half(), c), "must have one dtype"),
        ((a[0], b, c), "a must be 2-D"),
        ((a, b[:48], c), r"b must be \(K, N\) with K = a.shape\[1\] = 64"),
        ((a, b, c[:, :16]), r"c must be \(M, N\) = \(64, 32\)"),
        ((a, b, c[0]), "c must be 2-D"),
        ((a, b[:, ::2], c[:, :16]), "b must be row-major"),
        ((torch.randn(64, 60, device="cuda").bfloat16(), b[:60], c), "multiples of 16 bytes"),
        ((a, b, c.t().contiguous().t()), "unit innermost stride"),
    ]
    for args, message in cases:
        with pytest.raises(runtime.LaunchError, match=message):
            torch.ops.fa4.gemm_residual(*args)
