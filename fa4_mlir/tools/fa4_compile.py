"""fa4-compile: compile a built-in kernel or an fa4 MLIR file to PTX, cubin and a launch manifest.

    fa4-compile attention                          # FA4 forward, sm_100a, bf16, head dim 128
    fa4-compile attention --head-dim 64 --causal --num-q 1 --group 4 -o out
    fa4-compile copy-pipeline --target sm_90a -o out
    fa4-compile attention-combine --target sm_90a --head-dim 512 -o out   # the split-KV combine
    fa4-compile copy-pipeline --target sm_100a --stages 6 --consumers 1 -o out
    fa4-compile kernel.mlir --emit ptx -o out
    fa4-compile examples/row_center.py --target sm_90a   # a kernel file written with fa4_mlir.dsl
    fa4-compile copy-pipeline --target sm_90a --cache          # into the runtime's cache
    fa4-compile copy-pipeline --target sm_90a --debug -o out   # barrier waits trap after 100 ms
    fa4-compile --list-kernels

Writes ``OUT/<name>.ptx``, ``OUT/<name>.cubin`` and ``OUT/<name>.json`` (the manifest), or with
``--emit STAGE`` stops after that stage and writes ``OUT/<name>.mlir`` (fa4, nvvm, llvm) or ``.ptx``.
A failing stage leaves its input in ``OUT/dump/`` and prints the fa4-opt or ptxas command that
reproduces it. ``--cache`` writes the artifact into the runtime's cache (``FA4_CACHE_DIR``) under
the key the runtime looks for. Errors are one ``fa4-compile: error:`` line (plus the compiler's
diagnostics), exit 1.

``attention --target sm_90a --group N``: the sm_90a kernel takes the GQA group at launch (its i32
``group`` parameter; the manifest's config says ``"group": "runtime"``), so every N builds the same
kernel and ``--cache`` stores it under the group-1 key (``AttentionConfig.canonical``); N is still
checked, and ``--run-emulator`` launches it with that group. On sm_100a the group is compiled in.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from fa4_mlir import __version__, knobs
from fa4_mlir.tools.kernel_options import kernel_options as _kernel_options
from fa4_mlir.tools.kernel_options import shorthands as _shorthands

STAGES = ("fa4", "nvvm", "llvm", "ptx", "cubin")  # as fa4_mlir.core.compiler.STAGES (no MLIR import here)


def _base_parser(add_help: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fa4-compile", add_help=add_help,
        description="Compile an fa4 kernel through fa4 -> nvvm -> llvm -> ptx -> cubin.",
        epilog="Kernel options (built-in kernels only): fa4-compile KERNEL --help lists them.")
    p.add_argument("kernel", nargs="?", default="copy-pipeline",
                   help="a built-in kernel name (see --list-kernels), an fa4 .mlir file or a .py kernel file "
                        "defining build(target) (fa4_mlir.dsl; default: copy-pipeline)")
    p.add_argument("--target", default=None, help="sm_100a or sm_90a (default: the file's or the kernel config's, "
                                                   "else sm_100a)")
    p.add_argument("-o", "--output", default="out", metavar="DIR", help="output directory (default: out)")
    p.add_argument("--emit", default="cubin", metavar="STAGE",
                   help=f"last stage to run: {', '.join(STAGES)} (default: cubin)")
    p.add_argument("--cache", action="store_true",
                   help="write the artifact into the runtime's cache (FA4_CACHE_DIR) instead of -o")
    p.add_argument("--debug", action="store_true",
                   help=f"debug build: a barrier wait that lasts {knobs.DEFAULT_DEBUG_TIMEOUT_MS} ms prints "
                        "what it waited for and traps, and so does a failed fa4.debug_check")
    p.add_argument("--debug-timeout-ms", type=int, default=None, metavar="MS",
                   help="debug build with this barrier-wait limit (implies --debug)")
    p.add_argument("--no-verify-protocol", dest="verify_protocol", action="store_false",
                   help="skip fa4-verify-protocol, the static check of the barrier protocol (on by default)")
    p.add_argument("--run-emulator", action="store_true",
                   help="then run the built kernel in the PTX emulator (fa4-emu) on random inputs at its default "
                        "shape and print its error against a float64 reference and the time; exit 1 outside "
                        "tolerance (built-in kernels; no GPU needed)")
    p.add_argument("--list-kernels", action="store_true", help="list the built-in kernels and exit")
    p.add_argument("--version", action="version", version=f"fa4-compile {__version__} (MLIR 22.1.8)")
    return p


def _dump_dir(args, name: str) -> Path:
    """Where a failing stage's input is written: ``-o``'s dump folder, or with ``--cache`` a fresh folder
    under the cache's, so that concurrent builds of one kernel do not write (and delete) one file."""
    if not args.cache:
        return Path(args.output) / "dump"
    base = Path(knobs.cache_dir()) / "dump"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{Path(name).stem}-", dir=base))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    known, _ = _base_parser(add_help=False).parse_known_args(argv)
    from fa4_mlir.kernels import KERNELS

    parser = _base_parser(add_help=True)
    builtin = KERNELS.get(known.kernel)
    if builtin is not None:
        _kernel_options(parser, builtin[0])
    args = parser.parse_args(argv)
    if args.list_kernels:
        width = max(map(len, KERNELS))
        for name, (_, build) in KERNELS.items():
            print(f"  {name:<{width}} {sys.modules[build.__module__].__doc__.splitlines()[0]}")
        return 0
    if args.emit not in STAGES:
        return _error(f"--emit must be one of {', '.join(STAGES)}, got '{args.emit}'")
    if args.debug_timeout_ms is not None and args.debug_timeout_ms <= 0:
        return _error(f"--debug-timeout-ms must be > 0, got {args.debug_timeout_ms}")
    if args.debug_timeout_ms is not None and args.debug_timeout_ms > knobs.MAX_DEBUG_TIMEOUT_MS:
        return _error(f"--debug-timeout-ms must be <= {knobs.MAX_DEBUG_TIMEOUT_MS} (the 64-bit nanosecond "
                      f"timer), got {args.debug_timeout_ms}")
    args.timeout = args.debug_timeout_ms or (knobs.DEFAULT_DEBUG_TIMEOUT_MS if args.debug else 0)
    if args.cache and args.emit != "cubin":
        return _error(f"--cache stores cubin artifacts, so --emit must be cubin, got '{args.emit}'")
    if args.run_emulator and (builtin is None or args.emit not in ("ptx", "cubin")):
        return _error(f"--run-emulator needs a built-in kernel built to PTX (--emit ptx or cubin), got "
                      f"'{args.kernel}' with --emit {args.emit}")
    if builtin is None and not args.kernel.endswith((".mlir", ".py")):
        names = ", ".join(KERNELS)
        return _error(f"KERNEL must be a built-in kernel ({names}), a .mlir file or a .py kernel file "
                      f"(fa4_mlir.dsl), got '{args.kernel}'")
    try:
        from fa4_mlir.core.isolate import run_isolated

        return run_isolated(lambda progress: _compile(args, builtin, progress), tool="fa4-compile",
                            place=args.kernel)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one line, not a traceback
        from fa4_mlir.core.isolate import report_internal_error

        report_internal_error("fa4-compile", exc)
        return 1


def _error(message: str) -> int:
    print(f"fa4-compile: error: {message}", file=sys.stderr)
    return 1


def _compile(args, builtin, progress) -> int:
    from fa4_mlir.core.gc_pause import gc_paused

    # imports, build and stages allocate in bursts (gc_pause's docstring); not the emulator
    with gc_paused(), _blas_single_threaded(not args.run_emulator):
        code, config = _compile_and_write(args, builtin, progress)
    if code == 0 and args.run_emulator:
        return _run_emulator(args.kernel, config)
    return code


@contextlib.contextmanager
def _blas_single_threaded(wanted: bool):
    """OPENBLAS_NUM_THREADS=1 (unless set) for a numpy first imported in the body. The protocol check
    imports numpy while ptxas runs and does no linear algebra on it; OpenBLAS would start a thread per
    core that busy-waits for work for about 0.1 s, on the core ptxas needs. The emulator multiplies
    matrices, so ``--run-emulator`` keeps the default."""
    if not wanted or "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def _compile_and_write(args, builtin, progress) -> tuple[int, object]:
    """Exit code, and the config of a built-in kernel (else None)."""
    from fa4_mlir.core.compiler import CompileError, compile_kernel
    from fa4_mlir.errors import ArtifactError, ConfigError

    start, config = time.perf_counter(), None
    try:
        if builtin is not None:
            config_cls, build = builtin
            options = {k[len("cfg_"):]: v for k, v in vars(args).items() if k.startswith("cfg_")}
            short = _shorthands(args)
            if isinstance(short, str):
                return _error(short), None
            options.update(short)
            if args.target:  # else the config's default target (sm_100a; mla-attention: sm_90a)
                options["target"] = args.target
            config = config_cls(**options)
            source = build(config)
            name = args.kernel
        elif args.kernel.endswith(".py"):
            from fa4_mlir.dsl.loader import load_kernel_file

            source = load_kernel_file(args.kernel, args.target or "sm_100a")
            name = args.kernel
        else:
            try:
                source = Path(args.kernel).read_text()
            except (OSError, UnicodeDecodeError) as exc:
                return _error(f"cannot read '{args.kernel}': {getattr(exc, 'strerror', None) or exc}"), None
            name = args.kernel
        dump_dir = _dump_dir(args, name)
        result = compile_kernel(source, target=args.target, stop=args.emit, source_name=name, dump_dir=dump_dir,
                                progress=progress,
                                debug_timeout_ms=args.timeout, verify_protocol=args.verify_protocol)
        if args.cache:  # nothing failed: the private dump folder is empty
            dump_dir.rmdir()
        if args.cache:
            from fa4_mlir.runtime import artifacts  # only here: the runtime is not needed to compile

            key = (artifacts.ArtifactKey.for_config(args.kernel, config, args.timeout) if builtin is not None
                   else artifacts.ArtifactKey.for_file(args.kernel, result.target, args.timeout))
            stored = artifacts.store(key, result.write)
            written = sorted(stored.iterdir())
        else:
            written = result.write(args.output)
    except (ConfigError, ArtifactError) as exc:
        return _error(str(exc)), None
    except CompileError as exc:
        _error(str(exc))
        for line in exc.diagnostics:
            print(f"  {line}", file=sys.stderr)
        if exc.dump:
            print(f"  input of the failing stage: {exc.dump}", file=sys.stderr)
        if exc.repro:
            print(f"  reproduce with: {exc.repro}", file=sys.stderr)
        return 1, None
    except OSError as exc:
        where = knobs.cache_dir() if args.cache else args.output
        path = f" (at '{exc.filename}')" if exc.filename and str(exc.filename) != str(where) else ""
        return _error(f"cannot write to '{where}': {exc.strerror or exc}{path}"), None
    seconds = time.perf_counter() - start
    m = result.manifest
    if m:
        print(f"{m['kernel']} {m['target']}: {m['threads'][0]} threads, cluster {'x'.join(map(str, m['cluster']))}, "
              f"smem {m['smem_bytes']} B, {m['registers']} registers, {m['spill_stores']}+{m['spill_loads']} "
              f"spill bytes, {len(m['params'])} params ({seconds:.2f} s)")
        if m.get("wgmma_serialized"):
            print("warning: ptxas serialised the wgmmas (C7511: too few registers for their pipeline); the kernel "
                  "is right but several times slower: give its consumers more registers or hold fewer values",
                  file=sys.stderr)
    else:
        print(f"{result.name} {result.target}: stopped after stage '{result.stop}' ({seconds:.2f} s)")
    if builtin is not None and m:
        from fa4_mlir.layouts import kernel_layout
        from fa4_mlir.tools.fa4_layout import summary

        layout = kernel_layout(config)
        if layout is not None:
            print(summary(layout, result.target))
    for path in written:
        print(f"  wrote {path}")
    return 0, config


def _run_emulator(kernel: str, config) -> int:
    """fa4-emu with the same config: the kernel on random inputs in the PTX emulator, against NumPy."""
    import dataclasses

    from fa4_mlir.tools import fa4_emu

    argv = [kernel, "--target", config.target]
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == "target":
            continue
        flag = f"--{f.name.replace('_', '-')}"
        argv += [flag if value else f"--no-{flag[2:]}"] if isinstance(value, bool) else [flag, str(value)]
    print(f"running in the PTX emulator: fa4-emu {' '.join(argv)}", flush=True)
    return fa4_emu.main(argv)


if __name__ == "__main__":
    sys.exit(main())
