"""The named-stage compiler and copy-pipeline: manifests, stages, ptxas, failures."""

from __future__ import annotations

import gc
import json
import os
import re
import shlex
import stat
import subprocess
import sys

import pytest

from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.core import ptxas
from fa4_mlir.core.compiler import STAGE_PIPELINES, STAGES, CompileError, compile_kernel
from fa4_mlir.core.gc_pause import gc_paused
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels import copy_pipeline
from fa4_mlir.placement import place_smem

TARGETS = ("sm_100a", "sm_90a")


@pytest.mark.parametrize("target", TARGETS)
def test_copy_pipeline_manifest_has_no_spills_and_the_layout_total(target):
    config = CopyPipelineConfig(target=target)
    result = compile_kernel(copy_pipeline.build(config))
    m = result.manifest
    assert (m["kernel"], m["target"], m["entry"]) == ("copy_pipeline", target, "copy_pipeline")
    assert m["threads"] == [config.threads, 1, 1] and m["cluster"] == [1, 1, 1]
    assert m["spill_stores"] == 0 and m["spill_loads"] == 0 and m["stack_frame"] == 0
    assert 0 < m["registers"] <= 255 and m["static_smem_bytes"] == 0
    # smem is what fa4-allocate-smem placed: the fa4 stage's fa4.smem_bytes ...
    placed = compile_kernel(copy_pipeline.build(config), stop="fa4")
    total = int(re.search(r"fa4.smem_bytes = (\d+)", placed.mlir).group(1))
    assert m["smem_bytes"] == total
    # ... which is the ring, the staging slices and the 2 x stages barriers placed in program order.
    items = [(0, config.stages * config.tile_bytes, 1024, None, 0)]
    items += [(1 + i, config.slice_bytes, 1024, None, 0) for i in range(config.consumers)]
    items += [(9, 8 * 2 * config.stages, 8, None, 0)]
    assert total == place_smem(items).total
    assert [p["name"] for p in m["params"]] == ["src", "dst", "num_tiles", "total_tiles", "tiles_per_cta", "scale"]
    assert m["params"][0]["tensor_map"] == {"dtype": "bf16", "box": [64, 128], "swizzle": "none"}
    assert m["params"][1]["tensor_map"]["box"] == [64, 64]
    assert (m["params"][0]["bytes"], m["params"][0]["align"], m["params"][0]["grid_constant"]) == (128, 64, True)
    assert result.cubin[:4] == b"\x7fELF"


def test_copy_pipeline_options_change_the_kernel():
    config = CopyPipelineConfig(target="sm_90a", stages=2, consumers=1, tile_rows=64, dtype="fp16")
    m = compile_kernel(copy_pipeline.build(config)).manifest
    assert m["threads"] == [256, 1, 1]
    assert m["params"][0]["tensor_map"] == {"dtype": "fp16", "box": [64, 64], "swizzle": "none"}
    assert m["smem_bytes"] == 2 * 8192 + 8192 + 32


def test_the_most_stages_that_fit_compile_and_one_more_is_refused():
    most = CopyPipelineConfig().max_stages
    result = compile_kernel(copy_pipeline.build(CopyPipelineConfig(stages=most)))
    assert result.manifest["smem_bytes"] <= 232448
    with pytest.raises(ConfigError, match=f"stages must be <= {most} .* got {most + 1}"):
        CopyPipelineConfig(stages=most + 1)


@pytest.mark.parametrize("field,value,message", [
    ("dtype", "fp8_e4m3", "dtype must be one of bf16, fp16, got 'fp8_e4m3'"),
    ("target", "sm_80", "target must be sm_90a or sm_100a, got 'sm_80'"),
    ("tile_cols", 12, "tile_cols must be a multiple of 8 in [8, 256]"),
    ("tile_rows", 300, "tile_rows must be in [1, 256]"),
    ("consumers", 4, "consumers must be 1, 2 or 3, got 4"),
    ("stages", 0, "stages must be >= 1, got 0"),
    ("producer_registers", 20, "producer_registers must be a multiple of 8 in [24, 256], got 20"),
    ("consumer_registers", 250, "consumer_registers must be a multiple of 8 in [24, 256], got 250"),
    ("tile_rows", 3, "tile_rows must split into 2 slices of a multiple of 2048 bytes"),
])
def test_copy_pipeline_config_errors_name_the_field(field, value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        CopyPipelineConfig(**{field: value})


def test_register_budgets_must_fit_the_register_file():
    with pytest.raises(ConfigError, match=re.escape("register budgets must total <= 65536, got 97280 (128 x (40 + 3 x 240))")):
        CopyPipelineConfig(consumers=3, tile_rows=96, consumer_registers=240)
    # 384 threads start with 168 registers each: 64512, not the register file's 65536, is what setmaxnreg shares
    with pytest.raises(ConfigError, match=re.escape("register budgets must total <= 64512, got 65536 (128 x (32 + 2 x "
                                                    "240)): 384 threads start with 168 registers each")):
        CopyPipelineConfig(consumers=2, producer_registers=32, consumer_registers=240)
    CopyPipelineConfig(consumers=2, producer_registers=24, consumer_registers=240)  # 64512: fits


@pytest.mark.parametrize("stop", STAGES)
def test_every_stage_stops_where_asked(stop):
    result = compile_kernel(copy_pipeline.build(CopyPipelineConfig(target="sm_90a")), stop=stop)
    if stop == "fa4":
        assert '"fa4.mbarrier_alloc"' in result.mlir and "index = 4" in result.mlir
    if stop == "nvvm":
        assert "fa4." not in result.mlir.replace("fa4.target", "").replace("fa4_smem", "").replace(
            "fa4.grid_constant_args", "").replace("fa4.smem_bytes", "").replace("fa4.mbarrier_region", "").replace(
            "fa4.num_mbarriers", "")
        assert "gpu.func @copy_pipeline(%arg0: !llvm.ptr" in result.mlir
    if stop == "llvm":
        assert "llvm.func @copy_pipeline(%arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval" in result.mlir
    if stop in ("ptx", "cubin"):
        assert ".visible .entry copy_pipeline(" in result.ptx
    assert (result.cubin is not None) == (stop == "cubin")


def test_stage_pipelines_parse_as_fa4_opt_pipelines():
    from fa4_mlir.core.pipeline import parse_pipeline

    for stage, text in STAGE_PIPELINES.items():
        assert parse_pipeline(f"builtin.module({text})"), stage


def test_a_failing_stage_dumps_its_input_and_the_repro_reruns_it(tmp_path):
    source = re.sub(r'"fa4\.tma_store_wait"\(\) \{pending = 0( : i64)?\}', '"fa4.wgmma_wait"() {pending = 0}',
                    copy_pipeline.build(CopyPipelineConfig(target="sm_100a")).mlir, count=1)
    with pytest.raises(CompileError) as info:
        compile_kernel(source, dump_dir=tmp_path, source_name="bad.mlir", verify_protocol=False)
    err = info.value
    message = "'fa4.wgmma_wait' needs warpgroup MMA (wgmma), which sm_90a has and sm_100a has not"
    assert err.stage == "nvvm" and any(message in d for d in err.diagnostics), err.diagnostics
    assert err.dump == str(tmp_path / "copy_pipeline.nvvm-input.mlir") and os.path.exists(err.dump)
    assert err.repro.startswith(f"fa4-opt {err.dump} --pass-pipeline='builtin.module(fa4-lower-pipelines,")
    argv = shlex.split(err.repro)[1:]
    rerun = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_opt", *argv], capture_output=True, text=True)
    assert rerun.returncode == 1 and message in rerun.stderr


def test_a_stage_that_succeeds_leaves_no_dump(tmp_path):
    # A stage's input is printed only if the stage fails; the folder is made up front (a bad -o fails at once).
    compile_kernel(copy_pipeline.build(CopyPipelineConfig()), dump_dir=tmp_path / "dump")
    assert list(tmp_path.iterdir()) == [tmp_path / "dump"] and list((tmp_path / "dump").iterdir()) == []


def test_the_gc_pause_nests_and_the_compile_restores_the_gc():
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.freeze()  # what a caller froze stays frozen
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            pass
        assert gc.isenabled() and gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    compile_kernel(copy_pipeline.build(CopyPipelineConfig()))  # the protocol check runs with the GC paused
    assert gc.isenabled()


def _fake_ptxas(tmp_path, body: str) -> str:
    path = tmp_path / "ptxas"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_ptxas_failure_names_ptxas_and_keeps_the_ptx(tmp_path, monkeypatch):
    monkeypatch.setenv("FA4_PTXAS", _fake_ptxas(tmp_path, "echo 'ptxas fatal   : Unresolved extern' >&2; exit 1"))
    with pytest.raises(CompileError) as info:
        compile_kernel(copy_pipeline.build(CopyPipelineConfig()), dump_dir=tmp_path / "dump")
    err = info.value
    assert err.stage == "cubin" and "ptxas rejected the PTX: ptxas fatal   : Unresolved extern" in str(err)
    assert err.dump.endswith("copy_pipeline.ptx") and "-arch=sm_100a" in err.repro and err.dump in err.repro


UNWAITED_MMA = os.path.join(os.path.dirname(__file__), "..", "fa4-compile", "Inputs", "unwaited-mma.mlir")


@pytest.mark.parametrize("stop", ["nvvm", "cubin"])
def test_a_protocol_error_comes_first_though_the_check_runs_during_ptxas(tmp_path, monkeypatch, stop):
    """The protocol check runs on a copy of stage fa4's input while the later stages and ptxas run; a
    protocol error is still the error raised (stage fa4, its input dumped), before a later failure."""
    monkeypatch.setenv("FA4_PTXAS", _fake_ptxas(tmp_path, "echo 'ptxas fatal   : Unresolved extern' >&2; exit 1"))
    with open(UNWAITED_MMA) as f:
        source = f.read()
    with pytest.raises(CompileError) as info:
        compile_kernel(source, stop=stop, dump_dir=tmp_path / "dump", source_name="unwaited-mma.mlir")
    err = info.value
    assert err.stage == "fa4" and any("protocol error [race]: race on TMEM 'D'" in d for d in err.diagnostics)
    assert err.dump.endswith(".fa4-input.mlir") and os.listdir(tmp_path / "dump") == [os.path.basename(err.dump)]
    assert "fa4-verify-protocol" in err.repro
    with pytest.raises(CompileError) as info:  # unchecked, the kernel reaches ptxas, which fails
        compile_kernel(source, dump_dir=tmp_path / "unchecked", verify_protocol=False)
    assert info.value.stage == "cubin"


def test_a_missing_ptxas_says_how_to_get_one(monkeypatch):
    monkeypatch.setenv("FA4_PTXAS", "/no/such/ptxas")
    with pytest.raises(ptxas.PtxasError, match="FA4_PTXAS must name an executable ptxas, got '/no/such/ptxas'"):
        ptxas.find_ptxas()


def test_ptxas_report_is_parsed():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas info    : Function properties for k\n"
           "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 168 registers, used 3 barriers, 64 bytes smem\n")
    report = ptxas.parse_report(log)
    assert (report.registers, report.spill_stores, report.spill_loads, report.stack_frame,
            report.static_smem_bytes, report.barriers) == (168, 8, 4, 16, 64, 3)
    with pytest.raises(ptxas.PtxasError, match="printed no register count"):
        ptxas.parse_report("ptxas info : nothing")
    assert report.wgmma_serialized is False
    serialized = log + ("ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are "
                        "serialized due to insufficient register resources for the wgmma pipeline in the "
                        "function 'k'\n")
    assert ptxas.parse_report(serialized).wgmma_serialized is True


def test_fa4_compile_warns_when_ptxas_serialised_the_wgmmas(tmp_path, monkeypatch, capfd):
    """ptxas's advisory C7511 (a kernel several times slower, not wrong) reaches the manifest and the CLI: a
    ptxas that adds the advisory to the real one's log."""
    from fa4_mlir.tools import fa4_compile

    real = shlex.quote(ptxas.find_ptxas())
    advisory = ("ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized "
                "due to insufficient register resources for the wgmma pipeline in the function 'copy_pipeline'")
    monkeypatch.setenv("FA4_PTXAS", _fake_ptxas(tmp_path, f'{real} "$@"; rc=$?; echo "{advisory}" >&2; exit $rc'))
    out = tmp_path / "out"
    assert fa4_compile.main(["copy-pipeline", "--target", "sm_90a", "-o", str(out)]) == 0
    assert "warning: ptxas serialised the wgmmas (C7511" in capfd.readouterr().err
    manifests = list(out.glob("*.json"))
    assert manifests and json.loads(manifests[0].read_text())["wgmma_serialized"] is True
    monkeypatch.delenv("FA4_PTXAS")
    assert fa4_compile.main(["copy-pipeline", "--target", "sm_90a", "-o", str(tmp_path / "plain")]) == 0
    assert "serialised" not in capfd.readouterr().err


def test_input_errors_are_compile_errors():
    with pytest.raises(CompileError, match="the input is not valid MLIR"):
        compile_kernel("module {", source_name="x.mlir")
    with pytest.raises(CompileError, match="exactly one gpu.func kernel inside a gpu.module, got 0"):
        compile_kernel("module {}")
    with pytest.raises(ConfigError, match="target must be sm_90a or sm_100a, got 'sm_89'"):
        compile_kernel(copy_pipeline.build(CopyPipelineConfig()).mlir.replace('chip = "sm_100a", ', ""),
                       target="sm_89")


def test_a_bad_alignment_fails_stage_ptx_instead_of_aborting_llvm():
    # an llvm.store of the copy-pipeline epilogue with an alignment LLVM asserts on (found by the fuzzer)
    source = copy_pipeline.build(CopyPipelineConfig()).mlir
    assert source.count("alignment = 16") >= 1
    with pytest.raises(CompileError, match="stage 'ptx' failed: the module would abort MLIR's serializer") as exc:
        compile_kernel(source.replace("alignment = 16", "alignment = 7", 1), stop="ptx")
    assert "alignment must be 0 or a power of two <= 4294967296, got 7" in exc.value.diagnostics[0]


def test_api_errors_name_the_argument():
    from fa4_mlir.errors import Fa4Error

    with pytest.raises(Fa4Error, match="stop must be one of fa4, nvvm, llvm, ptx, cubin, got 'sass'"):
        compile_kernel("module {}", stop="sass")
    with pytest.raises(Fa4Error, match=r"debug_timeout_ms must be an int in \[0, 9223372036854\], got 10000000000000"):
        compile_kernel("module {}", debug_timeout_ms=10**13)
    kernel = ('module attributes {gpu.container_module} { gpu.module @m { '
              'gpu.func @k(%i: index) kernel { gpu.return } } }')
    with pytest.raises(CompileError, match="kernel argument 0 must be one of .*, got index"):
        compile_kernel(kernel)
