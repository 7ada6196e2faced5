"""Time compiling built-in kernels from Python to cubin (issues 4 and 8: under 2 s on the dev CPU; issue 25:
the cold CLI compile of the default attention config in at most 1 s).

    python bench/compile_time.py [--repeats 5]
    python bench/compile_time.py --cold-only [--cold-runs 7]

Rows: copy-pipeline on both targets and the default attention kernel (sm_100a, bf16, head dim 128,
2Q; the protocol verifier included, as fa4-compile runs it). A cold compile is also timed as a new
process: ``fa4-compile attention -o DIR`` from the shell, interpreter start and imports included,
no artifact cache (``-o``, not ``--cache``).

Each repeat is a full compile_kernel(...) in this process: build the fa4 IR, parse it in a fresh
Context, run the fa4 / nvvm / llvm / ptx stages and ptxas. The first repeat includes loading the
dialect into MLIR's Python classes; the table reports it separately from the median of the rest.
Its ``fa4`` column includes the protocol check, which runs during ``cubin`` (ptxas).

The cold rows split each run with the manifest it writes (``compiler.stage_seconds``): ``fa4`` is
the stage's passes without the protocol check, ``protocol`` the check, which runs while ptxas does
(so ``cubin`` is ptxas's wall time with the check inside it), and ``rest`` the wall time outside
the stages: interpreter start, imports, building the kernel, writing files, exit.
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

import fa4_mlir
from fa4_mlir.core.ptxas import find_ptxas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cold-runs", type=int, default=None, help="cold CLI runs (default: --repeats)")
    parser.add_argument("--cold-only", action="store_true", help="only the cold CLI rows")
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}, "
          f"ptxas {find_ptxas()}")
    if not args.cold_only:
        in_process(args.repeats)
    cold(args.cold_runs or args.repeats)


def in_process(repeats: int) -> None:
    from fa4_mlir.configs.attention import AttentionConfig
    from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.kernels import attention, copy_pipeline

    print("| kernel | target | first (s) | median (s) | max (s) | fa4 | nvvm | llvm | ptx | cubin (ptxas) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = [("copy-pipeline", "sm_100a", lambda: copy_pipeline.build(CopyPipelineConfig(target="sm_100a"))),
            ("copy-pipeline", "sm_90a", lambda: copy_pipeline.build(CopyPipelineConfig(target="sm_90a"))),
            ("attention", "sm_100a", lambda: attention.build(AttentionConfig()))]
    for kernel, target, build in rows:
        times, stages = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            result = compile_kernel(build())
            times.append(time.perf_counter() - start)
            stages.append(result.manifest["compiler"]["stage_seconds"])
        rest = times[1:] or times
        per_stage = " | ".join(f"{statistics.median(s[k] for s in stages[1:] or stages):.3f}"
                               for k in ("fa4", "nvvm", "llvm", "ptx", "cubin"))
        print(f"| {kernel} | {target} | {times[0]:.3f} | {statistics.median(rest):.3f} | {max(times):.3f} | {per_stage} |")


def cold(runs: int) -> None:
    """``fa4-compile attention -o DIR`` in a new process per run: wall time and its split."""
    print("\ncold `fa4-compile attention -o DIR` (new process each), seconds:")
    print("| run | wall | rest (start, imports, build, write) | fa4 | protocol (during cubin) | nvvm | llvm | ptx "
          "| cubin (ptxas) |")
    print("|---|---|---|---|---|---|---|---|---|")
    walls, splits = [], []
    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="fa4-cold-") as out:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", "attention", "-o", out],
                           check=True, capture_output=True, cwd=_TREE)
            wall = time.perf_counter() - start
            compiler = json.loads((Path(out) / "attention.json").read_text())["compiler"]
        s, protocol = compiler["stage_seconds"], compiler.get("protocol_seconds", 0.0)
        split = {"fa4": s["fa4"] - protocol, "protocol": protocol, **{k: s[k] for k in ("nvvm", "llvm", "ptx", "cubin")}}
        split["rest"] = wall - sum(v for k, v in split.items() if k != "protocol")
        walls.append(wall)
        splits.append(split)
        print(f"| {i + 1} | {wall:.3f} | " + " | ".join(f"{split[k]:.3f}" for k in _COLUMNS) + " |")
    median = {k: statistics.median(sp[k] for sp in splits) for k in _COLUMNS}
    print(f"| median | {statistics.median(walls):.3f} | " + " | ".join(f"{median[k]:.3f}" for k in _COLUMNS) + " |")
    print(f"\ncold `fa4-compile attention` (new process each): median {statistics.median(walls):.3f} s, "
          f"max {max(walls):.3f} s over {len(walls)}")


_COLUMNS = ("rest", "fa4", "protocol", "nvvm", "llvm", "ptx", "cubin")
# ``python -m`` imports from its working directory first: run it where the fa4_mlir imported here lives
_TREE = str(Path(fa4_mlir.__file__).resolve().parents[1])


if __name__ == "__main__":
    main()
