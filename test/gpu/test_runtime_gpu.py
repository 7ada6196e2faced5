"""copy-pipeline through the runtime API alone (cuda-python + NumPy, no PyTorch) on a real GPU, and
(the ``backend`` tests) in the emulator."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fa4_mlir import runtime
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.kernels.copy_pipeline import launch_geometry
from fa4_mlir.reference import POISON, random_bits, scaled
from fa4_mlir.runtime import GlobalTensor

# Tile multiples, ragged edges in rows and columns, single rows, tiles larger than the tensor.
SHAPES = [(128, 64), (256, 128), (1, 8), (3, 24), (129, 72), (200, 296), (1000, 64), (777, 1000), (4097, 520)]
EMULATOR_SHAPES = [(128, 64), (1, 8), (129, 72), (200, 136)]


def run_copy(backend, kernel, config, host: np.ndarray, scale: float, src_stride: int | None = None,
             ctas: int | None = None) -> np.ndarray:
    """``scale * host`` through ``kernel`` on ``backend``, from a source whose rows are ``src_stride``
    elements apart, into a POISON-filled destination."""
    rows, cols = host.shape
    stride = src_stride or cols
    padded = np.zeros((rows, stride), dtype=np.uint16)
    padded[:, :cols] = host
    src = backend.array(padded)
    dst = backend.array(np.full((rows, cols), POISON[config.dtype], np.uint16))
    grid, tiles = launch_geometry(config, rows, cols, ctas or kernel.resident_ctas)
    backend.launch(kernel, grid, {"src": backend.tensor(src, config.dtype, (rows, cols)),
                                  "dst": backend.tensor(dst, config.dtype), **tiles, "scale": scale})
    return backend.host(dst)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_copy_pipeline_is_exact_on_random_sizes(backend, dtype):
    config = CopyPipelineConfig(dtype=dtype, target=backend.target)
    kernel = backend.load("copy-pipeline", config)
    rng = np.random.default_rng()
    drawn = backend.pick([(int(rng.integers(1, 3000)), 8 * int(rng.integers(1, 300))) for _ in range(12)],
                         [(int(rng.integers(1, 300)), 8 * int(rng.integers(1, 30)))])
    for rows, cols in backend.pick(SHAPES, EMULATOR_SHAPES) + drawn:
        host = random_bits(rng, (rows, cols), dtype)
        scale = float(rng.uniform(-3, 3))
        # Persistent grids of every size: one tile per CTA, a few CTAs crossing row blocks, one CTA.
        ctas = int(rng.choice([kernel.resident_ctas, 7, 1, 10**9]))
        out = run_copy(backend, kernel, config, host, scale, ctas=ctas)
        expected = scaled(host, scale, dtype)
        assert np.array_equal(out, expected), (
            f"{backend}: {dtype} {rows}x{cols} scale {scale} on {ctas} CTAs: {np.count_nonzero(out != expected)} "
            f"elements differ, {np.count_nonzero(out == POISON[dtype])} never written")


def test_copy_pipeline_reads_strided_rows(backend):
    config = CopyPipelineConfig(target=backend.target)
    kernel = backend.load("copy-pipeline", config)
    host = random_bits(np.random.default_rng(), (300, 200), "bf16")
    assert np.array_equal(run_copy(backend, kernel, config, host, 1.0, src_stride=264), host), backend


def test_the_debug_build_gives_the_same_results(backend):
    config = CopyPipelineConfig(target=backend.target)
    kernel = backend.load("copy-pipeline", config, debug=True)
    assert kernel.debug_timeout_ms > 0
    host = random_bits(np.random.default_rng(), backend.pick((1000, 776), (200, 136)), "bf16")
    assert np.array_equal(run_copy(backend, kernel, config, host, 0.5), scaled(host, 0.5, "bf16")), backend


def test_launch_checks_name_what_is_wrong(gpu):
    config = CopyPipelineConfig(target=runtime.device_target(gpu))
    kernel = runtime.load("copy-pipeline", config, device=gpu)
    good = GlobalTensor.contiguous(1 << 20, "bf16", (128, 64))
    args = {"src": good, "dst": good, "num_tiles": 1, "total_tiles": 1, "tiles_per_cta": 1, "scale": 1.0}
    cases = [
        ((1,), {**args, "src": GlobalTensor.contiguous(1 << 20, "fp16", (128, 64))}, "must be bf16"),
        ((1,), {**args, "src": GlobalTensor(1 << 20, "bf16", (128, 60), (60, 1))}, "multiples of 16 bytes"),
        ((1,), {**args, "src": GlobalTensor(2 + (1 << 20), "bf16", (128, 64), (64, 1))}, "16-byte aligned"),
        ((1,), {**args, "src": GlobalTensor(1 << 20, "bf16", (128, 64), (1, 128))}, "unit innermost stride"),
        ((1,), {**args, "src": GlobalTensor.contiguous(1 << 20, "bf16", (4, 128, 64))}, "must be 2-D"),
        ((1,), {**args, "num_tiles": 2**31}, "must be an int in"),
        ((1,), {**args, "scale": float("nan")}, "finite number"),
        ((1,), {k: v for k, v in args.items() if k != "scale"}, "missing ['scale']"),
        ((0,), args, "grid must be 1 to 3 positive ints"),
        ((1,), {**args, "src": 5}, "must be a GlobalTensor or a CUtensorMap"),
        ((1,), {**args, "src": GlobalTensor.contiguous(1 << 20, "bf16", (128, 64), device=gpu + 1)}, "must be on device"),
    ]
    for grid, bad, message in cases:
        with pytest.raises(runtime.LaunchError, match=message.replace("[", r"\[").replace("]", r"\]")):
            kernel.launch(grid, bad)
    with pytest.raises(runtime.LaunchError, match="stream must be a CUstream, an int handle or have .cuda_stream"):
        kernel.launch((1,), args, stream="default")
    with pytest.raises(runtime.LaunchError, match=r"device must be an index in \[0, \d+\), got 99"):
        runtime.load("copy-pipeline", config, device=99)


def test_an_sm100a_artifact_is_refused_on_another_gpu(gpu):
    target = runtime.device_target(gpu)
    other = "sm_100a" if target == "sm_90a" else "sm_90a"
    with pytest.raises(runtime.LaunchError, match=f"got a {other} artifact.*rebuild with fa4-compile --target {target}"):
        runtime.load("copy-pipeline", CopyPipelineConfig(target=other), device=gpu)


def test_load_is_memoised_per_process(backend):
    config = CopyPipelineConfig(target=backend.target)
    assert backend.load("copy-pipeline", config) is backend.load("copy-pipeline", config)



def test_doctored_manifests_are_refused_with_a_reason(gpu, tmp_path):
    config = CopyPipelineConfig(target=runtime.device_target(gpu))
    source = runtime.load("copy-pipeline", config, device=gpu).artifact

    def doctored(change) -> runtime.Kernel:
        manifest = json.loads(json.dumps(source.manifest))
        change(manifest)
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "copy_pipeline.json").write_text(json.dumps(manifest))
        (folder / "copy_pipeline.cubin").write_bytes(source.cubin)
        return runtime.load_artifact(folder, device=gpu)

    with pytest.raises(runtime.LaunchError, match=r"shared memory must fit device \d+'s \d+ B per block, got 300000 B"):
        doctored(lambda m: m.update(smem_bytes=300000))
    good = GlobalTensor.contiguous(1 << 20, "bf16", (128, 64))
    args = {"src": good, "dst": good, "num_tiles": 1, "total_tiles": 1, "tiles_per_cta": 1, "scale": 1.0}
    no_spec = doctored(lambda m: m["params"][0].pop("tensor_map"))
    with pytest.raises(runtime.LaunchError, match="the manifest has no tensor-map spec; pass an encoded CUtensorMap"):
        no_spec.launch((1,), args)
    odd_kind = doctored(lambda m: m["params"][5].update(kind="f64"))
    with pytest.raises(runtime.LaunchError, match="has kind 'f64', which this runtime cannot pass"):
        odd_kind.launch((1,), args)
