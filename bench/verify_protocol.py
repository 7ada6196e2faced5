"""Time fa4-verify-protocol on every shipped kernel (issue 19 asks for at most 1 s each).

    python bench/verify_protocol.py [--repeats 5]

Each repeat parses the kernel in a fresh Context and runs the pass (all trip-count scenarios);
the table lists the median and max per kernel, with the events of its longest scenario and the
scenarios simulated, slowest first; every kernel must be accepted (the same verdicts as the tests). The kernels are those of the mutation corpus (test/python/protocol_mutants.py).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "python"))

from protocol_mutants import shipped_kernels  # noqa: E402

from fa4_mlir._mlir import ir  # noqa: E402
from fa4_mlir.core.context import make_context  # noqa: E402
from fa4_mlir.passes.scope import kernel_scopes, kernel_target  # noqa: E402
from fa4_mlir.protocol import verify_kernel  # noqa: E402


def run_once(text: str) -> tuple[float, int, int]:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    rows = []
    for name, text in shipped_kernels().items():
        times, events, scenarios = [], 0, 0
        for _ in range(args.repeats):
            seconds, events, scenarios = run_once(text)
            times.append(seconds)
        rows.append((statistics.median(times), max(times), name, events, scenarios))
    print("| kernel | median (s) | max (s) | events in the longest run | scenarios |")
    print("|---|---|---|---|---|")
    for median, worst, name, events, scenarios in sorted(rows, reverse=True):
        print(f"| {name} | {median:.3f} | {worst:.3f} | {events} | {scenarios} |")


if __name__ == "__main__":
    main()
