"""Bandwidth of copy-pipeline (torch.ops.fa4.copy_pipeline) against PyTorch's own copy, on one GPU.

    FA4_CACHE_DIR=.fa4-cache python bench/copy_bandwidth.py [--repeats 200] [--json out.json]

For each shape: the median time (triton.testing.do_bench, CUDA events) of ``fa4 copy_pipeline(x, 1.0)``,
``torch.clone(x)`` (a pure copy) and ``x * 2.0`` (PyTorch's scale, the same work as the kernel), and
bandwidth as bytes read plus bytes written over that time. Ratios are fa4 / torch from the same run.
Inputs rotate over enough buffers to exceed L2, so the numbers are HBM numbers. Then the runtime's
overheads: a cache hit in a fresh process (key, manifest and cubin read) and the module load.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time

import torch
import triton.testing

import fa4_mlir.torch  # noqa: F401  (registers torch.ops.fa4)

SHAPES = [(8192, 8192), (16896, 8192), (32768, 4096), (4096, 16384), (65536, 1024)]
L2_BYTES = 50 << 20

FRESH_PROCESS = """
import time, json
t0 = time.perf_counter()
from fa4_mlir import runtime
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.runtime.artifacts import ArtifactKey, fetch
from fa4_mlir.runtime import driver
t1 = time.perf_counter()
driver.activate(0)
tc = time.perf_counter()
key = ArtifactKey.for_config("copy-pipeline", CopyPipelineConfig(target=runtime.device_target(0)))
t2 = time.perf_counter()
artifact = fetch(key)
t3 = time.perf_counter()
kernel = runtime.Kernel(artifact, 0)
t4 = time.perf_counter()
again = runtime.load("copy-pipeline", CopyPipelineConfig(target=runtime.device_target(0)))
t5 = time.perf_counter()
again = runtime.load("copy-pipeline", CopyPipelineConfig(target=runtime.device_target(0)))
t6 = time.perf_counter()
print(json.dumps({"import_ms": 1e3 * (t1 - t0), "context_ms": 1e3 * (tc - t1), "cache_hit_ms": 1e3 * (t3 - t2),
                  "module_load_ms": 1e3 * (t4 - t3), "first_load_ms": 1e3 * (t5 - t4),
                  "memoised_load_us": 1e6 * (t6 - t5)}))
"""


def bench(fn, buffers, repeats: int) -> float:
    state = {"i": 0}

    def step():
        state["i"] = (state["i"] + 1) % len(buffers)
        fn(buffers[state["i"]])

    return triton.testing.do_bench(step, warmup=25, rep=repeats, return_mode="median")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=200, help="ms of timed repeats per case (do_bench rep)")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
          f"{datetime.date.today()}, {' '.join(sys.argv)}")
    rows = []
    print("| shape (bf16) | fa4 copy_pipeline GB/s | torch clone GB/s | torch x*2 GB/s | fa4/clone | fa4/mul |")
    print("|---|---|---|---|---|---|")
    for m, n in SHAPES:
        nbytes = m * n * 2
        count = max(2, -(-3 * L2_BYTES // nbytes))
        buffers = [torch.randn(m, n, device="cuda").bfloat16() for _ in range(count)]
        check = buffers[0]
        assert torch.equal(torch.ops.fa4.copy_pipeline(check, 1.0), check)
        times = {
            "fa4": bench(lambda x: torch.ops.fa4.copy_pipeline(x, 1.0), buffers, args.repeats),
            "clone": bench(torch.clone, buffers, args.repeats),
            "mul": bench(lambda x: x * 2.0, buffers, args.repeats),
        }
        gbs = {k: 2 * nbytes / (t * 1e-3) / 1e9 for k, t in times.items()}
        rows.append({"shape": [m, n], "ms": times, "GB/s": gbs})
        print(f"| {m}x{n} | {gbs['fa4']:.0f} | {gbs['clone']:.0f} | {gbs['mul']:.0f} | "
              f"{gbs['fa4'] / gbs['clone']:.2f} | {gbs['fa4'] / gbs['mul']:.2f} |", flush=True)
        del buffers
    small = torch.randn(128, 64, device="cuda").bfloat16()
    host = {}
    for name, fn in (("fa4", lambda: torch.ops.fa4.copy_pipeline(small, 1.0)), ("clone", lambda: torch.clone(small))):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(2000):
            fn()
        torch.cuda.synchronize()
        host[name] = (time.perf_counter() - start) / 2000 * 1e6
    print(f"\nper call on a 128x64 tensor (host-bound): fa4 copy_pipeline {host['fa4']:.1f} us, "
          f"torch clone {host['clone']:.1f} us")
    fresh = [json.loads(subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True,
                                       check=True).stdout) for _ in range(5)]
    summary = {k: statistics.median(r[k] for r in fresh) for k in fresh[0]}
    print(f"\nruntime, median of 5 fresh processes: import {summary['import_ms']:.1f} ms, CUDA context "
          f"{summary['context_ms']:.1f} ms, cache hit "
          f"{summary['cache_hit_ms']:.2f} ms, module load {summary['module_load_ms']:.2f} ms, "
          f"runtime.load (hit + load) {summary['first_load_ms']:.2f} ms, memoised load {summary['memoised_load_us']:.1f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "rows": rows, "runtime": summary, "per_call_us": host}, f, indent=2)


if __name__ == "__main__":
    main()
