"""fa4-layout: print the shared-memory, mbarrier and TMEM layout of a kernel configuration.

    fa4-layout                                     # FA4 forward, bf16, head dim 128, 2Q
    fa4-layout --kernel depth512 --qk-depth 512 --ov-depth 512 --json
    fa4-layout --kernel depth512 --rope-depth 64 --group 16     # absorbed MLA (576 / 512), 16 heads
    fa4-layout --kernel depth512 --rope-depth 64 --group 16 --dtype fp8_e4m3 --rope-dtype bf16  # fp8 latent
    fa4-layout --kernel gemm --tile 128x256x64 --target sm_90a
    fa4-layout --num-q 1 --page-gather             # a gathered paged cache's barriers (Q0_sync, lane-counted K/V)
    fa4-layout --emit-ir                           # the fa4 IR, placed by the allocation passes

The layout is placed by the compiler's own passes (fa4-allocate-smem, -mbarriers, -tmem), so the
table is what a kernel built from the same config gets. Bad options are one ``error:`` line, exit 1.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

KERNELS = ("fa4", "depth512", "gemm")
ATTENTION_OPTIONS = ("qk_depth", "ov_depth", "num_q", "pair_cta", "group", "rope_dtype", "scale_dtype",
                     "page_size", "rope_depth", "page_gather")
FA4_ONLY = ("num_q", "pair_cta", "scale_dtype", "page_gather")
DEPTH512_ONLY = ("rope_depth",)
GEMM_OPTIONS = ("tile", "stages", "epi_tile_n", "epi_load_stages", "accum_stages", "cta_group", "pingpong",
                "cluster_m")


def _arg_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fa4-layout", description="Print the SMEM / mbarrier / TMEM layout of a "
                                "kernel configuration, placed by the fa4 allocation passes.")
    p.add_argument("--kernel", choices=KERNELS, default="fa4", help="which kernel (default: fa4)")
    p.add_argument("--dtype", default="bf16", help="bf16 | fp16 | fp8_e4m3 (default: bf16)")
    p.add_argument("--target", default=None, help="sm_100a (default) | sm_90a (gemm only)")
    a = p.add_argument_group("attention (fa4, depth512)")
    a.add_argument("--qk-depth", type=int, default=None, help="default: 128 (fa4), 512 (depth512)")
    a.add_argument("--ov-depth", type=int, default=None, help="default: the qk depth")
    a.add_argument("--num-q", type=int, default=None, help="Q tiles per CTA, 1 or 2 (fa4; default 2)")
    a.add_argument("--pair-cta", action="store_true", default=None, help="CTA pair (fa4)")
    a.add_argument("--group", type=int, default=None, help="query heads per KV head (default 1)")
    a.add_argument("--rope-dtype", default=None, help="dtype of the rope part (fa4 MLA; depth512 MLA with an fp8 "
                   "latent: bf16 or fp16)")
    a.add_argument("--scale-dtype", default=None, help="per-token scale dtype (fa4)")
    a.add_argument("--page-size", type=int, default=None, help="KV page size, 0 = not paged (default)")
    a.add_argument("--page-gather", action="store_true", default=None, help="paged K/V gathered by the load warp's "
                   "lanes (fa4: AttentionConfig.page_gather; threads-counted K/V full barriers, Q0_sync)")
    a.add_argument("--rope-depth", type=int, default=None, help="64: absorbed MLA, q/k 512 + 64 (depth512)")
    g = p.add_argument_group("gemm")
    g.add_argument("--tile", default=None, metavar="MxNxK", help="default 128x256x64")
    g.add_argument("--stages", type=int, default=None, help="A/B stages, 0 = as many as fit (default)")
    g.add_argument("--epi-tile-n", type=int, default=None, help="C/D sub-tile width (default 64)")
    g.add_argument("--epi-load-stages", type=int, default=None, help="EpiLoadPipeline stages (default 2)")
    g.add_argument("--accum-stages", type=int, default=None, help="TMEM accumulator stages (default 2)")
    g.add_argument("--cta-group", type=int, default=None, help="1, or 2 for a CTA pair (default 1)")
    g.add_argument("--pingpong", action="store_true", default=None, help="sm_90a: each consumer warpgroup owns "
                   "every other tile (a D staging tile each, the turn barriers)")
    g.add_argument("--cluster-m", type=int, default=None, help="sm_90a: 2 for 2x1 clusters that multicast B (each "
                   "stage released to both CTAs' loads)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--emit-ir", action="store_true", help="print the placed fa4 IR")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _arg_parser().parse_args(argv)
    from fa4_mlir.errors import Fa4Error

    try:
        config = _config(args)
        return _run(args, config)
    except Fa4Error as exc:
        print(f"fa4-layout: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: one line unless FA4_TRACEBACK=1
        from fa4_mlir.core.isolate import report_internal_error

        report_internal_error("fa4-layout", exc)
        return 1


def _given(args, names) -> list[str]:
    return [n for n in names if getattr(args, n) is not None]


def _config(args):
    from fa4_mlir.configs import Depth512Config, FA4Config, GemmConfig
    from fa4_mlir.errors import ConfigError

    def reject(names, why):
        if names:
            flags = ", ".join("--" + n.replace("_", "-") for n in names)
            raise ConfigError(f"{flags} {'does' if len(names) == 1 else 'do'} not apply to --kernel {args.kernel}: {why}")

    def pick(**kw):
        return {k: v for k, v in kw.items() if v is not None}

    if args.kernel == "gemm":
        reject(_given(args, ATTENTION_OPTIONS), "it is an attention option")
        tile = {}
        if args.tile is not None:
            m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", args.tile)
            if not m:
                raise ConfigError(f"--tile must be MxNxK (e.g. 128x256x64), got '{args.tile}'")
            tile = dict(tile_m=int(m.group(1)), tile_n=int(m.group(2)), tile_k=int(m.group(3)))
        return GemmConfig(**pick(dtype=args.dtype, target=args.target, num_stages=args.stages,
                                 epi_tile_n=args.epi_tile_n, epi_load_stages=args.epi_load_stages,
                                 accum_stages=args.accum_stages, cta_group=args.cta_group, pingpong=args.pingpong,
                                 cluster_m=args.cluster_m),
                          **tile).validate()
    reject(_given(args, GEMM_OPTIONS), "it is a gemm option")
    if args.target not in (None, "sm_100a"):
        raise ConfigError(f"--target must be sm_100a for --kernel {args.kernel} (tcgen05 and TMEM), "
                          f"got '{args.target}'")
    if args.kernel == "depth512":
        reject(_given(args, FA4_ONLY), "the depth-512 kernel is always a 2-CTA pair without per-token scales")
        return Depth512Config(**pick(dtype=args.dtype, qk_depth=args.qk_depth, ov_depth=args.ov_depth,
                                     group=args.group, page_size=args.page_size,
                                     rope_depth=args.rope_depth, rope_dtype=args.rope_dtype)).validate()
    reject(_given(args, DEPTH512_ONLY), "absorbed MLA (rope depth 64) is a depth512 layout")
    return FA4Config(**pick(dtype=args.dtype, qk_depth=args.qk_depth, ov_depth=args.ov_depth, num_q=args.num_q,
                            pair_cta=args.pair_cta, group=args.group, rope_dtype=args.rope_dtype,
                            scale_dtype=args.scale_dtype, page_size=args.page_size, page_gather=args.page_gather,
                            is_mla=args.rope_dtype is not None)).validate()


def _run(args, config) -> int:
    from fa4_mlir._mlir import ir
    from fa4_mlir.core.context import make_context
    from fa4_mlir.core.layout_ir import place_layout
    from fa4_mlir.layouts import depth512_layout, fa4_layout, gemm_layout
    from fa4_mlir.target import SMEM_CARVEOUT

    layout = {"fa4": fa4_layout, "depth512": depth512_layout, "gemm": gemm_layout}[args.kernel](config)
    target = args.target or "sm_100a"
    with make_context(), ir.Location.unknown():
        module, placed = place_layout(layout, target)
        if args.emit_ir:
            sys.stdout.write(str(module))
            return 0
    report = _report(layout, placed, target, SMEM_CARVEOUT)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_table(report))
    return 0


def summary(layout, target: str) -> str:
    """The placed table of ``layout`` (fa4-compile prints it for built-in kernels)."""
    from fa4_mlir._mlir import ir
    from fa4_mlir.core.context import make_context
    from fa4_mlir.core.layout_ir import place_layout
    from fa4_mlir.target import SMEM_CARVEOUT

    with make_context(), ir.Location.unknown():
        _, placed = place_layout(layout, target)
    return _table(_report(layout, placed, target, SMEM_CARVEOUT))


def _report(layout, placed, target: str, capacity: int) -> dict:
    regions = [{"name": r.name, "offset": placed.region_offsets[r.name], "bytes": r.bytes, "align": r.align,
                "swizzle": r.swizzle, "alias_of": r.alias_of} for r in layout.regions]
    mbarriers = []
    for b in layout.barriers:
        first = placed.barrier_index[b.name]
        for i, count in enumerate(b.counts):
            mbarriers.append({"name": b.name if len(b.counts) == 1 else f"{b.name}[{i}]", "array": b.name,
                              "index": first + i, "count": count, "arrival": b.arrival, "cta_group": b.cta_group,
                              "arrivers": b.arrivers, "waiters": b.waiters})
    tmem = [{"name": t.name, "column": placed.tmem_column[t.name], "columns": t.columns} for t in layout.tmem]
    return {"kernel": layout.kernel, "target": target, "config": layout.config, "smem_bytes": placed.smem_bytes,
            "smem_capacity": capacity, "smem_headroom": capacity - placed.smem_bytes, "regions": regions,
            "mbarriers": mbarriers, "tmem": tmem, "tmem_allocated": placed.tmem_allocated}


def _table(r: dict) -> str:
    lines = [f"{r['kernel']} on {r['target']}: " + ", ".join(f"{k}={v}" for k, v in r["config"].items()), "",
             f"shared memory: {r['smem_bytes']} of {r['smem_capacity']} B ({r['smem_headroom']} B headroom)",
             f"  {'region':<12} {'offset':>8} {'bytes':>8} {'end':>8} {'align':>6}  notes"]
    for g in r["regions"]:
        notes = [f"swizzle {g['swizzle']}"] if g["swizzle"] != "none" else []
        notes += [f"aliases {g['alias_of']}"] if g["alias_of"] else []
        lines.append(f"  {g['name']:<12} {g['offset']:>8} {g['bytes']:>8} {g['offset'] + g['bytes']:>8} "
                     f"{g['align']:>6}  {', '.join(notes)}")
    lines += ["", f"mbarriers: {len(r['mbarriers'])}",
              f"  {'index':>5}  {'name':<20} {'count':>5}  {'arrival':<8} {'arrives':<58} waits"]
    for b in r["mbarriers"]:
        lines.append(f"  {b['index']:>5}  {b['name']:<20} {b['count']:>5}  {b['arrival']:<8} {b['arrivers']:<58} "
                     f"{b['waiters']}")
    if r["tmem"]:
        lines += ["", f"tensor memory: {r['tmem_allocated']} columns allocated",
                  f"  {'region':<8} {'column':>6} {'columns':>7}"]
        lines += [f"  {t['name']:<8} {t['column']:>6} {t['columns']:>7}" for t in r["tmem"]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
