"""The PTX of every shipped kernel configuration, fingerprinted: does a port change what we ship?

Issue 22 moves every kernel from MLIR text templates to the ``fa4_mlir.dsl`` API; each shipped config's
PTX must stay byte-identical (or the difference be explained). This compiles each configuration the
tests, benchmarks, artifacts and the protocol corpus use (``configs``) to PTX and records the PTX's
sha256 with the launch facts the manifest takes from the kernel source (parameters, grid, config).

    python bench/ptx_fingerprint.py --write test/python/data/ptx_fingerprints.json   # the baseline
    python bench/ptx_fingerprint.py --check test/python/data/ptx_fingerprints.json [--only KERNEL] [--match TEXT]
    python bench/ptx_fingerprint.py --update test/python/data/ptx_fingerprints.json --only KERNEL --match TEXT

``--check`` exits 1 naming every configuration whose fingerprint differs. The baseline was written at
3b57ed4, before the port (all kernels as MLIR text); the sm_90a head dim 512 configurations, new
since, were added with their first PTX. test/python/test_ptx_fingerprints.py checks the
ported kernels in CI. The sm_90a attention configurations of head dims 256 and 512 were fingerprinted
again for the consumers' lazy rescale (``AttentionConfig.lazy_rescale``, issue 25; a deliberate change).
Every sm_90a attention configuration was fingerprinted again when the kernel took the GQA group at launch
(``AttentionConfig.runtime_group``, issue 25): an i32 ``group`` parameter after ``num_heads``, the K/V head
``head / group`` read from it (``ld.param`` + ``div.u32`` where group 1 used the head and groups 4 and 8 a
shift), and the config's ``"group": "runtime"``; configurations that differ only in group now share one
PTX. Two sm_100a configurations over gathered pages (``AttentionConfig.page_gather``, issue 26) were added with
their first PTX. Every sm_90a attention configuration was fingerprinted again when the consumers took the
K/V tiles no row masks in a loop of their own, without the mask's test, and head dim 256 rescaled O before
the P V wgmma (issue 25; the persistent ones keep their PTX). The two persistent configurations were
fingerprinted again when a store warp took the walk's O stores, Q became a ring of two stages released by
every consumer thread, the walk took the unmasked tiles' loop and its causal order rotated (issue 25). The
causal walks of one K/V loop (``AttentionConfig.single_kv_loop``) and two configurations of more K/V stages
(``kv_stages``) were added with their first PTX.
``--update`` rewrites only the selected configurations' entries.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "test", "python"), os.path.join(HERE, "..", "test", "gpu")]


def configs() -> list[tuple[str, dict]]:
    """(kernel, config keywords) of every shipped configuration, without duplicates."""
    out: list[tuple[str, dict]] = []

    def add(kind: str, **kw) -> None:
        if (kind, kw) not in out:
            out.append((kind, kw))
    for t, cons, st, dt in itertools.product(("sm_100a", "sm_90a"), (1, 2, 3), (1, 2, 4), ("bf16", "fp16")):
        add("copy-pipeline", target=t, consumers=cons, stages=st, dtype=dt,
            **({"tile_rows": 96, "consumer_registers": 152} if cons == 3 else {}))
    add("copy-pipeline", target="sm_100a")
    add("copy-pipeline", target="sm_90a")
    import protocol_mutants
    import test_gemm_kernel
    from gemm_variants import SWEEP
    for kw in protocol_mutants.GEMM_CONFIGS.values():
        add("gemm", **kw)
    for kw in test_gemm_kernel.CONFIGS:
        add("gemm", **kw)
    for d, bm in itertools.product(("bf16", "fp16"), ("k", "mn")):
        add("gemm", dtype=d, target="sm_90a", b_major=bm)
    for kw in SWEEP:
        add("gemm", target="sm_90a", b_major="mn", **kw)
    for pair, bm in itertools.product((False, True), ("k", "mn")):
        add("gemm", b_major=bm, **(dict(cta_group=2, tile_m=256) if pair else {}))
    import test_attention_hopper
    import test_attention_kernel
    from build_artifacts import TILE_SWEEP
    for kw in test_attention_kernel.SUPPORTED:
        add("attention", **kw)
    for kw in protocol_mutants.ATTENTION_CONFIGS.values():
        add("attention", **kw)
    for i in range(30):  # the emulator matrix (test_emu_sm100_matrix)
        add("attention", num_q=(1, 2)[i % 2], head_dim=(64, 96, 128)[i % 3], dtype=("bf16", "fp16")[(i // 2) % 2],
            causal=(i // 3) % 2 == 1, group=(1, 4, 8)[(i // 5) % 3])
    for kw in test_attention_hopper.SUPPORTED:
        add("attention", target="sm_90a", **kw)
    for dt, d, c, g in itertools.product(("bf16", "fp16"), (64, 96, 128, 192, 256, 512), (False, True), (1, 4, 8)):
        add("attention", target="sm_90a", dtype=dt, head_dim=d, causal=c, group=g)
    for d, tiles in TILE_SWEEP["bf16"].items():
        for (nq, bn), c in itertools.product(tiles, (False, True)):
            add("attention", target="sm_90a", head_dim=d, causal=c, block_n=bn, **({"num_q": nq} if nq != 2 else {}))
    # sm_100a over gathered pages (``AttentionConfig.page_gather``): its fused 2Q ring, and 1Q packed Q causal
    add("attention", head_dim=128, page_size=24)
    add("attention", head_dim=64, num_q=1, page_size=100, varlen=True, causal=True)
    return out


def key(kind: str, kw: dict) -> str:
    return kind + "".join(f" {k}={v}" for k, v in sorted(kw.items()))


def fingerprint(kind: str, kw: dict) -> dict:
    """The PTX sha256 (stage ptx, protocol verifier off: it does not change the IR) and the launch facts."""
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.kernels import KERNELS

    config_class, build = KERNELS[kind]
    source = build(config_class(**kw))
    ptx = compile_kernel(source, stop="ptx", verify_protocol=False).ptx
    return {"ptx_sha256": hashlib.sha256(ptx.encode()).hexdigest(),
            "params": [[p.name, p.kind, p.doc, p.tensor_map.to_json() if p.tensor_map else None]
                       for p in source.params],
            "grid": source.grid, "config": source.config}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE", help="fingerprint every configuration into FILE")
    mode.add_argument("--check", metavar="FILE", help="compare against FILE; exit 1 on a difference")
    mode.add_argument("--update", metavar="FILE", help="fingerprint the selected configurations (--only, --match) "
                      "again into FILE, keeping its other entries")
    p.add_argument("--only", choices=("copy-pipeline", "gemm", "attention"), help="one kernel's configurations")
    p.add_argument("--match", metavar="TEXT", help="only configurations whose name contains TEXT "
                   "(e.g. 'target=sm_90a')")
    args = p.parse_args(argv)
    start, found = time.perf_counter(), {}
    for kind, kw in configs():
        if args.only in (None, kind) and (args.match or "") in key(kind, kw):
            found[key(kind, kw)] = fingerprint(kind, kw)
    if args.write or args.update:
        path = args.write or args.update
        entries = found
        if args.update:
            with open(path, encoding="utf-8") as f:
                entries = {**json.load(f), **found}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(entries, f, indent=0, sort_keys=True)
            f.write("\n")
        print(f"{len(found)} configurations in {time.perf_counter() - start:.0f} s -> {path}")
        return 0
    with open(args.check, encoding="utf-8") as f:
        baseline = json.load(f)
    differ = [name for name, fp in found.items() if baseline.get(name) != fp]
    for name in differ:
        was = baseline.get(name)
        what = "not in the baseline" if was is None else ", ".join(k for k in found[name] if was.get(k) != found[name][k])
        print(f"DIFFERS: {name}: {what}")
    print(f"{len(found) - len(differ)} of {len(found)} configurations identical ({time.perf_counter() - start:.0f} s)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
