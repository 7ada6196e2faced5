"""fa4-opt: mlir-opt for fa4 programs; runs pipelines that mix fa4 Python passes and upstream passes.

    fa4-opt input.mlir --pass-pipeline='builtin.module(fa4-verify,canonicalize)' -o out.mlir
    fa4-opt --split-input-file --verify-diagnostics invalid.mlir
    fa4-opt --list-passes

Reads a file or stdin (``-``). Every failure is a located ``error:`` line on stderr and exit code 1;
never a Python traceback (FA4_TRACEBACK=1 shows one for internal errors) and never an MLIR abort
(MLIR work runs in a forked child; see ``fa4_mlir.core.isolate``).
"""

from __future__ import annotations

import argparse
import re
import sys

from fa4_mlir import __version__

_SPLIT_MARKER = "// -----"


def _arg_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fa4-opt", description="Run fa4 and upstream MLIR passes over an MLIR file.",
        epilog="fa4 passes: see --list-passes. Any upstream MLIR 22 pass works in --pass-pipeline.")
    p.add_argument("input", nargs="?", default="-", help="input .mlir file, or - for stdin (default)")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument("-p", "--pass-pipeline", default=None, metavar="PIPELINE",
                   help="e.g. 'builtin.module(fa4-verify,canonicalize)' (the builtin.module wrapper is optional)")
    p.add_argument("--split-input-file", nargs="?", const=_SPLIT_MARKER, default=None, metavar="MARKER",
                   help=f"process each chunk between '{_SPLIT_MARKER}' lines separately (another marker: "
                        f"--split-input-file='// ====='; markers are comments)")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check diagnostics against // expected-error @+1 {{...}} comments")
    p.add_argument("--mlir-print-ir-after-all", action="store_true", help="print the IR after every pass")
    p.add_argument("--mlir-print-ir-before-all", action="store_true", help="print the IR before every pass")
    p.add_argument("--mlir-print-op-generic", action="store_true", help="print every op in generic form")
    p.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    p.add_argument("--list-passes", action="store_true", help="list the fa4 passes and exit")
    p.add_argument("--version", action="version", version=f"fa4-opt {__version__} (MLIR 22.1.8)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _arg_parser().parse_args(argv)
    if args.split_input_file is not None and not args.split_input_file.startswith("//") and args.input == "-":
        # `--split-input-file in.mlir`: argparse hands the file to the optional marker, and fa4-opt
        # would wait on stdin. A marker is a comment; this is the input.
        args.input, args.split_input_file = args.split_input_file, _SPLIT_MARKER
    try:
        if args.list_passes:
            return _list_passes()
        name = "<stdin>" if args.input == "-" else args.input
        source = _read_input(args.input)
        if source is None:
            return 1
        from fa4_mlir.core.isolate import run_isolated

        return run_isolated(lambda progress: _run(args, name, source, progress), tool="fa4-opt", place=name)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # an internal error: one line, not a traceback
        from fa4_mlir.core.isolate import report_internal_error

        report_internal_error("fa4-opt", exc)
        return 1


def _list_passes() -> int:
    from fa4_mlir.passes import PASSES

    print("fa4 passes (use them at the top level of --pass-pipeline):")
    for name, load in sorted(PASSES.items()):
        print(f"  {name:<28} {load().summary()}")
    print("Upstream MLIR 22 passes (canonicalize, cse, convert-gpu-to-nvvm, ...) are accepted too.")
    return 0


def _read_input(path: str) -> str | None:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"{path}: error: cannot read input file: {reason}", file=sys.stderr)
        return None


def _split(source: str, marker: str | None) -> list[str]:
    """Chunks padded with newlines so that line numbers stay those of the whole file."""
    if marker is None:
        return [source]
    chunks, current, start = [], [], 0
    for i, line in enumerate(source.split("\n")):
        if line.strip() == marker:
            chunks.append("\n" * start + "\n".join(current))
            current, start = [], i + 1
        else:
            current.append(line)
    chunks.append("\n" * start + "\n".join(current))
    return chunks


def _run(args, name: str, source: str, progress) -> int:
    from fa4_mlir.core.expected import check_expectations
    from fa4_mlir.core.pipeline import parse_pipeline
    from fa4_mlir.errors import PipelineError

    steps = []
    if args.pass_pipeline is not None:
        try:
            steps = parse_pipeline(args.pass_pipeline)
        except PipelineError as exc:
            col = exc.column or 1
            print(f"<pass-pipeline>:1:{col}: error: {exc}\n{args.pass_pipeline}\n{' ' * (col - 1)}^",
                  file=sys.stderr)
            return 1
    outputs, ok = [], True
    for chunk in _split(source, args.split_input_file):
        output, diagnostics = _process(chunk, name, steps, args, progress)
        diagnostics = list(dict.fromkeys(diagnostics))  # a handler and MLIRError may report the same one
        if args.verify_diagnostics:
            # As mlir-opt, which turns off printOpOnDiagnostic in this mode.
            diagnostics = [_without_op_dump(d) for d in diagnostics]
            problems = check_expectations(chunk, name, diagnostics)
            for line in problems:
                print(line, file=sys.stderr)
            ok &= not problems
        else:
            for d in diagnostics:
                print(_named(d, name), file=sys.stderr)
            ok &= not any(d.severity == "error" for d in diagnostics)
        if output is not None:
            outputs.append(output)
    text = f"\n{_SPLIT_MARKER}\n".join(o.rstrip("\n") for o in outputs) + "\n" if outputs else ""
    if not _write_output(args.output, text):
        return 1
    return 0 if ok else 1


def _without_op_dump(d):
    import dataclasses

    notes = tuple(n for n in d.notes if not n.message.startswith("see current operation"))
    return dataclasses.replace(d, notes=notes)


def _named(d, name: str) -> str:
    """MLIR reports buffers without a name as '-'; show the input's name instead."""
    text = str(d)
    return f"{name}{text[1:]}" if d.file == "-" else text


def _process(text: str, name: str, steps, args, progress):
    """Parse, verify, run the pipeline, verify again, print. Returns (output or None, diagnostics)."""
    from fa4_mlir._mlir import ir
    from fa4_mlir.core.context import make_context
    from fa4_mlir.core.diagnostics import Diagnostic, DiagnosticCollector
    from fa4_mlir.core.guards import check_serializable
    from fa4_mlir.core.pipeline import build_pass_manager
    from fa4_mlir.core.verify import verify_fa4

    ctx = make_context()
    with ctx, DiagnosticCollector(ctx) as collected:
        progress(f"parsing {name}")
        module, parse_errors = _parse(text, name)
        if module is None:
            return None, collected.diagnostics + parse_errors
        errors = verify_fa4(module)
        if errors:
            return None, collected.diagnostics + errors
        if steps:
            if any(s.text and ("gpu-module-to-binary" in s.text or "gpu-lower-to-nvvm" in s.text)
                   for s in steps):
                errors = check_serializable(module)
                if errors:
                    return None, collected.diagnostics + errors
            reported: list[Diagnostic] = []
            pm = build_pass_manager(steps, report=reported)
            if args.mlir_print_ir_after_all or args.mlir_print_ir_before_all:
                pm.enable_ir_printing(print_before_all=args.mlir_print_ir_before_all,
                                      print_after_all=args.mlir_print_ir_after_all)
            progress("running the pass pipeline '" + ",".join(s.describe() for s in steps) + "'")
            try:
                pm.run(module)
            except ir.MLIRError as exc:
                failed = [Diagnostic.from_mlir(d) for d in exc.error_diagnostics]
                if not failed and not reported:
                    failed = [Diagnostic.at(None, "error", f"pass pipeline failed: {exc}")]
                return None, collected.diagnostics + reported + failed
            errors = verify_fa4(module)
            if errors:
                return None, collected.diagnostics + reported + errors
            collected.diagnostics.extend(reported)
        progress(f"printing {name}")
        output = module.get_asm(print_generic_op_form=args.mlir_print_op_generic,
                                enable_debug_info=args.mlir_print_debuginfo)
        return output, collected.diagnostics


def _parse(text: str, name: str):
    """The module in ``text`` (wrapped in one if it holds other top-level ops), or (None, errors)."""
    from fa4_mlir._mlir import ir
    from fa4_mlir.core.guards import check_parsable

    errors = check_parsable(text, name)
    if errors:
        return None, errors
    try:
        op = ir.Operation.parse(text, source_name=name).operation
    except ir.MLIRError as exc:
        if not any("single top-level operation" in d.message for d in exc.error_diagnostics):
            return None, _parse_errors(exc, text, name)
        try:  # several top-level ops: wrap them as mlir-opt does (line 1 shifts by 8 columns)
            return ir.Operation.parse("module {" + text + "\n}", source_name=name).operation, []
        except ir.MLIRError as exc2:
            return None, _parse_errors(exc2, text, name)
    if op.name == "builtin.module":
        return op, []
    module = ir.Module.create(ir.Location.unknown())
    module.body.append(op)
    return module.operation, []


_CUSTOM_FORM = re.compile(r'(?<!")\b(fa4\.[a-z0-9_]+)\b')


def _parse_errors(exc, text: str, name: str):
    """Located parse errors. MLIR reports none when an op it cannot print custom-parses (IRDL ops
    have no custom syntax), so then point at the first fa4 op written without quotes."""
    from fa4_mlir.core.diagnostics import Diagnostic

    diags = [Diagnostic.from_mlir(d) for d in exc.error_diagnostics]
    if diags:
        return diags
    for line_no, line in enumerate(text.split("\n"), start=1):
        code = line.split("//", 1)[0]
        m = _CUSTOM_FORM.search(code)
        if m:
            return [Diagnostic("error", f"'{m.group(1)}' must be written in generic form, e.g. "
                               f"\"{m.group(1)}\"(operands) {{attributes}} : (types) -> (types): fa4 ops have "
                               f"no custom syntax in MLIR 22", name, line_no, m.start(1) + 1)]
    return [Diagnostic("error", f"cannot parse the input: {exc}", name)]


def _write_output(path: str, text: str) -> bool:
    try:
        if path == "-":
            sys.stdout.write(text)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return True
    except OSError as exc:
        print(f"{path}: error: cannot write output file: {exc.strerror or exc}", file=sys.stderr)
        return False


if __name__ == "__main__":
    sys.exit(main())
