"""The runtime's host-side logic, without a GPU: artifact keys and cache, tensor-map rules, launch
geometry, debug knobs, and the errors a machine without a driver or compiler gets."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.errors import ArtifactError, ConfigError, CudaError, LaunchError
from fa4_mlir.kernels.copy_pipeline import MAX_TILES, launch_geometry
from fa4_mlir.runtime import artifacts, driver
from fa4_mlir.runtime.kernel import target_for_capability
from fa4_mlir.runtime.tensormap import GlobalTensor, check_tiled

ROOT = pathlib.Path(__file__).resolve().parents[2]
BROKEN = ROOT / "test" / "gpu" / "kernels" / "broken_barrier.mlir"
SPEC = {"dtype": "bf16", "box": [64, 128], "swizzle": "none"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FA4_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# -- imports ----------------------------------------------------------------------------------------------

def test_runtime_imports_without_the_mlir_bindings():
    # A finder that refuses `mlir` makes any import of the bindings fail loudly.
    code = ("import sys\n"
            "class Refuse:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'mlir' or name.startswith('mlir.'): raise ImportError('mlir refused')\n"
            "sys.meta_path.insert(0, Refuse())\n"
            "import fa4_mlir.runtime, fa4_mlir.runtime.kernel, fa4_mlir.runtime.tensormap, fa4_mlir.kernels\n"
            "from fa4_mlir.runtime.artifacts import ArtifactKey\n"
            "from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig\n"
            "ArtifactKey.for_config('copy-pipeline', CopyPipelineConfig()).path\n"
            "print(sorted(m for m in sys.modules if m == 'mlir' or m.startswith('mlir.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_runtime_and_torch_sources_never_reach_the_compiler():
    # fa4_mlir.torch cannot be imported here (no torch in CI): check what both packages import.
    forbidden = re.compile(r"^\s*(?:from|import)\s+(fa4_mlir\.(?:_mlir|core|dialects|passes|tools)|mlir)\b", re.M)
    for folder in ("runtime", "torch"):
        for path in (ROOT / "fa4_mlir" / folder).glob("*.py"):
            found = forbidden.findall(path.read_text())
            assert not found, f"{path.name} imports {found}"


# -- artifact keys and the cache ---------------------------------------------------------------------------

def test_artifact_key_depends_on_everything_that_changes_the_code(cache):
    base = artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a"))
    variants = [
        artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_100a")),
        artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a", stages=3)),
        artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a", dtype="fp16")),
        artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a"), 100),
    ]
    same = artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a"))
    assert same.digest == base.digest and same.path == base.path
    assert len({v.digest for v in variants} | {base.digest}) == len(variants) + 1
    assert base.path.parent == cache and base.path.name.startswith("copy-pipeline-sm_90a-")


def test_artifact_key_of_a_file_follows_its_content(tmp_path, cache):
    kernel = tmp_path / "k.mlir"
    kernel.write_text(BROKEN.read_text())
    first = artifacts.ArtifactKey.for_file(kernel, "sm_90a")
    kernel.write_text(BROKEN.read_text() + "\n// changed\n")
    assert artifacts.ArtifactKey.for_file(kernel, "sm_90a").digest != first.digest
    with pytest.raises(ArtifactError, match="kernel file .* must be readable"):
        artifacts.ArtifactKey.for_file(tmp_path / "absent.mlir", "sm_90a")


def test_build_command_names_non_default_options_only():
    key = artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a", stages=3), 250)
    assert key.build_command() == ["fa4-compile", "copy-pipeline", "--target", "sm_90a", "--stages=3",
                                   "--debug-timeout-ms=250", "--cache"]


def test_missing_artifact_without_a_compiler_says_how_to_build_it(cache, monkeypatch):
    monkeypatch.setattr(artifacts, "compiler_installed", lambda: False)
    key = artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a", consumers=1))
    with pytest.raises(ArtifactError) as info:
        artifacts.fetch(key)
    message = str(info.value)
    assert key.path.name in message and str(cache) in message
    assert "`fa4-compile copy-pipeline --target sm_90a --consumers=1 --cache`" in message


def test_missing_artifact_is_compiled_once_then_found(cache):
    key = artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a", stages=2))
    assert artifacts.lookup(key) is None
    built = artifacts.fetch(key)
    assert built.path == key.path and built.manifest["config"]["stages"] == 2
    assert built.cubin[:4] == b"\x7fELF"
    assert sorted(p.name for p in key.path.iterdir()) == ["copy_pipeline.cubin", "copy_pipeline.json",
                                                          "copy_pipeline.ptx", "key.json"]
    again = artifacts.fetch(key)
    assert again.cubin == built.cubin
    # The CLI puts the same artifact at the same key.
    shutil.rmtree(key.path)
    subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", *key.build_command()[1:]], check=True,
                   capture_output=True)
    assert artifacts.lookup(key).cubin == built.cubin


def test_concurrent_cached_builds_of_one_kernel_do_not_share_a_dump_file(cache):
    # Each --cache build dumps a stage's input into a folder of its own (it once was one file per kernel
    # name, which one build deleted while another still wrote it): four at once all succeed.
    keys = [artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target="sm_90a", stages=s))
            for s in (2, 3, 4, 5)]
    runs = [subprocess.Popen([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", *key.build_command()[1:]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for key in keys]
    for run in runs:
        assert run.wait() == 0, run.stderr.read()
    assert all(artifacts.lookup(key) is not None for key in keys)
    assert list((cache / "dump").iterdir()) == []  # the private folders of builds that passed are gone


def test_a_failing_cached_build_keeps_its_stage_input_in_a_folder_of_its_own(cache):
    hopper_tmem = ROOT / "test" / "fa4-compile" / "Inputs" / "tmem-on-hopper.mlir"  # the nvvm stage fails
    done = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", str(hopper_tmem), "--cache"],
                          capture_output=True, text=True)
    assert done.returncode == 1
    dumped = re.search(r"input of the failing stage: (\S+)", done.stderr)
    assert dumped, done.stderr
    path = pathlib.Path(dumped.group(1))
    assert path.is_file() and path.name == "k.nvvm-input.mlir"
    assert path.parent.parent == cache / "dump" and path.parent.name.startswith("tmem-on-hopper-")


def test_a_failing_compile_on_first_use_reports_the_command(tmp_path, cache):
    bad = tmp_path / "bad.mlir"
    bad.write_text("module {\n")
    with pytest.raises(ArtifactError, match=r"compiling kernel 'bad' for sm_90a failed; rerun `fa4-compile "):
        artifacts.fetch(artifacts.ArtifactKey.for_file(bad, "sm_90a"))


def test_a_compile_that_leaves_another_fingerprint_says_the_sources_changed(tmp_path, cache, monkeypatch):
    """The compile succeeds but writes its artifact under another compiler fingerprint (the sources were
    edited after this process made the key): the error says that, not an empty "failed"."""
    key = artifacts.ArtifactKey.for_file(BROKEN, "sm_90a")
    monkeypatch.setattr(artifacts.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "", ""))
    with pytest.raises(ArtifactError, match=r"compiling kernel 'broken_barrier' for sm_90a succeeded but left no "
                                            r"artifact broken_barrier-sm_90a-\w+ in .*: fa4_mlir's compiler sources "
                                            r"changed since this process computed the key \(its compiler "
                                            r"fingerprint\); rerun the process"):
        artifacts.fetch(key)


def test_debug_artifacts_record_their_limit(cache):
    key = artifacts.ArtifactKey.for_file(BROKEN, "sm_90a", 100)
    artifact = artifacts.fetch(key)
    assert artifact.debug_timeout_ms == 100 and key.path.name.startswith("broken_barrier-sm_90a-debug100-")
    ptx = (key.path / "broken_barrier.ptx").read_text()
    assert "call.uni (retval0), vprintf" in ptx and "trap;" in ptx and "%globaltimer" in ptx


def test_read_artifact_rejects_what_fa4_compile_did_not_write(tmp_path):
    with pytest.raises(ArtifactError, match="must hold exactly one <kernel>.json manifest, got 0"):
        runtime.read_artifact(tmp_path)
    (tmp_path / "k.json").write_text("{not json")
    with pytest.raises(ArtifactError, match="must be readable JSON"):
        runtime.read_artifact(tmp_path / "k.json")
    (tmp_path / "k.json").write_text(json.dumps({"kernel": "k"}))
    with pytest.raises(ArtifactError, match="lacks target, entry, threads, cluster, smem_bytes, params"):
        runtime.read_artifact(tmp_path)
    manifest = {k: [] for k in artifacts.MANIFEST_KEYS} | {"entry": "k"}
    (tmp_path / "k.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="cubin .*k.cubin' named by manifest .* does not exist"):
        runtime.read_artifact(tmp_path)


# -- tensor maps and geometry ------------------------------------------------------------------------------

@pytest.mark.parametrize("tensor, message", [
    (GlobalTensor.contiguous(1 << 20, "fp16", (128, 64)), "must be bf16 .* got fp16"),
    (GlobalTensor.contiguous(1 << 20, "bf16", (2, 128, 64)), "must be 2-D, got shape"),
    (GlobalTensor(1 << 20, "bf16", (128, 60), (60, 1)), "strides must be multiples of 16 bytes .* multiple of 8"),
    (GlobalTensor(1 << 20, "bf16", (128, 64), (1, 128)), "unit innermost stride"),
    (GlobalTensor(8 + (1 << 20), "bf16", (128, 64), (64, 1)), "address must be 16-byte aligned .* 0x100008"),
    (GlobalTensor.contiguous(1 << 20, "bf16", (0, 64)), r"dimensions must be in \[1, 2\^32\]"),
])
def test_tensor_map_rules_are_named(tensor, message):
    with pytest.raises(LaunchError, match=message):
        check_tiled(tensor, SPEC, "x")


def test_tensor_map_rules_accept_padded_rows_and_reject_bad_manifests():
    check_tiled(GlobalTensor(1 << 20, "bf16", (300, 200), (264, 1)), SPEC, "x")
    with pytest.raises(LaunchError, match="manifest's tensor map for x is invalid"):
        check_tiled(GlobalTensor.contiguous(1 << 20, "bf16", (128, 64)), {**SPEC, "box": [512, 1]}, "x")
    with pytest.raises(LaunchError, match="manifest's tensor map for x is invalid"):
        check_tiled(GlobalTensor.contiguous(1 << 20, "bf16", (128, 64)), {**SPEC, "swizzle": "32B"}, "x")
    with pytest.raises(LaunchError, match="manifest's tensor map for x must have a dtype of bf16, .* got 'int8'"):
        check_tiled(GlobalTensor.contiguous(1 << 20, "int8", (128, 64)), {**SPEC, "dtype": "int8"}, "x")


def test_launch_geometry_covers_every_tile_once():
    rng = np.random.default_rng()
    config = CopyPipelineConfig(target="sm_90a")
    for _ in range(200):
        rows, cols, ctas = int(rng.integers(1, 5000)), 8 * int(rng.integers(1, 600)), int(rng.integers(1, 300))
        (grid,), tiles = launch_geometry(config, rows, cols, ctas)
        total = tiles["total_tiles"]
        assert tiles["num_tiles"] == -(-cols // 64) and total == -(-rows // 128) * tiles["num_tiles"]
        assert grid <= ctas or total < ctas
        covered = [t for b in range(grid)
                   for t in range(b * tiles["tiles_per_cta"], min((b + 1) * tiles["tiles_per_cta"], total))]
        assert covered == list(range(total))


def test_launch_geometry_refuses_more_tiles_than_i32_indexes():
    with pytest.raises(LaunchError, match=f"must have 1 to {MAX_TILES} tiles"):
        launch_geometry(CopyPipelineConfig(), 1 << 32, 1 << 16, 132)


def test_targets_of_compute_capabilities():
    assert target_for_capability(9, 0) == "sm_90a" and target_for_capability(10, 0) == "sm_100a"
    assert target_for_capability(8, 9) is None and target_for_capability(10, 3) is None


# -- knobs and machines without a GPU ----------------------------------------------------------------------

def test_debug_knobs(monkeypatch):
    monkeypatch.delenv("FA4_DEBUG", raising=False)
    assert knobs.debug_timeout_ms() == 0
    monkeypatch.setenv("FA4_DEBUG", "1")
    assert knobs.debug_timeout_ms() == knobs.DEFAULT_DEBUG_TIMEOUT_MS
    monkeypatch.setenv("FA4_DEBUG_TIMEOUT_MS", "250")
    assert knobs.debug_timeout_ms() == 250
    monkeypatch.setenv("FA4_DEBUG_TIMEOUT_MS", "soon")
    with pytest.raises(ConfigError, match=r"FA4_DEBUG_TIMEOUT_MS must be a whole number of milliseconds in "
                                          r"\[1, 9223372036854\], got 'soon'"):
        knobs.debug_timeout_ms()
    monkeypatch.setenv("FA4_DEBUG_TIMEOUT_MS", "9223372036855")  # timeout * 10^6 ns overflows 64 bits
    with pytest.raises(ConfigError, match=r"in \[1, 9223372036854\], got '9223372036855'"):
        knobs.debug_timeout_ms()


def test_cache_dir_defaults_under_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("FA4_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert knobs.cache_dir() == str(tmp_path / "fa4-mlir")


def test_load_rejects_unknown_kernels_and_debug_values():
    with pytest.raises(LaunchError, match="kernel must be one of attention, attention-combine, copy-pipeline, gemm, mla-attention, got 'nope'"):
        runtime.load("nope")
    with pytest.raises(LaunchError, match="config of 'copy-pipeline' must be a CopyPipelineConfig, got dict"):
        runtime.load("copy-pipeline", {"stages": 2})
    with pytest.raises(LaunchError, match="debug must be a bool or a barrier-wait limit in ms > 0, got -5"):
        runtime.load("copy-pipeline", CopyPipelineConfig(), debug=-5)


@pytest.mark.skipif(driver.device_count() > 0, reason="this machine has a CUDA GPU")
def test_no_gpu_is_a_clear_error_not_a_crash():
    with pytest.raises(CudaError, match="no CUDA (driver|device)"):
        runtime.load("copy-pipeline")
    assert driver.device_count() == 0


def test_config_keys_are_plain_values():
    key = artifacts.ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig())
    assert dict(key.config) == dataclasses.asdict(CopyPipelineConfig())
