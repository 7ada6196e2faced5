"""How fast the PTX emulator runs the project's sm_90a (or sm_100a) kernels on this CPU.

    python bench/emu_speed.py [--repeats 3] [--target sm_90a|sm_100a]

The issue's targets: the sm_90a attention, one CTA's work of 128 query rows x 1024 keys at head dim
128, in at most 20 s; GEMM 256x256x512 (with residual) in at most 10 s. Each row compiles the kernel
with fa4-compile (not timed), runs it ``--repeats`` times on random inputs with different scheduler
seeds, checks the result against float64 NumPy (so a fast wrong run cannot count) and prints the
median and max wall time with the instruction counts. Needs the compiler (MLIR) installed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from fa4_mlir import emu


def bf16(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def build(kernel: str, out: str, *options: str) -> tuple[emu.Program, dict]:
    subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", kernel, "--target", "sm_90a", *options,
                    "-o", out], check=True, stdout=subprocess.DEVNULL)
    manifest = json.load(open(os.path.join(out, f"{kernel}.json")))
    return emu.load_ptx(os.path.join(out, f"{manifest['entry']}.ptx")), manifest


def tensor_map(array: np.ndarray, param: dict) -> emu.TensorMap:
    spec = param["tensor_map"]
    return emu.TensorMap(array, box=tuple(reversed(spec["box"])), swizzle=spec["swizzle"], dtype=spec["dtype"])


def gemm_case(tmp: str, m: int = 256, n: int = 256, k: int = 512):
    prog, man = build("gemm", os.path.join(tmp, "gemm"))
    cfg, ps = man["config"], man["params"]

    def run(seed: int):
        rng = np.random.default_rng(seed)
        a, b, c = bf16(rng.standard_normal((m, k))), bf16(rng.standard_normal((n, k))), bf16(rng.standard_normal((m, n)))
        d = np.zeros((m, n), np.uint16)
        num_m, num_n = -(-m // cfg["tile_m"]), -(-n // cfg["tile_n"])
        args = [tensor_map(a, ps[0]), tensor_map(b, ps[1]), tensor_map(c, ps[2]), tensor_map(d, ps[3]), num_m, num_n,
                -(-k // cfg["tile_k"]), 1.0, 1.0, 1]
        stats = prog.launch(man["entry"], grid=(num_m * num_n, 1, 1), block=tuple(man["threads"]),
                            smem_bytes=man["smem_bytes"], args=args, seed=seed)
        ref = f32(a) @ f32(b).T + f32(c)
        err = np.abs(f32(d) - ref) / (np.abs(ref) + 1)
        assert err.max() < 2 ** -7, f"gemm result wrong: max relative error {err.max():.3g}"
        return stats
    return f"gemm {m}x{n}x{k} + residual", run, 10.0


def attention_case(tmp: str, sq: int = 128, sk: int = 1024, d: int = 128):
    prog, man = build("attention", os.path.join(tmp, "attention"), "--head-dim", str(d))
    ps = man["params"]
    scale = 1 / math.sqrt(d)

    def run(seed: int):
        rng = np.random.default_rng(seed)
        q, k, v = (bf16(rng.standard_normal((1, s, 1, d))) for s in (sq, sk, sk))
        o, lse = np.zeros((1, sq, 1, d), np.uint16), np.zeros((1, 1, sq), np.float32)
        args = [tensor_map(q, ps[0]), tensor_map(k, ps[1]), tensor_map(v, ps[2]), tensor_map(o, ps[3]), lse, sq, sk, 1,
                scale * math.log2(math.e), 1]
        stats = prog.launch(man["entry"], grid=(-(-sq // 128), 1, 1), block=tuple(man["threads"]),
                            smem_bytes=man["smem_bytes"], args=args, seed=seed)
        s = np.einsum("qd,kd->qk", f32(q[0, :, 0]), f32(k[0, :, 0])) * scale
        p = np.exp(s - s.max(1, keepdims=True))
        ref = (p / p.sum(1, keepdims=True)) @ f32(v[0, :, 0])
        assert np.abs(f32(o[0, :, 0]) - ref).max() < 2e-2, "attention result wrong"
        return stats
    return f"attention sm_90a d{d}, {sq} queries x {sk} keys (one CTA)", run, 20.0


def sm100_case(kernel: str, shape: str, target_s: float, name: str, **options):
    """An sm_100a kernel through the runtime's emulator mode and fa4-emu's run-and-check (issue 21's
    targets: attention 2Q d128, one CTA's 256 query rows x 1024 keys, in 30 s)."""
    from fa4_mlir import runtime
    from fa4_mlir.kernels.attention import AttentionConfig
    from fa4_mlir.kernels.gemm import GemmConfig
    from fa4_mlir.tools import fa4_emu

    config = {"attention": AttentionConfig, "gemm": GemmConfig}[kernel](target="sm_100a", **options)
    loaded = runtime.load(kernel, config, device="emulator", debug=False)
    dims = fa4_emu.parse_shape(kernel, shape)

    def run(seed: int):
        stats, checks = fa4_emu.RUNS[kernel](loaded, config, dims, np.random.default_rng(seed), seed)
        assert all(c["ok"] for c in checks.values()), f"{name}: result outside tolerance: {checks}"
        return stats
    return name, run, target_s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="runs per kernel, seeds 0..N-1 (default 3)")
    p.add_argument("--target", choices=("sm_90a", "sm_100a"), default="sm_90a",
                   help="which kernels: the sm_90a ones (issue 20's targets) or the sm_100a ones (issue 21's)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be >= 1, got {args.repeats}")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"numpy {np.__version__}, {time.strftime('%Y-%m-%d')}")
    print("| kernel | warp-instructions | thread instructions | median s | max s | target s | ratio to target |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        cases = (attention_case(tmp), gemm_case(tmp)) if args.target == "sm_90a" else (
            sm100_case("attention", "1x256x1024x1", 30.0, "attention sm_100a 2Q d128, 256 queries x 1024 keys (one CTA)"),
            sm100_case("gemm", "256x256x512", 15.0, "gemm sm_100a CTA pair (cta_group::2) 256x256x512 + residual",
                       cta_group=2, tile_m=256))
        for name, run, target in cases:
            times, stats = [], None
            for seed in range(args.repeats):
                start = time.perf_counter()
                stats = run(seed)
                times.append(time.perf_counter() - start)
            med, top = statistics.median(times), max(times)
            worst = max(worst, top / target)
            print(f"| {name} | {stats.warp_instructions:,} | {stats.instructions:,} | {med:.2f} | {top:.2f} | "
                  f"{target:.0f} | {top / target:.3f} |")
    return 0 if worst <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
