"""The named-stage compiler: fa4 -> nvvm -> llvm -> ptx -> cubin.

Each MLIR stage is a textual pipeline that ``fa4-opt`` accepts (``STAGE_PIPELINES``), so the input of
any stage can be dumped and the stage rerun by hand; ``cubin`` is ptxas. ``compile_kernel`` runs the
stages up to ``stop`` in one Context and returns the artefacts with a manifest (launch facts and the
parameter ABI) that the runtime loads without MLIR. A failing stage raises ``CompileError`` naming
the stage, with the stage input written to ``dump_dir`` and the command that reproduces it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import tempfile
import time
from pathlib import Path

from fa4_mlir import __version__, knobs
from fa4_mlir._mlir import gpu, ir
from fa4_mlir.core import ptxas
from fa4_mlir.core.context import make_context
from fa4_mlir.core.diagnostics import Diagnostic, DiagnosticCollector
from fa4_mlir.core.gc_pause import gc_paused
from fa4_mlir.core.guards import check_parsable, check_serializable
from fa4_mlir.core.pipeline import build_pass_manager, parse_pipeline
from fa4_mlir.core.verify import verify_fa4
from fa4_mlir.errors import Fa4Error
from fa4_mlir.kernels.source import KernelSource, Param
from fa4_mlir.target import Target

STAGES = ("fa4", "nvvm", "llvm", "ptx", "cubin")
STAGE_PIPELINES = {
    # verify (ops, then the barrier protocol) and place: the output is still fa4, with offsets,
    # barrier indices and TMEM columns
    "fa4": "fa4-verify,fa4-verify-protocol,fa4-allocate-mbarriers,fa4-allocate-smem,fa4-allocate-tmem",
    # fa4 ops become NVVM / LLVM / arith / scf inside the gpu.func (consumers first, declarations last)
    "nvvm": "fa4-lower-pipelines,fa4-lower-warp-roles,fa4-lower-tma,fa4-lower-tmem,fa4-lower-wgmma,"
            "fa4-lower-barriers,fa4-lower-kernel,canonicalize,cse",
    # everything in the LLVM dialect; tensor maps become __grid_constant__ parameters
    "llvm": "convert-scf-to-cf,gpu.module(convert-vector-to-llvm,convert-gpu-to-nvvm,convert-nvvm-to-llvm,"
            "canonicalize,cse,reconcile-unrealized-casts),fa4-attach-kernel-abi",
    # NVPTX: one gpu.binary holding the PTX text
    "ptx": "gpu-module-to-binary{format=isa}",
}
def stage_pipeline(stage: str, debug_timeout_ms: int = 0, verify_protocol: bool = True) -> str:
    """The fa4-opt pipeline of ``stage``; a debug build's barrier waits trap after ``debug_timeout_ms``
    and its ``fa4.debug_check`` ops trap where they fail (both: ``fa4-lower-barriers{timeout=MS}``);
    ``verify_protocol=False`` leaves out the protocol verifier."""
    pipeline = STAGE_PIPELINES[stage]
    if not verify_protocol:
        pipeline = pipeline.replace("fa4-verify-protocol,", "")
    if debug_timeout_ms:
        pipeline = pipeline.replace("fa4-lower-barriers", f"fa4-lower-barriers{{timeout={debug_timeout_ms}}}")
    return pipeline


PTX_FEATURES = "+ptx86"  # PTX 8.6: the oldest ISA with sm_100a, and CTA-only TMA on sm_90a
_PARAM_ABI = {  # MLIR argument type -> (kind, bytes, align)
    "!fa4.tensormap": ("tensormap", 128, 64),
    "i32": ("i32", 4, 4),
    "f32": ("f32", 4, 4),
    "i64": ("i64", 8, 8),
    "!llvm.ptr<1>": ("ptr", 8, 8),
    "!llvm.ptr": ("ptr", 8, 8),
}


class CompileError(Fa4Error):
    """A stage failed. ``diagnostics`` are its messages; ``repro`` reruns it on ``dump``."""

    def __init__(self, stage: str, message: str, diagnostics: list[str] = (), dump: str | None = None,
                 repro: str | None = None):
        super().__init__(f"stage '{stage}' failed: {message}")
        self.stage, self.diagnostics, self.dump, self.repro = stage, list(diagnostics), dump, repro


@dataclasses.dataclass
class CompileResult:
    name: str
    target: str
    stop: str
    mlir: str | None = None  # the IR after the last MLIR stage run
    ptx: str | None = None
    cubin: bytes | None = None
    manifest: dict = dataclasses.field(default_factory=dict)

    def write(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write ``<name>.mlir`` or ``.ptx`` (and for cubin ``.cubin`` and ``.json``) under ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        if self.stop in ("fa4", "nvvm", "llvm"):
            written.append(_write(out / f"{self.name}.mlir", self.mlir))
        if self.ptx is not None:
            written.append(_write(out / f"{self.name}.ptx", self.ptx))
        if self.cubin is not None:
            written.append(_write(out / f"{self.name}.cubin", self.cubin))
            written.append(_write(out / f"{self.name}.json", json.dumps(self.manifest, indent=2) + "\n"))
        return written


def _write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


def compile_kernel(source: KernelSource | str, *, target: str | None = None, stop: str = "cubin",
                   dump_dir: str | os.PathLike | None = None, source_name: str = "<input>",
                   progress=None, debug_timeout_ms: int = 0, verify_protocol: bool = True) -> CompileResult:
    """Compile a built-in kernel (``KernelSource``) or fa4-stage MLIR text up to stage ``stop``.

    ``target`` must agree with the input's ``#nvvm.target`` if it has one; an input without one gets
    ``target`` (default sm_100a). ``debug_timeout_ms > 0`` makes a debug build: every barrier wait
    that lasts that long prints what it waited for and traps, and so does every failed
    ``fa4.debug_check`` (release builds erase them). ``verify_protocol`` runs
    fa4-verify-protocol before lowering (a protocol error fails stage fa4). The protocol check changes
    nothing, so it runs on a copy of the IR it is given, while ptxas runs (a process of its own), and its
    error, if any, is the one raised, as if it had run in place. Raises CompileError (a failing stage),
    ConfigError (a bad target).
    """
    if stop not in STAGES:
        raise Fa4Error(f"stop must be one of {', '.join(STAGES)}, got '{stop}'")
    if not isinstance(debug_timeout_ms, int) or not 0 <= debug_timeout_ms <= knobs.MAX_DEBUG_TIMEOUT_MS:
        raise Fa4Error(f"debug_timeout_ms must be an int in [0, {knobs.MAX_DEBUG_TIMEOUT_MS}], "
                       f"got {debug_timeout_ms!r}")
    report = progress or (lambda what: None)
    spec = source if isinstance(source, KernelSource) else None
    built = spec.built_module() if spec else None  # a dsl kernel: compiled as built, no text round trip
    stage_seconds: dict[str, float] = {}
    with make_context() if built is None else built.context, DiagnosticCollector(ir.Context.current) as collected:
        report(f"parsing {source_name}")
        module = built if built is not None else _parse(spec.mlir if spec else source, source_name)
        kernel_module, kernel = _kernel_of(module)
        chosen = _settle_target(module, kernel_module, target or (spec.target if spec else None))
        name = ir.StringAttr(kernel.attributes["sym_name"]).value
        params = _param_abi(kernel, spec)
        facts: dict = {}
        ptx_text, assembled, check = None, None, None
        try:
            for stage in STAGES[:STAGES.index(stop) + 1]:
                start = time.perf_counter()
                if stage == "cubin":
                    # the protocol check runs while ptxas does (ptxas is a process of its own)
                    assembled = _assemble(name, chosen, ptx_text, dump_dir,
                                          meanwhile=check and (lambda: check.run(report)))
                else:
                    report(f"running stage '{stage}' of {name}")
                    check = _run_stage(stage, module, name, dump_dir, collected, debug_timeout_ms,
                                       verify_protocol, report) or check
                    if stage == "fa4":
                        kernel = _find_kernel(module, name)
                        facts["smem_bytes"] = _int_attr(kernel, "fa4.smem_bytes", 0)
                        facts["tmem_columns"] = _int_attr(kernel, "fa4.tmem_columns", 0)
                    elif stage == "nvvm":
                        facts.update(_launch_facts(_find_kernel(module, name)))
                    elif stage == "ptx":
                        ptx_text = _extract_ptx(module)
                stage_seconds[stage] = round(time.perf_counter() - start, 4)
            if check is not None:  # stopped before cubin
                check.run(report)
        except CompileError:
            if check is not None:  # a protocol error comes first, as it would in one pass pipeline
                check.run(report)
            raise
        finally:
            if check is not None:
                check.release()
        if check is not None:  # stage fa4's work includes the check; it ran during stage cubin (if run)
            stage_seconds["fa4"] = round(stage_seconds["fa4"] + check.seconds, 4)
        out = CompileResult(name=name, target=chosen.name, stop=stop, ptx=ptx_text)
        if stop in ("fa4", "nvvm", "llvm"):
            out.mlir = str(module)
        if assembled is not None:
            out.cubin, ptxas_report = assembled
            out.manifest = _manifest(name, chosen, facts, params, ptxas_report, spec, ptx_text, stage_seconds)
            out.manifest["compiler"]["protocol_seconds"] = round(check.seconds, 4) if check is not None else 0.0
            out.manifest["debug"] = {"barrier_timeout_ms": debug_timeout_ms} if debug_timeout_ms else None
        return out


# -- input ----------------------------------------------------------------------------------------------

def _parse(text: str, source_name: str) -> ir.Operation:
    refused = check_parsable(text, source_name)
    if refused:
        raise CompileError("parse", "the input would abort MLIR's parser", [str(d) for d in refused])
    try:
        op = ir.Operation.parse(text, source_name=source_name).operation
    except ir.MLIRError as exc:
        lines = [str(Diagnostic.from_mlir(d)) for d in exc.error_diagnostics] or [str(exc)]
        raise CompileError("parse", "the input is not valid MLIR", lines) from None
    if op.name != "builtin.module":
        raise CompileError("parse", f"the input must be a builtin.module holding a gpu.module, got '{op.name}'")
    return op


def _kernel_of(module: ir.Operation) -> tuple[ir.Operation, ir.Operation]:
    gpu_modules = [op.operation for op in module.regions[0].blocks[0].operations if op.operation.name == "gpu.module"]
    kernels = [(gm, op.operation) for gm in gpu_modules for op in gm.regions[0].blocks[0].operations
               if op.operation.name == "gpu.func" and "gpu.kernel" in op.operation.attributes]
    if len(kernels) != 1:
        raise CompileError("parse", f"the input must hold exactly one gpu.func kernel inside a gpu.module, "
                                    f"got {len(kernels)}")
    return kernels[0]


def _settle_target(module: ir.Operation, kernel_module: ir.Operation, wanted: str | None) -> Target:
    """The target the input asks for, checked against ``wanted``; the gpu.module gets one if it has none."""
    declared = None
    if "targets" in kernel_module.attributes:
        m = re.search(r'chip\s*=\s*"([^"]+)"', str(kernel_module.attributes["targets"]))
        declared = m.group(1) if m else None
    if declared and wanted and declared != wanted:
        raise CompileError("parse", f"--target must match the input's gpu.module target '{declared}', "
                                    f"got '{wanted}'")
    chosen = Target.parse(declared or wanted or "sm_100a")
    if not declared:
        kernel_module.attributes["targets"] = ir.ArrayAttr.get([ir.Attribute.parse(
            f'#nvvm.target<chip = "{chosen.name}", features = "{PTX_FEATURES}", O = 3>')])
    module.attributes["fa4.target"] = ir.StringAttr.get(chosen.name)
    return chosen


def _find_kernel(module: ir.Operation, name: str) -> ir.Operation:
    found = []

    def visit(op):
        if op.name in ("gpu.func", "llvm.func") and "sym_name" in op.attributes and \
                ir.StringAttr(op.attributes["sym_name"]).value == name:
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found[0]


def _int_attr(op: ir.Operation, name: str, default: int) -> int:
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else default


def _dims(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI32ArrayAttr(op.attributes[name])) if name in op.attributes else [1, 1, 1]


def _launch_facts(kernel: ir.Operation) -> dict:
    threads = _dims(kernel, "nvvm.reqntid") if "nvvm.reqntid" in kernel.attributes else _dims(kernel, "nvvm.maxntid")
    return {"threads": threads, "cluster": _dims(kernel, "nvvm.cluster_dim")}


def _param_abi(kernel: ir.Operation, spec: KernelSource | None) -> list[dict]:
    args = list(kernel.regions[0].blocks[0].arguments)
    named: list[Param | None] = list(spec.params) if spec else [None] * len(args)
    abi = []
    for arg, param in zip(args, named):
        kind, size, align = _PARAM_ABI.get(str(arg.type), (None, None, None))
        if kind is None:
            raise CompileError("parse", f"kernel argument {arg.arg_number} must be one of "
                                        f"{', '.join(_PARAM_ABI)}, got {arg.type}")
        entry = {"index": arg.arg_number, "name": param.name if param else f"arg{arg.arg_number}",
                 "kind": kind, "bytes": size, "align": align}
        if kind == "tensormap":
            entry["grid_constant"] = True
        if param and param.tensor_map:
            entry["tensor_map"] = param.tensor_map.to_json()
        if param and param.doc:
            entry["doc"] = param.doc
        abi.append(entry)
    return abi


# -- stages ---------------------------------------------------------------------------------------------

def stage_command(stage: str, input_path: str, debug_timeout_ms: int = 0, verify_protocol: bool = True) -> str:
    """The fa4-opt command that reruns ``stage`` on ``input_path``."""
    pipeline = stage_pipeline(stage, debug_timeout_ms, verify_protocol)
    return f"fa4-opt {shlex.quote(input_path)} --pass-pipeline='builtin.module({pipeline})'"


def _run_stage(stage: str, module: ir.Operation, name: str, dump_dir, collected: DiagnosticCollector,
               debug_timeout_ms: int, verify_protocol: bool, report=lambda what: None) -> _ProtocolCheck | None:
    """Run ``stage`` on ``module``. Stage fa4 leaves fa4-verify-protocol to the ``_ProtocolCheck`` it
    returns: the check runs on a copy of the IR it would have seen, later, while ptxas runs."""
    stage_input = _StageInput(module, dump_dir, f"{name}.{stage}-input.mlir")
    repro = None if stage_input.path is None else stage_command(stage, stage_input.path, debug_timeout_ms,
                                                                verify_protocol)

    def fail(message: str, diagnostics: list[Diagnostic]) -> CompileError:
        return CompileError(stage, message, [str(d) for d in diagnostics], stage_input.write(), repro)

    check = None
    try:
        if stage == "ptx":
            errors = check_serializable(module)
            if errors:
                raise fail("the module would abort MLIR's serializer", errors)
        reported: list[Diagnostic] = []
        steps = parse_pipeline(stage_pipeline(stage, debug_timeout_ms, verify_protocol), check_upstream=False)
        at = next((i for i, s in enumerate(steps) if s.fa4_pass is not None and s.fa4_pass.name == _PROTOCOL),
                  None)
        head, tail = (steps, []) if at is None else (steps[:at], steps[at + 1:])

        def run(part) -> None:
            try:
                build_pass_manager(part, report=reported).run(module)
            except ir.MLIRError as exc:
                failed = reported + [Diagnostic.from_mlir(d) for d in exc.error_diagnostics]
                emitted = list(dict.fromkeys(collected.diagnostics + failed))
                raise fail("a pass reported errors", emitted) from None

        run(head)
        check = None if at is None else _ProtocolCheck(module, name, steps[at], reported, collected, fail,
                                                       stage_input)
        try:
            if tail:
                run(tail)
            errors = [d for d in reported if d.severity == "error"]
            if stage == "fa4":
                errors += verify_fa4(module)
            if errors:
                raise fail("a pass reported errors", errors)
        except CompileError:
            if check is not None:  # a protocol error comes first, as in one pass pipeline
                try:
                    check.run(report)
                finally:
                    check.release()
            raise
    finally:
        if check is None:  # else the check keeps the input until it has run
            stage_input.release()
    return check


class _StageInput:
    """A stage's input, kept as a copy (under 1 ms) and printed to ``dump_dir`` only if the stage
    fails: printing it before every stage took about 10 ms a stage. ``dump_dir`` is still created
    up front, so an output folder that cannot be written fails the compile at once, as before."""

    def __init__(self, module: ir.Operation, dump_dir, filename: str):
        self.copy, self.path, self.written = None, None, False
        if dump_dir:
            Path(dump_dir).mkdir(parents=True, exist_ok=True)
            self.copy, self.path = module.clone(), str(Path(dump_dir) / filename)

    def write(self) -> str | None:
        """The dump's path, once it is written (None without ``dump_dir``)."""
        if self.copy is not None and not self.written:
            Path(self.path).write_text(str(self.copy))
            self.written = True
        return self.path

    def release(self) -> None:
        if self.copy is not None:
            self.copy.erase()
            self.copy = None


_PROTOCOL = "fa4-verify-protocol"


class _ProtocolCheck:
    """fa4-verify-protocol on a copy of stage fa4's IR as that pass would have seen it, run later
    (``run``) with the same diagnostics and the same stage-fa4 error if it fails. It changes nothing,
    so the stages after it need not wait for it: ``compile_kernel`` runs it while ptxas runs, or
    before it reports any later failure (a protocol error comes first, as in one pass pipeline)."""

    def __init__(self, module: ir.Operation, name: str, step, reported: list[Diagnostic],
                 collected: DiagnosticCollector, fail, stage_input: _StageInput):
        self.copy = module.clone()
        self.name, self.step, self.reported, self.fail = name, step, list(reported), fail
        self.stage_input = stage_input  # written by ``fail`` if the check fails
        self.collected, self.before = collected, list(collected.diagnostics)
        self.seconds, self.done = 0.0, False

    def run(self, report) -> None:
        """Raise the stage-fa4 CompileError if the protocol is not proven (once; later calls return)."""
        if self.done:
            return
        self.done = True
        start = time.perf_counter()
        report(f"running stage 'fa4' of {self.name} ({_PROTOCOL})")
        reported, since = list(self.reported), len(self.collected.diagnostics)
        try:
            with gc_paused():  # about 0.1 s of collections otherwise (gc_pause's docstring)
                build_pass_manager([self.step], report=reported).run(self.copy)
        except ir.MLIRError as exc:
            failed = reported + [Diagnostic.from_mlir(d) for d in exc.error_diagnostics]
            emitted = self.before + self.collected.diagnostics[since:]
            raise self.fail("a pass reported errors", list(dict.fromkeys(emitted + failed))) from None
        finally:
            self.seconds = time.perf_counter() - start
        errors = [d for d in reported if d.severity == "error"]
        if errors:
            raise self.fail("a pass reported errors", errors)

    def release(self) -> None:
        if self.copy is not None:
            self.copy.erase()
            self.copy = None
        self.stage_input.release()


def _dump(dump_dir, filename: str, text: str) -> str:
    path = Path(dump_dir)
    path.mkdir(parents=True, exist_ok=True)
    (path / filename).write_text(text)
    return str(path / filename)


def _extract_ptx(module: ir.Operation) -> str:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "gpu.binary":
            return gpu.ObjectAttr(op.objects[0]).object.decode()
    raise CompileError("ptx", "gpu-module-to-binary produced no gpu.binary")


def _assemble(name: str, target: Target, ptx_text: str, dump_dir,
              meanwhile=None) -> tuple[bytes, ptxas.PtxasReport]:
    """ptxas on ``ptx_text``; ``meanwhile()`` (the protocol check) runs while it does, and an error
    it raises comes first."""
    with tempfile.TemporaryDirectory(prefix="fa4-ptxas-") as tmp:
        ptx_path, cubin_path = os.path.join(tmp, f"{name}.ptx"), os.path.join(tmp, f"{name}.cubin")
        Path(ptx_path).write_text(ptx_text)
        try:
            report, _ = ptxas.assemble(ptx_path, target.name, cubin_path, meanwhile=meanwhile)
        except ptxas.PtxasError as exc:
            dump = _dump(dump_dir, f"{name}.ptx", ptx_text) if dump_dir else None
            repro = None
            if exc.command:
                repro = shlex.join([*exc.command[:-3], dump or ptx_path, "-o", f"{name}.cubin"])
            raise CompileError("cubin", str(exc), exc.log.strip().splitlines()[-5:], dump, repro) from None
        return Path(cubin_path).read_bytes(), report


def _manifest(name: str, target: Target, facts: dict, params: list[dict], report: ptxas.PtxasReport,
              spec: KernelSource | None, ptx_text: str, stage_seconds: dict) -> dict:
    version = re.search(r"^\.version (\S+)", ptx_text, re.M)
    manifest = {
        "kernel": name,
        "target": target.name,
        "entry": name,
        "threads": facts.get("threads", [1, 1, 1]),
        "cluster": facts.get("cluster", [1, 1, 1]),
        "smem_bytes": facts.get("smem_bytes", 0),
        "tmem_columns": facts.get("tmem_columns", 0),
        "registers": report.registers,
        "spill_stores": report.spill_stores,
        "spill_loads": report.spill_loads,
        "stack_frame": report.stack_frame,
        "static_smem_bytes": report.static_smem_bytes,
        "barriers": report.barriers,
        "wgmma_serialized": report.wgmma_serialized,
        "params": params,
        "ptx_version": version.group(1) if version else None,
        "compiler": {"fa4_mlir": __version__, "mlir": "22.1.8", "stage_seconds": stage_seconds},
    }
    if spec is not None:
        manifest["grid"] = spec.grid
        manifest["config"] = spec.config
    return manifest
