"""Time compiling copy-pipeline from Python to cubin (issue 4 asks for under 2 s on the dev CPU).

    python bench/compile_time.py [--repeats 5]

Each repeat is a full compile_kernel(...) in this process: build the fa4 IR, parse it in a fresh
Context, run the fa4 / nvvm / llvm / ptx stages and ptxas. The first repeat includes loading the
dialect into MLIR's Python classes; the table reports it separately from the median of the rest.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.core.compiler import compile_kernel
from fa4_mlir.core.ptxas import find_ptxas
from fa4_mlir.kernels import copy_pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {platform.python_version()}, ptxas {find_ptxas()}")
    print("| target | first (s) | median (s) | max (s) | fa4 | nvvm | llvm | ptx | cubin (ptxas) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for target in ("sm_100a", "sm_90a"):
        times, stages = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = compile_kernel(copy_pipeline.build(CopyPipelineConfig(target=target)))
            times.append(time.perf_counter() - start)
            stages.append(result.manifest["compiler"]["stage_seconds"])
        rest = times[1:] or times
        per_stage = " | ".join(f"{statistics.median(s[k] for s in stages[1:] or stages):.3f}"
                               for k in ("fa4", "nvvm", "llvm", "ptx", "cubin"))
        print(f"| {target} | {times[0]:.3f} | {statistics.median(rest):.3f} | {max(times):.3f} | {per_stage} |")


if __name__ == "__main__":
    main()
