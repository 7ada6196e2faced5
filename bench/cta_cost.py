"""The cost of one CTA of the sm_90a attention against its K/V tiles, next to cuDNN's (microseconds).

    FA4_CACHE_DIR=.fa4-cache python bench/cta_cost.py [--sq 512] [--head-dims 64,128] [--json out.json]

Short sequences are where cuDNN leads (docs/PERF.md): each CTA there runs few K/V tiles, so what a CTA
costs besides its tiles weighs. This times the op (bf16, non-causal) on ``--sq`` query rows a head and
Sk = 128 .. 4096 keys, B x H = 2^26 / (Sq x D) heads (H = 2048 / D), and reports the time per wave of CTAs
(the kernel time over ceil(CTAs / 132): one CTA an SM, the op's tile of 128 rows, 192 at head dim 64) for
fa4-mlir and for cuDNN (torch SDPA) on the same inputs, and their difference: what our CTA costs beyond
cuDNN's at each number of K/V tiles (cuDNN's time is not one line in the keys: it changes its kernel with the
length). With Sq = 128 every CTA streams a K/V of its own from memory (a bandwidth test rather than a CTA's);
the default 512 shares each head's K/V over the query tiles of a head.
"""

from __future__ import annotations

import argparse
import json
import math

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

from fa4_mlir.configs.attention import SM90_SMS, AttentionConfig
from fa4_mlir.configs.attention_op import default_tile
from fa4_mlir.torch import flash_attention

ELEMENTS = 1 << 26  # Sq x B x H x D: Q's elements, the same in every row


def per_wave(ms: float, ctas: int) -> float:
    return ms * 1e3 / math.ceil(ctas / SM90_SMS)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sq", type=int, default=512, help="query rows a head (default 512)")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    torch.manual_seed(0)
    rows = []
    print("| D | Sq | B | H | Sk | fa4-mlir us | cuDNN us | fa4-mlir us / wave | cuDNN us / wave | difference |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in map(int, args.head_dims.split(",")):
        h = 2048 // d
        b = max(1, ELEMENTS // (args.sq * h * d))
        for sk in (128, 256, 512, 1024, 2048, 4096):
            num_q, block_n = default_tile("sm_90a", "bf16", d, False, sk)  # the op's tile: its rows a CTA
            bm = AttentionConfig(target="sm_90a", head_dim=d, num_q=num_q, block_n=block_n).hopper.bm
            ctas = b * h * math.ceil(args.sq / bm)
            q = torch.randn(b, args.sq, h, d, device="cuda", dtype=torch.bfloat16)
            k, v = (torch.randn(b, sk, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            ours = triton.testing.do_bench(lambda: flash_attention(q, k, v), warmup=30, rep=100,
                                           return_mode="median")
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                theirs = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(qt, kt, vt), warmup=30,
                                                 rep=100, return_mode="median")
            row = dict(head_dim=d, sq=args.sq, batch=b, heads=h, sk=sk, ctas=ctas, us={"fa4-mlir": ours * 1e3,
                                                                                        "cudnn": theirs * 1e3})
            rows.append(row)
            a, c = per_wave(ours, ctas), per_wave(theirs, ctas)
            print(f"| {d} | {args.sq} | {b} | {h} | {sk} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | {a:.2f} | {c:.2f} "
                  f"| {a - c:+.2f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
