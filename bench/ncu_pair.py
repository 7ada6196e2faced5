"""One shape through the op and a peer, twice each, for Nsight Compute to profile the second of each.

    ncu --clock-control none --set full --import-source no -k regex:"attention|sdpa|flash" --launch-skip 2 \
        --launch-count 2 -o rep python3 bench/ncu_pair.py --peer cudnn [--causal] D B S H

The op (``fa4_mlir.torch.flash_attention``, bf16, its own kernel choice) and the peer (``cudnn``: torch SDPA
forced to cuDNN; ``fa4``: FlashAttention-4's CuTe DSL kernel, from ../shared/tools/peers/fetch.sh) alternate on
the same random (B, S, H, D) inputs: ``--launch-skip 2 --launch-count 2`` keeps the second call of each. Prints
the two outputs' relative difference. ``bench/ncu_stalls.py`` reads the report's source page.

``--dtype fp8`` runs the op on the inputs quantized to e4m3 (one scale a tensor, amax / 448, as
``bench/attention.py --dtype fp8``); ``--peer bf16`` is the op itself in bf16 (issue 24's yardstick); ``--peer
1role`` the op's kernel with one consumer role (``AttentionConfig.one_consumer_role``, ``--block-n U``).
"""

from __future__ import annotations

import argparse
import sys

import torch


def peer(name: str):
    """fn(q, k, v, causal) on (B, S, H, D) tensors."""
    if name == "bf16":
        from fa4_mlir.torch import flash_attention

        return lambda q, k, v, causal: flash_attention(q, k, v, causal=causal)
    if name == "cudnn":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def run(q, k, v, causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                out = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)),
                                                                       is_causal=causal)
            return out.transpose(1, 2)
        return run
    from flash_attn.cute import flash_attn_func  # FlashAttention-4

    def run(q, k, v, causal):
        out = flash_attn_func(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out
    return run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--peer", choices=("cudnn", "fa4", "bf16", "1role"), default="cudnn")
    p.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16", help="the op's inputs (default bf16)")
    p.add_argument("--causal", action="store_true")
    p.add_argument("shape", nargs=4, type=int, metavar=("D", "B", "S", "H"))
    args = p.parse_args(argv)
    from fa4_mlir.torch import flash_attention

    d, b, s, h = args.shape
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if args.peer == "1role":  # the op's kernel for the shape with one consumer role (bench/attention.py --block-n U)
        from attention import Tile, variant

        one = variant(d, args.causal, Tile(one_role=True, op=True), "bf16", s)
        if one is None:
            raise SystemExit(f"no one-consumer-role variant of the op's kernel at D{d} S{s} causal={args.causal}")

        def theirs(q, k, v, causal):
            return one(q, k, v)
    else:
        theirs = peer(args.peer)
    if args.dtype == "fp8":
        from attention import _quantize  # bench/attention.py's (this script's folder)

        (q8, qs), (k8, ks), (v8, vs) = ((x, float(scale)) for x, scale in (_quantize(t) for t in (q, k, v)))

        def run():
            return flash_attention(q8, k8, v8, causal=args.causal, q_scale=qs, k_scale=ks, v_scale=vs)
    else:
        def run():
            return flash_attention(q, k, v, causal=args.causal)
    for _ in range(2):
        ours = run()
        ref = theirs(q, k, v, args.causal)
    torch.cuda.synchronize()
    print(f"relative difference {float((ours.float() - ref.float()).norm() / ref.float().norm()):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
