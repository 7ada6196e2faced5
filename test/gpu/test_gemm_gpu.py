"""The GEMM with residual epilogue on a real GPU and (the ``backend`` tests) in the emulator:
numerics against the float64 reference (error within 2x that of the same product at the kernel's
precision, ``fa4_mlir.reference``), every output element written, beta = 0 ignores C, both B layouts,
and the op's errors."""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir import reference, runtime
from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.kernels import gemm

# Tile multiples, ragged M / N / K (tiles are 128 x 256 x 64), single rows, K below one K block.
SHAPES = [(128, 256, 64), (256, 512, 1024), (1, 8, 8), (77, 264, 200), (257, 136, 1032), (1000, 1000, 72),
          (3000, 520, 8), (129, 4104, 520), (2048, 2048, 2048)]
EMULATOR_SHAPES = [(128, 256, 64), (1, 8, 8), (77, 264, 200)]
# sm_90a schedules besides the op's default: pingpong warpgroups with the op's pingpong tile (128 x 192,
# 4 A/B stages) or a 64 x 256 tile each, and both tiles in 2x1 clusters sharing B (multicast; on sm_100a the
# default alone)
SCHEDULES = {"default": {}, "pingpong": gemm.SM90_PINGPONG, "pingpong64x256": dict(pingpong=True, tile_m=64),
             "cluster": dict(cluster_m=2), "pingpong-cluster": dict(gemm.SM90_PINGPONG, cluster_m=2)}


def _config(backend, schedule: str, **kw) -> GemmConfig:
    if schedule != "default" and backend.target != "sm_90a":
        pytest.skip(f"{schedule} is an sm_90a schedule")
    return GemmConfig(target=backend.target, **SCHEDULES[schedule], **kw)


def _check(a, b, c, alpha, beta, out, dtype, what):
    """``out`` (bits) against the float64 reference, with the correctly rounded product as the yardstick."""
    ref = reference.gemm_residual(*(reference.to_f64(t, dtype) for t in (a, b, c)), alpha, beta)
    result = reference.compare(out, ref, reference.gemm_yardstick(ref, dtype), dtype)
    assert not np.isnan(reference.to_f32(out, dtype)).any(), \
        f"{what}: NaN in the output (an element was never written, or C leaked)"
    assert result.ok, f"{what}: {result.summary()}"


def _operands(rng, m, n, k, dtype):
    """a (M, K), b (K, N), c (M, N) as ``dtype`` bits of standard normal values."""
    return (reference.random_bits(rng, (m, k), dtype, 1.0), reference.random_bits(rng, (k, n), dtype, 1.0),
            reference.random_bits(rng, (m, n), dtype, 1.0))


@pytest.mark.parametrize("b_major", ["k", "mn"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_matches_f64_reference_within_twice_the_rounding_error(backend, dtype, b_major):
    rng = np.random.default_rng()
    drawn = [tuple(int(rng.integers(1, 400)) * s for s in (1, 8, 8)) for _ in range(backend.pick(6, 1))]
    if backend.name == "emulator" and not backend.full:
        drawn = [(m % 200 + 1, n % 264 + 8, k % 136 + 8) for m, n, k in drawn]
    for m, n, k in backend.pick(SHAPES, EMULATOR_SHAPES) + drawn:
        a, b, c = _operands(rng, m, n, k, dtype)
        alpha, beta = float(rng.uniform(-2, 2)), float(rng.uniform(-2, 2))
        out = backend.gemm_residual(a, b, c, alpha, beta, dtype, b_major)
        assert out.shape == (m, n)
        _check(a, b, c, alpha, beta, out, dtype, f"{backend}: {dtype} B {b_major}-major {m}x{n}x{k} alpha {alpha} "
                                                 f"beta {beta}")


@pytest.mark.parametrize("b_major", ["k", "mn"])
def test_beta_zero_never_reads_c(backend, b_major):
    rng = np.random.default_rng()
    for m, n, k in backend.pick([(300, 264, 136), (128, 256, 64), (1000, 1000, 1000)], [(200, 264, 136)]):
        a, b, c = _operands(rng, m, n, k, "bf16")
        c[:] = reference.POISON["bf16"]  # NaN
        out = backend.gemm_residual(a, b, c, 1.5, 0.0, "bf16", b_major)
        _check(a, b, c, 1.5, 0.0, out, "bf16", f"{backend}: beta 0 {m}x{n}x{k}")


def _launch(backend, kernel, config, a, b_mem, c, d, m, n, k, ctas, alpha, beta):
    """Through the runtime: ``d``'s first m rows = alpha a @ B + beta c (b_mem as the kernel reads B)."""
    grid, scalars = gemm.launch_geometry(config, m, n, k, ctas)
    backend.launch(kernel, grid, {"a": backend.tensor(a, "bf16"), "b": backend.tensor(b_mem, "bf16"),
                                  "c": backend.tensor(c, "bf16"), "d": backend.tensor(d, "bf16", (m, n)),
                                  **scalars, "alpha": alpha, "beta": beta, "has_c": int(beta != 0)})


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_output_element_is_written(backend, schedule):
    """Through the runtime with a NaN-poisoned D: the kernel must overwrite all of it, ragged tiles
    included, and nothing outside (a guard row after D stays poisoned)."""
    config = _config(backend, schedule, b_major="mn")
    kernel = backend.load("gemm", config)
    for m, n, k in backend.pick([(77, 264, 200), (1000, 1032, 520), (129, 4104, 72)], [(77, 264, 200)]):
        a, b, c = _operands(np.random.default_rng(m), m, n, k, "bf16")
        d = backend.array(np.full((m + 1, n), reference.POISON["bf16"], np.uint16))
        _launch(backend, kernel, config, backend.array(a), backend.array(b), backend.array(c), d, m, n, k,
                kernel.resident_ctas, 1.0, 1.0)
        out = backend.host(d)
        what = f"{backend}: {m}x{n}x{k}"
        assert not (out[:m] == reference.POISON["bf16"]).any(), f"{what}: unwritten elements"
        assert (out[m] == reference.POISON["bf16"]).all(), f"{what}: the kernel wrote past D"
        _check(a, b, c, 1.0, 1.0, out[:m], "bf16", f"runtime {what}")


# without C only the pingpong schedules (their steps past the other warpgroup's tiles then leave the C
# ring alone); the default's beta = 0 path is test_beta_zero_never_reads_c's, and the clusters change
# nothing of C
WALKS = [(s, True) for s in SCHEDULES] + [(s, False) for s in ("pingpong", "pingpong64x256")]


@pytest.mark.parametrize("schedule, has_c", WALKS)
def test_small_grid_walks_every_tile(backend, schedule, has_c):
    """Fewer CTAs than tiles: each CTA loops over many tiles (the persistent schedule and the
    pipelines' phases across tiles; with pingpong each warpgroup's tiles and its steps past the
    other's in both rings, or in the A/B ring alone when C is not read)."""
    config = _config(backend, schedule)
    kernel = backend.load("gemm", config)
    m, n, k = backend.pick((1100, 2056, 320), (300, 520, 136))
    a, b, c = _operands(np.random.default_rng(7), m, n, k, "bf16")
    beta = 2.0 if has_c else 0.0
    if not has_c:
        c[:] = reference.POISON["bf16"]  # NaN: C must not be read
    handles = backend.array(a), backend.array(np.ascontiguousarray(b.T)), backend.array(c)
    for ctas in backend.pick((1, 3, 7), (2,)):  # the emulator: 2 CTAs, many tiles each
        d = backend.array(np.full((m, n), reference.POISON["bf16"], np.uint16))
        _launch(backend, kernel, config, *handles, d, m, n, k, ctas, 0.5, beta)
        _check(a, b, c, 0.5, beta, backend.host(d), "bf16", f"{backend}: {config.describe()}, {ctas} CTAs")


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
