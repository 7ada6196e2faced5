"""Decoding over a paged K/V cache: fa4 flash_attn_with_kvcache against FlashAttention-4 (paged, via its varlen
function's page_table) and torch SDPA, as achieved HBM bandwidth, in one run.

    FA4_CACHE_DIR=.fa4-cache python bench/decode.py [--batch 64] [--context 8192] [--heads 64] [--kv-heads 8]
        [--head-dim 128] [--queries 1] [--page-size 256] [--splits 1,2,4] [--graph] [--repeats 200]
        [--json out.json]

Each sequence holds ``--context`` keys in pages of ``--page-size`` (pages shuffled over the cache) and asks
``--queries`` query tokens (1: a decode step; up to 16: speculative decoding), causal (bottom-right). GB/s =
the bytes a step must move at least (K and V of every sequence once, Q and O) / the median time
(``triton.testing.do_bench``), next to the H100's 3.35 TB/s; ratios ours / theirs from the same run. SDPA gets
the same keys as a dense (B, Hk, S, D) cache with ``enable_gqa`` (what a user without a paged kernel runs);
the output of every peer is first checked against ours. A prefill over the cache (``--queries`` up to the
context, e.g. ``--batch 4 --context 4096 --queries 4096``) is the paged prefill; TFLOP/s count the visible
(query, key) pairs (4 * B * H * D each); the ratio columns are the same for both units. ``--splits`` adds the op
with each given ``num_splits`` (``splitsN``; 1: without split KV) to the table; ``--graph`` times each case as
the replay of a CUDA graph it was captured in (a decode loop's way: GPU time, no host cost per call).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

import torch
import triton.testing

from fa4_mlir.torch import flash_attn_with_kvcache

HBM_GBPS = 3350.0  # the H100 SXM's HBM3 bandwidth


def fa4_paged():
    """FlashAttention-4's varlen function (paged through ``page_table``), or None when not installed."""
    try:
        from flash_attn.cute import flash_attn_varlen_func as theirs
    except Exception:
        return None
    return theirs


def graphed(fn):
    """``fn`` captured in a CUDA graph (after an eager call: our op checks its metadata there), as its replay:
    GPU time alone, as a serving loop that replays its decode step sees it."""
    fn()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def measure(b: int, sk: int, h: int, hk: int, d: int, sq: int, page: int, repeats: int, splits: tuple = (),
            graph: bool = False) -> dict:
    pages_per_seq = -(-sk // page)
    num_pages = b * pages_per_seq
    k_cache, v_cache = (torch.randn(num_pages, page, hk, d, device="cuda").bfloat16() for _ in range(2))
    table = torch.randperm(num_pages, device="cuda", dtype=torch.int64).to(torch.int32).view(b, pages_per_seq)
    seqlens = torch.full((b,), sk, dtype=torch.int32, device="cuda")
    q = torch.randn(b, sq, h, d, device="cuda").bfloat16()
    ours = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, block_table=table, causal=True)
    cases = {"fa4-mlir": lambda: flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens,
                                                         block_table=table, causal=True)}
    errors = {}
    for n in splits:  # the op with num_splits n (1: no split KV)
        def forced(n=n):
            return flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, block_table=table, causal=True,
                                           num_splits=n)
        errors[f"splits{n}"] = float((forced().float() - ours.float()).norm() / ours.float().norm())
        cases[f"splits{n}"] = forced
    theirs = fa4_paged()
    if theirs is not None:
        def fa4_call():
            out = theirs(q, k_cache, v_cache, page_table=table, seqused_k=seqlens, causal=True)
            return out[0] if isinstance(out, tuple) else out
        try:
            errors["fa4_cute"] = float((fa4_call().float() - ours.float()).norm() / ours.float().norm())
            cases["fa4_cute"] = fa4_call
        except Exception as exc:
            print(f"  fa4_cute unavailable: {type(exc).__name__}: {exc}"[:300])

        def fa4_split():  # its split-KV heuristic (num_splits < 1), where its signature has one
            out = theirs(q, k_cache, v_cache, page_table=table, seqused_k=seqlens, causal=True, num_splits=0)
            return out[0] if isinstance(out, tuple) else out
        try:
            errors["fa4_cute_split"] = float((fa4_split().float() - ours.float()).norm() / ours.float().norm())
            cases["fa4_cute_split"] = fa4_split
        except Exception as exc:
            print(f"  fa4_cute with num_splits=0 unavailable: {type(exc).__name__}: {exc}"[:300])
    dense_k, dense_v = (c[table.long()].reshape(b, pages_per_seq * page, hk, d)[:, :sk].transpose(1, 2).contiguous()
                        for c in (k_cache, v_cache))
    qt = q.transpose(1, 2)
    mask = torch.ones(sq, sk, dtype=torch.bool, device="cuda").tril(sk - sq)  # bottom-right causal

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(qt, dense_k, dense_v, attn_mask=mask, enable_gqa=True)
    errors["sdpa"] = float((sdpa().transpose(1, 2).float() - ours.float()).norm() / ours.float().norm())
    cases["sdpa"] = sdpa
    if torch.isnan(ours).any() or any(e > 2e-2 for e in errors.values()):
        raise SystemExit(f"fa4 flash_attn_with_kvcache disagrees: {errors}")
    if graph:
        for name in list(cases):
            try:
                cases[name] = graphed(cases[name])
            except Exception as exc:
                print(f"  {name} not captured in a CUDA graph: {type(exc).__name__}: {exc}"[:300])
                del cases[name]
    ms = {name: triton.testing.do_bench(fn, warmup=25, rep=repeats, return_mode="median") for name, fn in cases.items()}
    moved = 2 * b * sk * hk * d * 2 + 2 * b * sq * h * d * 2  # K, V once; Q and O (bf16)
    pairs = sum(min(sk, max(0, i + 1 + sk - sq)) for i in range(sq))  # bottom-right causal
    flops = 4 * b * h * d * pairs
    return {"batch": b, "context": sk, "heads": h, "kv_heads": hk, "head_dim": d, "queries": sq, "page_size": page,
            "ms": ms, "gbps": {n: moved / (t * 1e-3) / 1e9 for n, t in ms.items()},
            "tflops": {n: flops / (t * 1e-3) / 1e12 for n, t in ms.items()}, "rel_err": errors}


def print_rows(rows: list[dict]) -> None:
    names = sorted({n for r in rows for n in r["gbps"] if n != "fa4-mlir"})
    print("| B | context | H/Hk | D | Sq | page | fa4-mlir GB/s (% of 3.35 TB/s) | fa4-mlir TF/s | "
          + " | ".join(f"{n} GB/s | ratio" for n in names) + " |")
    print("|---" * (8 + 2 * len(names)) + "|")
    for r in rows:
        g = r["gbps"]
        cells = [f"{g[n]:.0f} | {g['fa4-mlir'] / g[n]:.2f}" if n in g else "- | -" for n in names]
        print(f"| {r['batch']} | {r['context']} | {r['heads']}/{r['kv_heads']} | {r['head_dim']} | {r['queries']} | "
              f"{r['page_size']} | {g['fa4-mlir']:.0f} ({100 * g['fa4-mlir'] / HBM_GBPS:.0f}%) | "
              f"{r['tflops']['fa4-mlir']:.0f} | " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", default="64")
    parser.add_argument("--context", default="8192")
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--queries", default="1")
    parser.add_argument("--page-size", type=int, default=256)
    parser.add_argument("--splits", default="", help="also time the op with these num_splits (1: no split KV)")
    parser.add_argument("--graph", action="store_true", help="time CUDA graph replays (GPU time, no host cost)")
    parser.add_argument("--repeats", type=int, default=200, help="ms of timed runs per case (do_bench rep)")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | {datetime.date.today()} | "
          f"{' '.join(sys.argv)}")
    rows = [measure(int(b), int(s), args.heads, args.kv_heads, args.head_dim, int(sq), args.page_size, args.repeats,
                    tuple(int(n) for n in args.splits.split(",") if n), args.graph)
            for b in args.batch.split(",") for s in args.context.split(",") for sq in args.queries.split(",")]
    print_rows(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
