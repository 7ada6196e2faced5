"""fa4 gemm_residual against cuBLAS (torch.addmm, torch.mm) and quack's gemm_add on one GPU, in one run.

    FA4_CACHE_DIR=.fa4-cache python bench/gemm.py [--b-layout kn|nk|both] [--repeats 300] [--json out.json]
        [--quack tuned|untuned|off]

For each shape (M, N, K), bf16: the median time (triton.testing.do_bench, CUDA events; the median of
three rounds that time the cases in turn, ``interleaved``) of
``fa4 gemm_residual(a, b, c, alpha, beta)`` (D = alpha * A @ B + beta * C), ``torch.addmm(c, a, b,
beta=beta, alpha=alpha)`` (the same function through cuBLAS) and ``torch.mm(a, b)`` (no epilogue),
as TFLOP/s (2 * M * N * K flops) and the ratios fa4 / addmm and fa4 / mm from the same run; with
quack installed (``../shared/tools/peers/fetch.sh``), also quack's fused ``gemm_add`` and fa4 / quack. ``b`` is
(K, N) row-major (``kn``, what ``a @ b`` usually gets) or the transpose of a row-major (N, K) tensor
(``nk``, an nn.Linear weight). Inputs are random normals; each case is checked against torch.addmm
before it is timed. ``--sweep`` also times each ``gemm_variants.SWEEP`` config through a packed launch
(the op's host path) against addmm and quack.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

import torch
import triton.testing

import fa4_mlir.torch  # noqa: F401  (registers torch.ops.fa4)
from gemm_variants import SWEEP  # bench/ is the script's directory

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 2048), (8192, 28672, 4096)]
ALPHA, BETA = 1.0, 1.0


def operands(m: int, n: int, k: int, layout: str):
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(k, n, device="cuda").bfloat16()
    if layout == "nk":
        b = b.t().contiguous().t()
    c = torch.randn(m, n, device="cuda").bfloat16()
    return a, b, c


def check(a, b, c) -> float:
    """Relative error of fa4 against torch.addmm (both bf16): they must agree to bf16 rounding."""
    ours = torch.ops.fa4.gemm_residual(a, b, c, ALPHA, BETA).float()
    theirs = torch.addmm(c, a, b, beta=BETA, alpha=ALPHA).float()
    rel = float((ours - theirs).norm() / theirs.norm())
    if not rel < 1e-2 or torch.isnan(ours).any():
        raise SystemExit(f"fa4 gemm_residual disagrees with torch.addmm: relative error {rel}")
    return rel


def quack_gemm_add(tuned: bool):
    """quack's fused ``gemm_add`` (D = alpha A @ B + beta C, CuTe DSL) when installed (../shared/tools/peers),
    else None; ``tuned``: quack's autotuner picks the tile per shape (its default; tens of seconds a shape)."""
    try:
        from quack.gemm_interface import gemm_add
    except Exception:  # not installed
        return None
    return lambda a, b, c: gemm_add(a, b, c, alpha=ALPHA, beta=BETA, tuned=tuned)


def measure(m: int, n: int, k: int, layout: str, repeats: int, quack=None) -> dict:
    """Check, then time fa4, addmm, mm (and quack's gemm_add) on one shape (fresh random operands)."""
    a, b, c = operands(m, n, k, layout)
    rel = check(a, b, c)
    cases = {"fa4": lambda: torch.ops.fa4.gemm_residual(a, b, c, ALPHA, BETA),
             "addmm": lambda: torch.addmm(c, a, b, beta=BETA, alpha=ALPHA),
             "mm": lambda: torch.mm(a, b)}
    if quack is not None:
        theirs, want = quack(a, b, c).float(), torch.addmm(c, a, b, beta=BETA, alpha=ALPHA).float()
        quack_rel = float((theirs - want).norm() / want.norm())
        if quack_rel < 1e-2:
            cases["quack"] = lambda: quack(a, b, c)
        else:
            print(f"  quack gemm_add disagrees with addmm at {m}x{n}x{k} {layout}: {quack_rel:.1e}; not timed")
    ms = interleaved(cases, repeats)
    tflops = {name: 2 * m * n * k / (t * 1e-3) / 1e12 for name, t in ms.items()}
    return {"shape": [m, n, k], "b": layout, "ms": ms, "tflops": tflops, "rel_err": rel}


def interleaved(cases: dict, repeats: int, rounds: int = 3) -> dict:
    """Median ms of each case over ``rounds`` rounds that time every case in turn (``repeats / rounds``
    ms each): the GPU's clock, which falls as it heats (quack's autotuning just before, a long case),
    then weighs on every case alike instead of on whichever runs first."""
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            times[name].append(triton.testing.do_bench(fn, warmup=25, rep=max(1, repeats // rounds),
                                                       return_mode="median"))
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def sweep(shapes, layouts, repeats: int, quack=None) -> list[dict]:
    """Time each SWEEP variant of the kernel on ``shapes`` and B ``layouts``, each checked against
    torch.addmm first, with addmm and (when installed) quack's gemm_add as yardsticks from the same run."""
    from fa4_mlir import runtime
    from fa4_mlir.configs.gemm import GemmConfig
    from fa4_mlir.kernels import gemm
    from fa4_mlir.torch.ops import _b_operand
    from fa4_mlir.torch.tensors import global_tensor

    target = runtime.device_target(0)
    rows = []
    print("\n| variant (sm_90a) | M x N x K | B | TFLOP/s | vs addmm | vs quack |")
    print("|---|---|---|---|---|---|")
    for layout in layouts:
        for m, n, k in shapes:
            a, b, c = operands(m, n, k, layout)
            b_major, b_mem = _b_operand(b)
            d = torch.empty(m, n, device="cuda").bfloat16()
            base = {"addmm": lambda: torch.addmm(c, a, b)}
            if quack is not None:
                base["quack"] = lambda: quack(a, b, c)
            yard = interleaved(base, repeats)
            for extra in SWEEP:
                config = GemmConfig(target=target, b_major=b_major, **extra)
                kernel = runtime.load("gemm", config)
                grid, scalars = gemm.launch_geometry(config, m, n, k, kernel.resident_ctas)
                args = {"a": global_tensor(a, "bf16"), "b": global_tensor(b_mem, "bf16"),
                        "c": global_tensor(c, "bf16"), "d": global_tensor(d, "bf16"), **scalars, "alpha": 1.0,
                        "beta": 1.0, "has_c": 1}
                kernel.launch(grid, args)
                want = torch.addmm(c, a, b).float()
                rel = float((d.float() - want).norm() / want.norm())
                if not rel < 1e-2:
                    raise SystemExit(f"variant {extra} disagrees with torch.addmm at {m}x{n}x{k} {layout}: {rel}")
                # timed through the op's packed launch: Kernel.launch's host time (tens of us) would
                # show as idle GPU time between do_bench's L2 flush and the kernel
                packed = kernel.packed(grid, args, ("a", "b", "c", "d"))
                addresses = (a.data_ptr(), b_mem.data_ptr(), c.data_ptr(), d.data_ptr())
                stream = torch.cuda.current_stream().cuda_stream
                t = triton.testing.do_bench(lambda: packed.launch(addresses, stream), warmup=100, rep=repeats,
                                            return_mode="median")
                tf = 2 * m * n * k / (t * 1e-3) / 1e12
                name = ", ".join(f"{key}={v}" for key, v in extra.items()) or "default"
                ratios = {f"vs_{y}": yard[y] / t for y in yard}
                rows.append({"variant": name, "shape": [m, n, k], "b": layout, "tflops": tf, **ratios,
                             "rel_err": rel})
                vs_quack = f"{ratios['vs_quack']:.3f}" if "vs_quack" in ratios else "-"
                print(f"| {name} | {m}x{n}x{k} | {layout} | {tf:.0f} | {ratios['vs_addmm']:.3f} | {vs_quack} |",
                      flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b-layout", choices=("kn", "nk", "both"), default="kn",
                        help="kn: b is (K, N) row-major; nk: b is the transpose of (N, K) row-major")
    parser.add_argument("--repeats", type=int, default=300, help="ms of timed repeats per case (do_bench rep)")
    parser.add_argument("--shapes", default=None, help="MxNxK,... instead of the default shapes")
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--sweep", action="store_true", help="also time the kernel's config variants (SWEEP)")
    parser.add_argument("--quack", choices=("tuned", "untuned", "off"), default="tuned",
                        help="quack's gemm_add as a peer when installed: autotuned per shape (its default) or not")
    args = parser.parse_args()
    quack = None if args.quack == "off" else quack_gemm_add(args.quack == "tuned")
    shapes = SHAPES if not args.shapes else [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    layouts = ("kn", "nk") if args.b_layout == "both" else (args.b_layout,)
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
          f"{datetime.date.today()}, {' '.join(sys.argv)}")
    print("| M x N x K (bf16) | B | fa4 TFLOP/s | addmm TFLOP/s | mm TFLOP/s | quack gemm_add TFLOP/s | fa4/addmm | "
          "fa4/mm | fa4/quack | rel err vs addmm |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for layout in layouts:
        for m, n, k in shapes:
            row = measure(m, n, k, layout, args.repeats, quack)
            rows.append(row)
            tflops, rel = row["tflops"], row["rel_err"]
            q = tflops.get("quack")
            quack_cols = (f"{q:.0f}", f"{tflops['fa4'] / q:.3f}") if q else ("-", "-")
            print(f"| {m}x{n}x{k} | {layout} | {tflops['fa4']:.0f} | {tflops['addmm']:.0f} | {tflops['mm']:.0f} | "
                  f"{quack_cols[0]} | {tflops['fa4'] / tflops['addmm']:.3f} | {tflops['fa4'] / tflops['mm']:.3f} | "
                  f"{quack_cols[1]} | {rel:.1e} |", flush=True)
    swept = sweep(shapes, layouts, args.repeats, quack) if args.sweep else []
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "date": str(datetime.date.today()), "argv": sys.argv, "rows": rows,
                       "sweep": swept}, f, indent=2)


if __name__ == "__main__":
    main()
