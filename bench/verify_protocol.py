"""Time fa4-verify-protocol on every shipped kernel (issue 19 asks for at most 1 s each).

    python bench/verify_protocol.py [--repeats 5] [--baseline DIR]

Each repeat parses the kernel in a fresh Context and runs the pass (all scenarios); the table
lists the median and max per kernel, with the events of its longest scenario and the scenarios
simulated, slowest first; every kernel must be accepted (the same verdicts as the tests). The
kernels are those of the mutation corpus (test/python/protocol_mutants.py).

``--baseline DIR`` also times another verifier on the same kernel texts in the same run, for a
ratio: DIR holds its ``fa4_mlir`` package (e.g. an older commit's tree, or ``pip install
--target DIR`` of its wheel); repeats alternate between the two so that load on the machine
falls on both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "python"))

# Runs in a child whose fa4_mlir is the baseline's: the API both versions have in common.
BASELINE_TIMER = """
import json, sys, time
from fa4_mlir._mlir import ir
from fa4_mlir.core.context import make_context
from fa4_mlir.passes.scope import kernel_scopes, kernel_target
from fa4_mlir.protocol import verify_kernel
out = {}
for name, text in json.load(open(sys.argv[1])).items():
    with make_context():
        start = time.perf_counter()
        module = ir.Module.parse(text)
        violations = 0
        for scope in kernel_scopes(module.operation):
            report = verify_kernel(scope, kernel_target(scope, "sm_100a").sm)
            violations += len(report.violations) if report is not None else 0
        out[name] = (time.perf_counter() - start, violations)
print(json.dumps(out))
"""


def run_once(text: str) -> tuple[float, int, int]:
    from fa4_mlir._mlir import ir
    from fa4_mlir.core.context import make_context
    from fa4_mlir.passes.scope import kernel_scopes, kernel_target
    from fa4_mlir.protocol import verify_kernel

    with make_context():
        start = time.perf_counter()
        module = ir.Module.parse(text)
        events = scenarios = 0
        for scope in kernel_scopes(module.operation):
            report = verify_kernel(scope, kernel_target(scope, "sm_100a").sm)
            if report is None:
                continue
            assert not report.violations, report.violations[0].headline()
            scenarios += report.scenarios
            events = max(events, report.events)
        return time.perf_counter() - start, events, scenarios


def run_baseline(directory: Path, kernels_file: str) -> dict[str, tuple[float, int]]:
    env = {**os.environ, "PYTHONPATH": str(directory)}
    # cwd outside this checkout: python puts the cwd first on sys.path
    done = subprocess.run([sys.executable, "-c", BASELINE_TIMER, kernels_file], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the baseline in {directory} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from protocol_mutants import shipped_kernels

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="a folder holding another fa4_mlir to compare with")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.baseline is not None and not (args.baseline / "fa4_mlir" / "protocol").is_dir():
        parser.error(f"--baseline must be a folder holding a fa4_mlir package with a protocol verifier, "
                     f"got {args.baseline}")
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    kernels = shipped_kernels()
    times = {name: [] for name in kernels}
    base = {name: [] for name in kernels}
    facts = {}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(kernels, f)
    try:
        for _ in range(args.repeats):
            for name, text in kernels.items():
                seconds, events, scenarios = run_once(text)
                times[name].append(seconds)
                facts[name] = (events, scenarios)
            if args.baseline is not None:
                for name, (seconds, violations) in run_baseline(args.baseline, f.name).items():
                    if violations:
                        print(f"# note: the baseline rejects {name} ({violations} violation(s))")
                    base[name].append(seconds)
    finally:
        os.unlink(f.name)
    head = "| kernel | median (s) | max (s) | events in the longest run | scenarios |"
    rule = "|---|---|---|---|---|"
    if args.baseline is not None:
        head += " baseline median (s) | baseline max (s) | baseline / this |"
        rule += "---|---|---|"
    print(head)
    print(rule)
    for name in sorted(kernels, key=lambda n: statistics.median(times[n]), reverse=True):
        median = statistics.median(times[name])
        row = f"| {name} | {median:.3f} | {max(times[name]):.3f} | {facts[name][0]} | {facts[name][1]} |"
        if args.baseline is not None:
            b = statistics.median(base[name])
            row += f" {b:.3f} | {max(base[name]):.3f} | {b / median:.2f} |"
        print(row)


if __name__ == "__main__":
    main()
