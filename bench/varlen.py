"""fa4 flash_attn_varlen_func against our dense kernel, FlashAttention-4's varlen path and torch SDPA on
nested (jagged) tensors, in one run.

    FA4_CACHE_DIR=.fa4-cache python bench/varlen.py [--head-dims 64,128] [--causal both|yes|no]
        [--equal 1024,4096] [--ragged 4096] [--skewed 8192] [--tokens 16384] [--repeats 200] [--dtype bf16|fp16]
        [--json out.json]

Two row sets, H * D = 2048 (FA3's shapes), about ``--tokens`` query tokens a batch:

* ``equal``: B sequences of the same length S (B * S = tokens). ``fa4-mlir`` (the packed kernel) against
  ``dense`` (``flash_attention`` on the same batch as (B, S, H, D)): the price of the packing, which issue 26
  wants >= 0.95x.
* ``ragged``: lengths drawn uniformly from 1..``--ragged`` (seeded) until the batch holds ``tokens`` tokens,
  Sq = Sk per sequence. ``fa4-mlir`` against ``padded`` (our dense kernel on the batch padded to the longest
  sequence: what a user without varlen runs), FlashAttention-4's ``flash_attn_varlen_func`` (when
  ``flash_attn.cute`` is installed) and SDPA on nested jagged tensors (torch picks its flash varlen kernel).
* ``skewed``: one sequence of ``--skewed`` tokens, then short ones uniform in 1..256 (seeded) up to ``tokens``:
  sequences of very different lengths, where the tile schedule decides the tail. Peers as ``ragged``.

TFLOP/s count the work of the visible pairs only: 4 * H * D * sum over sequences of the (query, key) pairs a
row sees (Sq * Sk; causal, bottom-right: sum_i min(Sk, max(0, i + 1 + Sk - Sq))), so the padded batch's
wasted work earns nothing. Times are medians of ``triton.testing.do_bench`` (CUDA events); every case is first
checked against ours. Ratios (ours / peer) from the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys

import torch
import triton.testing

from fa4_mlir.torch import flash_attention, flash_attn_varlen_func

WIDTH = 2048


def visible_pairs(sq: int, sk: int, causal: bool) -> int:
    """(query, key) pairs that rows see: Sq * Sk, or bottom-right causal sum_i min(Sk, max(0, i + 1 + Sk - Sq))."""
    if not causal:
        return sq * sk
    return sum(min(sk, max(0, i + 1 + sk - sq)) for i in range(sq))


def fa4_varlen():
    """FlashAttention-4's varlen function, or None when flash_attn.cute is not installed."""
    try:
        from flash_attn.cute import flash_attn_varlen_func as theirs
    except Exception:
        return None
    return theirs


def measure(lengths: list[int], d: int, causal: bool, repeats: int, dtype: torch.dtype, kind: str) -> dict:
    h = WIDTH // d
    b, longest, total = len(lengths), max(lengths), sum(lengths)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(total, h, d, device="cuda").to(dtype) for _ in range(3))
    ours = flash_attn_varlen_func(q, k, v, cu, cu, longest, longest, causal=causal)
    cases = {"fa4-mlir": lambda: flash_attn_varlen_func(q, k, v, cu, cu, longest, longest, causal=causal)}
    errors = {}
    if kind == "equal":  # the same batch as (B, S, H, D): the dense kernel's layout, no copy
        qd, kd, vd = (t.view(b, longest, h, d) for t in (q, k, v))
        cases["dense"] = lambda: flash_attention(qd, kd, vd, causal=causal)
        errors["dense"] = float((cases["dense"]().reshape(total, h, d).float() - ours.float()).norm()
                                / ours.float().norm())
    else:  # the batch padded to the longest sequence (timed only: its padding keys are not masked)
        padded = [torch.zeros(b, longest, h, d, device="cuda", dtype=dtype) for _ in range(3)]
        for t, src in zip(padded, (q, k, v)):
            for i, n in enumerate(lengths):
                t[i, :n] = src[int(cu[i]):int(cu[i]) + n]
        cases["padded"] = lambda: flash_attention(*padded, causal=causal)
        theirs = fa4_varlen()
        if theirs is not None:
            def fa4_call():
                out = theirs(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest, max_seqlen_k=longest,
                             causal=causal)
                return out[0] if isinstance(out, tuple) else out
            errors["fa4_cute"] = float((fa4_call().float() - ours.float()).norm() / ours.float().norm())
            cases["fa4_cute"] = fa4_call
        try:
            nested = [torch.nested.nested_tensor_from_jagged(t, offsets=cu.long()).transpose(1, 2) for t in (q, k, v)]

            def sdpa():
                return torch.nn.functional.scaled_dot_product_attention(*nested, is_causal=causal)
            got = sdpa().transpose(1, 2).values()
            errors["sdpa_nested"] = float((got.float() - ours.float()).norm() / ours.float().norm())
            cases["sdpa_nested"] = sdpa
        except Exception as exc:  # a torch without nested SDPA for this case
            print(f"  sdpa_nested unavailable: {type(exc).__name__}: {exc}"[:200])
    if torch.isnan(ours).any() or any(e > 2e-2 for e in errors.values()):
        raise SystemExit(f"fa4 flash_attn_varlen_func disagrees ({kind}, D{d}, causal={causal}): {errors}")
    ms = {name: triton.testing.do_bench(fn, warmup=50, rep=repeats, return_mode="median") for name, fn in cases.items()}
    flops = 4 * h * d * sum(visible_pairs(n, n, causal) for n in lengths)
    return {"kind": kind, "head_dim": d, "batch": b, "tokens": total, "longest": longest, "causal": causal,
            "ms": ms, "tflops": {n: flops / (t * 1e-3) / 1e12 for n, t in ms.items()}, "rel_err": errors}


def ragged_lengths(longest: int, tokens: int, seed: int) -> list[int]:
    """Lengths uniform in 1..longest until their sum reaches ``tokens`` (the last one cut to fit)."""
    rng, out = random.Random(seed), []
    while sum(out) < tokens:
        out.append(min(rng.randint(1, longest), tokens - sum(out)))
    return out


def skewed_lengths(longest: int, tokens: int, seed: int) -> list[int]:
    """One sequence of ``longest`` tokens, then lengths uniform in 1..256 up to ``tokens`` (the last one cut)."""
    rng, out = random.Random(seed), [min(longest, tokens)]
    while sum(out) < tokens:
        out.append(min(rng.randint(1, 256), tokens - sum(out)))
    return out


def print_rows(rows: list[dict]) -> None:
    names = sorted({n for r in rows for n in r["tflops"] if n != "fa4-mlir"})
    print("| set | D | causal | B | longest | fa4-mlir TF/s | " + " | ".join(f"{n} TF/s | ratio" for n in names) + " |")
    print("|---" * (6 + 2 * len(names)) + "|")
    for r in rows:
        t = r["tflops"]
        cells = [f"{t[n]:.0f} | {t['fa4-mlir'] / t[n]:.2f}" if n in t else "- | -" for n in names]
        print(f"| {r['kind']} | {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {r['batch']} | {r['longest']} | "
              f"{t['fa4-mlir']:.0f} | " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--equal", default="1024,4096", help="equal-length rows: sequence lengths, comma-separated")
    parser.add_argument("--ragged", default="4096", help="ragged rows: longest lengths, comma-separated")
    parser.add_argument("--skewed", default="8192", help="skewed rows: the long sequence's lengths, comma-separated")
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=200, help="ms of timed runs per case (do_bench rep)")
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args()
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    masks = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    head_dims = [int(x) for x in args.head_dims.split(",")]
    print(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | {datetime.date.today()} | "
          f"{' '.join(sys.argv)}")
    sets = [("equal", [s] * (args.tokens // s)) for s in map(int, filter(None, args.equal.split(",")))]
    sets += [("ragged", ragged_lengths(n, args.tokens, args.seed))
             for n in map(int, filter(None, args.ragged.split(",")))]
    sets += [("skewed", skewed_lengths(n, args.tokens, args.seed))
             for n in map(int, filter(None, args.skewed.split(",")))]
    rows = [measure(lengths, d, c, args.repeats, dtype, kind) for kind, lengths in sets for d in head_dims
            for c in masks]
    print_rows(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
