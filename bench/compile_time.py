"""Time compiling built-in kernels from Python to cubin (issues 4 and 8: under 2 s on the dev CPU).

    python bench/compile_time.py [--repeats 5]

Rows: copy-pipeline on both targets and the default attention kernel (sm_100a, bf16, head dim 128,
2Q; the protocol verifier included, as fa4-compile runs it). A cold compile is also timed as a new
process: ``fa4-compile attention`` from the shell, interpreter start and imports included.

Each repeat is a full compile_kernel(...) in this process: build the fa4 IR, parse it in a fresh
Context, run the fa4 / nvvm / llvm / ptx stages and ptxas. The first repeat includes loading the
dialect into MLIR's Python classes; the table reports it separately from the median of the rest.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.core.compiler import compile_kernel
from fa4_mlir.core.ptxas import find_ptxas
from fa4_mlir.kernels import attention, copy_pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {platform.python_version()}, ptxas {find_ptxas()}")
    print("| kernel | target | first (s) | median (s) | max (s) | fa4 | nvvm | llvm | ptx | cubin (ptxas) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = [("copy-pipeline", "sm_100a", lambda: copy_pipeline.build(CopyPipelineConfig(target="sm_100a"))),
            ("copy-pipeline", "sm_90a", lambda: copy_pipeline.build(CopyPipelineConfig(target="sm_90a"))),
            ("attention", "sm_100a", lambda: attention.build(AttentionConfig()))]
    for kernel, target, build in rows:
        times, stages = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = compile_kernel(build())
            times.append(time.perf_counter() - start)
            stages.append(result.manifest["compiler"]["stage_seconds"])
        rest = times[1:] or times
        per_stage = " | ".join(f"{statistics.median(s[k] for s in stages[1:] or stages):.3f}"
                               for k in ("fa4", "nvvm", "llvm", "ptx", "cubin"))
        print(f"| {kernel} | {target} | {times[0]:.3f} | {statistics.median(rest):.3f} | {max(times):.3f} | {per_stage} |")

    cold = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", "attention", "-o", tempfile.mkdtemp()],
                       check=True, capture_output=True)
        cold.append(time.perf_counter() - start)
    print(f"\ncold `fa4-compile attention` (new process each): median {statistics.median(cold):.3f} s, "
          f"max {max(cold):.3f} s over {len(cold)}")


if __name__ == "__main__":
    main()
