"""The runtime on the PTX emulator (``device="emulator"``): loading artifacts, launching copy-pipeline,
a small GEMM and a small attention on sm_90a against NumPy, and every argument check's message.

Artifacts come from the runtime's cache (FA4_CACHE_DIR), compiled on first use; the numerics of
every kernel at more shapes are test/gpu's (``--backend emulator``)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from fa4_mlir import emu, reference, runtime
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.errors import ArtifactError, LaunchError
from fa4_mlir.kernels.copy_pipeline import launch_geometry
from fa4_mlir.runtime import GlobalTensor
from fa4_mlir.runtime.emulated import RESIDENT_CTAS, EmulatedKernel
from fa4_mlir.tools.fa4_emu import launch_attention, launch_gemm

ROOT = pathlib.Path(__file__).resolve().parents[2]
BROKEN = ROOT / "test" / "gpu" / "kernels" / "broken_barrier.mlir"


@pytest.fixture(scope="module")
def copy_kernel() -> EmulatedKernel:
    return runtime.load("copy-pipeline", device="emulator")


def _copy_args(kernel, rows=256, cols=128, scale=1.5):
    x = reference.random_bits(np.random.default_rng(rows), (rows, cols), "bf16")
    out = np.full((rows, cols), reference.POISON["bf16"], np.uint16)
    grid, tiles = launch_geometry(CopyPipelineConfig(target="sm_90a"), rows, cols, kernel.resident_ctas)
    return x, out, grid, {"src": GlobalTensor.host(x, "bf16"), "dst": GlobalTensor.host(out, "bf16"), **tiles,
                          "scale": scale}


# -- loading ------------------------------------------------------------------------------------------------

def test_load_defaults_to_sm90a_and_has_the_kernel_surface(copy_kernel):
    kernel = copy_kernel
    assert isinstance(kernel, EmulatedKernel) and kernel.device == "emulator"
    assert kernel.manifest["target"] == "sm_90a" and kernel.name == "copy_pipeline"
    assert kernel.threads == (384, 1, 1) and kernel.cluster == (1, 1, 1)
    assert kernel.smem_bytes == kernel.manifest["smem_bytes"] and kernel.debug_timeout_ms == 0
    assert kernel.resident_ctas == RESIDENT_CTAS == 2
    assert [p["name"] for p in kernel.params] == ["src", "dst", "num_tiles", "total_tiles", "tiles_per_cta", "scale"]
    assert kernel.ptx_path == kernel.artifact.path / "copy_pipeline.ptx"
    assert runtime.load("copy-pipeline", CopyPipelineConfig(target="sm_90a"), device="emulator") is kernel
    assert repr(kernel) == "<fa4 kernel copy_pipeline sm_90a on the emulator>"


def test_the_cache_keeps_the_ptx_next_to_the_cubin(copy_kernel):
    files = sorted(p.name for p in copy_kernel.artifact.path.iterdir())
    assert files == ["copy_pipeline.cubin", "copy_pipeline.json", "copy_pipeline.ptx", "key.json"]


def test_load_artifact_and_load_file_on_the_emulator(tmp_path):
    done = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", "copy-pipeline", "--target", "sm_90a",
                           "--consumers", "1", "-o", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kernel = runtime.load_artifact(tmp_path, device="emulator")
    assert isinstance(kernel, EmulatedKernel) and kernel.manifest["config"]["consumers"] == 1
    x, out, grid, args = _copy_args(kernel, 128, 64)
    kernel.launch(grid, args)
    assert np.array_equal(out, reference.scaled(x, 1.5, "bf16"))
    broken = runtime.load_file(BROKEN, device="emulator")
    assert broken.manifest["target"] == "sm_90a"
    with pytest.raises(emu.Deadlock, match="every live warp is blocked"):
        broken.launch((2,), {})


def test_an_artifact_without_its_ptx_is_refused(tmp_path, copy_kernel):
    for path in copy_kernel.artifact.path.iterdir():
        if path.suffix != ".ptx":
            shutil.copy(path, tmp_path / path.name)
    with pytest.raises(ArtifactError, match=r"PTX '.*copy_pipeline.ptx' does not exist; the emulator runs the "
                                            r"<entry>.ptx that fa4-compile writes next to the cubin"):
        runtime.load_artifact(tmp_path, device="emulator")


def _doctored(tmp_path, source, change) -> EmulatedKernel:
    folder = tmp_path / str(len(list(tmp_path.iterdir())))
    shutil.copytree(source.artifact.path, folder)
    manifest = json.loads((folder / "copy_pipeline.json").read_text())
    change(manifest)
    (folder / "copy_pipeline.json").write_text(json.dumps(manifest))
    return runtime.load_artifact(folder / "copy_pipeline.json", device="emulator")


def test_doctored_manifests_are_refused_with_a_reason(tmp_path, copy_kernel):
    with pytest.raises(LaunchError, match=r"shared memory must fit the emulator's 232448 B per block .* got 300000 B"):
        _doctored(tmp_path, copy_kernel, lambda m: m.update(smem_bytes=300000))
    with pytest.raises(ArtifactError, match="must take the manifest's 5 parameters, got 6"):
        _doctored(tmp_path, copy_kernel, lambda m: m["params"].pop())
    renamed = tmp_path / "renamed"
    shutil.copytree(copy_kernel.artifact.path, renamed)
    for suffix in (".cubin", ".ptx"):
        (renamed / f"copy_pipeline{suffix}").rename(renamed / f"nope{suffix}")
    manifest = json.loads((renamed / "copy_pipeline.json").read_text())
    (renamed / "copy_pipeline.json").write_text(json.dumps({**manifest, "entry": "nope"}))
    with pytest.raises(ArtifactError, match="nope.ptx' must define the manifest's kernel nope, got copy_pipeline"):
        runtime.load_artifact(renamed / "copy_pipeline.json", device="emulator")
    no_spec = _doctored(tmp_path, copy_kernel, lambda m: m["params"][0].pop("tensor_map"))
    _, _, grid, args = _copy_args(no_spec)
    with pytest.raises(LaunchError, match="the manifest has no tensor-map spec; pass an emu.TensorMap"):
        no_spec.launch(grid, args)
    odd_kind = _doctored(tmp_path, copy_kernel, lambda m: m["params"][5].update(kind="f64"))
    with pytest.raises(LaunchError, match="has kind 'f64', which this runtime cannot pass"):
        odd_kind.launch(grid, args)


def test_bad_device_values_are_refused():
    message = r"device must be a GPU index \(int\), None \(the current GPU\) or 'emulator', got "
    with pytest.raises(LaunchError, match=message + "'cuda'"):
        runtime.load("copy-pipeline", device="cuda")
    with pytest.raises(LaunchError, match=message + "'Emulator'"):
        runtime.load_file(BROKEN, device="Emulator")
    with pytest.raises(LaunchError, match=message + "1.5"):
        runtime.load_artifact(".", device=1.5)
    with pytest.raises(LaunchError, match=message + "True"):
        runtime.load("copy-pipeline", device=True)


# -- launching ------------------------------------------------------------------------------------------------

def test_copy_pipeline_is_exact_by_name_and_in_order(copy_kernel):
    x, out, grid, args = _copy_args(copy_kernel)
    stats = copy_kernel.launch(grid, args, seed=3)
    assert np.array_equal(out, reference.scaled(x, 1.5, "bf16"))
    assert stats.instructions > stats.warp_instructions > 0 and stats.ctas == grid[0] == 2 and stats.seconds > 0
    out[:] = 0
    copy_kernel.launch(grid, list(args.values()), stream=0)
    assert np.array_equal(out, reference.scaled(x, 1.5, "bf16"))


def test_copy_pipeline_takes_views_and_emu_tensor_maps(copy_kernel):
    """A row-strided view (rows 264 elements apart) in, a GlobalTensor over the leading rows of a
    larger array out (the guard row stays poisoned), and emu.TensorMaps built by hand."""
    rows, cols = 200, 136
    padded = reference.random_bits(np.random.default_rng(1), (rows, 264), "bf16")
    out = np.full((rows + 1, cols), reference.POISON["bf16"], np.uint16)
    whole = GlobalTensor.host(out, "bf16")
    dst = dataclasses.replace(whole, shape=(rows, cols))
    grid, tiles = launch_geometry(CopyPipelineConfig(target="sm_90a"), rows, cols, 3)
    copy_kernel.launch(grid, {"src": GlobalTensor.host(padded[:, :cols], "bf16"), "dst": dst, **tiles, "scale": -2.0})
    assert np.array_equal(out[:rows], reference.scaled(padded[:, :cols], -2.0, "bf16"))
    assert (out[rows] == reference.POISON["bf16"]).all()
    maps = {"src": emu.TensorMap(padded[:, :cols], box=(128, 64), swizzle="none", dtype="bf16"),
            "dst": emu.TensorMap(out[:rows], box=(64, 64), swizzle="none", dtype="bf16")}
    copy_kernel.launch(grid, {**maps, **tiles, "scale": 0.5})
    assert np.array_equal(out[:rows], reference.scaled(padded[:, :cols], 0.5, "bf16"))


def test_small_gemm_matches_numpy():
    config = GemmConfig(target="sm_90a")
    kernel = runtime.load("gemm", config, device="emulator")
    rng = np.random.default_rng(0)
    m, n, k = 128, 256, 128
    a, b, c = (reference.random_bits(rng, shape, "bf16", 1.0) for shape in ((m, k), (k, n), (m, n)))
    d = np.full((m, n), reference.POISON["bf16"], np.uint16)
    stats = launch_gemm(kernel, config, a, np.ascontiguousarray(b.T), c, d, 0.5, 2.0)
    ref = reference.gemm_residual(*(reference.to_f64(t, "bf16") for t in (a, b, c)), 0.5, 2.0)
    result = reference.compare(d, ref, reference.gemm_yardstick(ref, "bf16"), "bf16")
    assert result.ok and result.unwritten == 0, result.summary()
    assert stats.ctas == 1


def test_small_attention_matches_numpy():
    config = AttentionConfig(target="sm_90a", head_dim=64, causal=True)
    kernel = runtime.load("attention", config, device="emulator")
    rng = np.random.default_rng(0)
    q, k, v = (reference.random_bits(rng, (1, s, 2, 64), "bf16", 1.0) for s in (100, 150, 150))
    o = np.full(q.shape, reference.POISON["bf16"], np.uint16)
    lse = np.full((1, 2, 100), np.nan, np.float32)
    launch_attention(kernel, config, q, k, v, o, lse, 0.125)
    qf, kf, vf = (reference.to_f64(t, "bf16") for t in (q, k, v))
    ref, ref_lse = reference.attention(qf, kf, vf, True, 0.125)
    result = reference.compare(o, ref, reference.attention_yardstick(qf, kf, vf, True, 0.125, "bf16"), "bf16")
    assert result.ok, result.summary()
    assert float(np.abs(lse - ref_lse).max()) <= reference.lse_tolerance(ref_lse)


def test_an_sm100a_artifact_runs_in_the_emulator():
    config = GemmConfig(target="sm_100a")
    kernel = runtime.load("gemm", config, device="emulator")
    assert kernel.manifest["target"] == "sm_100a"
    rng = np.random.default_rng(2)
    a, b, c = (reference.random_bits(rng, shape, "bf16", 1.0) for shape in ((128, 64), (256, 64), (128, 256)))
    d = np.full_like(c, reference.POISON["bf16"])
    launch_gemm(kernel, config, a, b, c, d, 0.5, 1.0)
    af, bf, cf = (reference.to_f64(t, "bf16") for t in (a, b, c))
    ref = 0.5 * af @ bf.T + cf
    assert np.abs(reference.to_f64(d, "bf16") - ref).max() <= 2 ** -7 * (np.abs(ref).max() + 1)


def test_an_sm100a_pair_gemm_runs_in_the_emulator():
    # cta_group::2: a cluster of two CTAs, TMA .cta_group::2 into the leader's barriers, the pair MMA,
    # multicast commits, mapa + remote mbarrier arrives.
    config = GemmConfig(target="sm_100a", cta_group=2, tile_m=256)
    kernel = runtime.load("gemm", config, device="emulator")
    assert kernel.manifest["cluster"] == [2, 1, 1]
    rng = np.random.default_rng(3)
    a, b, c = (reference.random_bits(rng, shape, "bf16", 1.0) for shape in ((256, 128), (256, 128), (256, 256)))
    d = np.full_like(c, reference.POISON["bf16"])
    launch_gemm(kernel, config, a, b, c, d, 1.0, 0.5)
    af, bf, cf = (reference.to_f64(t, "bf16") for t in (a, b, c))
    ref = af @ bf.T + 0.5 * cf
    assert np.abs(reference.to_f64(d, "bf16") - ref).max() <= 2 ** -7 * (np.abs(ref).max() + 1)


# -- argument checks ------------------------------------------------------------------------------------------

def test_tensor_map_arguments_are_checked(copy_kernel):
    x, out, grid, args = _copy_args(copy_kernel, 128, 64)
    what = "argument 'src' of copy_pipeline"
    cases = [
        (5, f"{what} must be a GlobalTensor over a NumPy array \\(GlobalTensor.host\\) or an emu.TensorMap on the "
            f"emulator, got int"),
        (x, "got ndarray"),
        (GlobalTensor.contiguous(1 << 20, "bf16", (128, 64)),
         f"{what} must be a host GlobalTensor on the emulator \\(GlobalTensor.host\\(array, dtype\\)\\), got one at "
         f"device address 0x100000"),
        (GlobalTensor.host(x, "fp16"), f"{what} must be bf16 \\(the kernel was compiled for it\\), got fp16"),
        (GlobalTensor.host(x.reshape(2, 64, 64), "bf16"), f"{what} must be 2-D, got shape \\(2, 64, 64\\)"),
        (GlobalTensor.host(np.zeros((128, 60), np.uint16), "bf16"), "strides must be multiples of 16 bytes"),
        (GlobalTensor.host(x.T, "bf16"), "must have a unit innermost stride"),
        (GlobalTensor.host(x[:, 1:], "bf16"), "address must be 16-byte aligned"),
        (dataclasses.replace(GlobalTensor.host(x, "bf16"), shape=(129, 64)),
         f"{what} must lie inside the memory of its host array"),
        (emu.TensorMap(x.view(np.float16), box=(128, 64), swizzle="none"),
         f"{what} must be bf16 \\(the kernel was compiled for it\\), got a TensorMap of f16"),
        (emu.TensorMap(x, box=(64, 64), swizzle="none", dtype="bf16"),
         f"{what} must have the manifest's box \\(128, 64\\) \\(outermost first\\) and swizzle none, got box "
         f"\\(64, 64\\) and swizzle none"),
    ]
    for value, message in cases:
        with pytest.raises(LaunchError, match=message):
            copy_kernel.launch(grid, {**args, "src": value})


def test_scalars_grid_stream_and_seed_are_checked_as_on_a_gpu(copy_kernel):
    _, _, grid, args = _copy_args(copy_kernel, 128, 64)
    cases = [
        ((1,), {**args, "num_tiles": 2**31}, r"argument 'num_tiles' of copy_pipeline must be an int in \[-2147483648"),
        ((1,), {**args, "num_tiles": 1.0}, "must be an int in"),
        ((1,), {**args, "scale": float("nan")}, "argument 'scale' of copy_pipeline must be a finite number, got nan"),
        ((1,), {**args, "scale": "2"}, "must be a finite number"),
        ((1,), {k: v for k, v in args.items() if k != "scale"}, r"missing \['scale'\], unknown none"),
        ((1,), list(args.values())[:-1], r"copy_pipeline takes 6 arguments \(src, dst, num_tiles, total_tiles, "
                                         r"tiles_per_cta, scale\), got 5"),
        ((0,), args, "grid must be 1 to 3 positive ints, got"),
        ((1, 1, 1, 1), args, "grid must be 1 to 3 positive ints"),
        ((1, 70000), args, "grid dimension y must be <= 65535"),
        ((1,), None, r"arguments of copy_pipeline must be a mapping by name or a sequence in order \(src, dst, "
                     r"num_tiles, total_tiles, tiles_per_cta, scale\), got NoneType"),
        ((1,), "abc", r"must be a mapping by name or a sequence in order .*, got str"),
    ]
    for grid_, bad, message in cases:
        with pytest.raises(LaunchError, match=message):
            copy_kernel.launch(grid_, bad)
    with pytest.raises(LaunchError, match="stream must be a CUstream, an int handle or have .cuda_stream, got 'x'"):
        copy_kernel.launch(grid, args, stream="x")
    for seed, shown in ((1.5, "1.5"), (-3, "-3"), (True, "True")):
        with pytest.raises(LaunchError, match=f"seed must be an int >= 0, got {shown}"):
            copy_kernel.launch(grid, args, seed=seed)


def test_pointer_arguments_take_arrays_or_none():
    kernel = runtime.load("attention", AttentionConfig(target="sm_90a", head_dim=64, causal=True), device="emulator")
    q = np.zeros((1, 8, 2, 64), np.uint16)
    args = {"q": GlobalTensor.host(q, "bf16"), "k": GlobalTensor.host(q, "bf16"), "v": GlobalTensor.host(q, "bf16"),
            "o": GlobalTensor.host(q.copy(), "bf16"), "lse": 1 << 20, "seq_q": 8, "seq_k": 8, "num_heads": 2,
            "group": 1, "scale_log2e": 1.0, "write_lse": 0}
    with pytest.raises(LaunchError, match="argument 'lse' of attention must be a NumPy array \\(global memory on the "
                                          "emulator\\) or None, got int"):
        kernel.launch((1, 2, 1), args)
    kernel.launch((1, 2, 1), {**args, "lse": None})  # write_lse = 0: the kernel never reads the pointer


def test_global_tensor_host():
    x = np.zeros((6, 16), np.uint16)
    tensor = GlobalTensor.host(x[1:], "bf16")
    assert tensor.address == x.ctypes.data + 32 and tensor.shape == (5, 16) and tensor.strides == (16, 1)
    assert tensor.array is not None and tensor.device is None
    same = GlobalTensor(tensor.address, "bf16", (5, 16), (16, 1))
    assert tensor == same and hash(tensor) == hash(same) and repr(tensor) == repr(same)
    assert "array" not in repr(tensor)
    with pytest.raises(LaunchError, match="GlobalTensor.host takes a numpy.ndarray, got list"):
        GlobalTensor.host([1, 2], "bf16")
    with pytest.raises(LaunchError, match="GlobalTensor.host dtype must be one of bf16, fp16, fp8_e4m3, fp32, got 'f16'"):
        GlobalTensor.host(x, "f16")
    with pytest.raises(LaunchError, match=r"array must have 2-byte elements to hold bf16, got float32 \(4-byte\); "
                                          r"pass the bit patterns, e.g. array.view\(np.uint16\)"):
        GlobalTensor.host(x.astype(np.float32), "bf16")
    with pytest.raises(LaunchError, match="strides must be whole elements, got"):
        GlobalTensor.host(np.lib.stride_tricks.as_strided(x, (2, 2), (3, 2)), "bf16")


def test_the_gpu_kernel_refuses_host_tensors():
    """A host GlobalTensor given to a GPU kernel is refused before any driver call."""
    kernel = object.__new__(runtime.Kernel)
    kernel.name, kernel.device = "copy_pipeline", 0
    with pytest.raises(LaunchError, match="argument 'src' of copy_pipeline must be in device memory, got a host "
                                          "GlobalTensor .* or load the kernel with device='emulator'"):
        kernel._pack({"kind": "tensormap", "name": "src"}, GlobalTensor.host(np.zeros((8, 8), np.uint16), "bf16"))

