"""fa4 mla_attention (absorbed MLA, sm_90a) against torch SDPA on the same attention, in one run.

    FA4_CACHE_DIR=.fa4-cache python bench/mla.py [--batches 32,128] [--seqlens 1024,4096,8192] [--heads 128]
        [--prefill 1x4096x16,2x1024x128] [--prefill-form 1x4096x16,4x2048x16] [--repeats 200] [--json out.json]
        [--sweep]

Decode: Sq = 1, H query heads over one latent head (DeepSeek-V3: H = 128 per GPU without tensor
parallelism), B caches of Sk keys; prefill-like: ``BxSxH`` with Sq = Sk = S, causal. For each case the
median time (triton.testing.do_bench, CUDA events) of ``fa4_mlir.torch.mla_attention`` and of torch
SDPA forced to the cuDNN, memory-efficient, flash and math backends on *expanded heads*: q = [q_nope |
q_rope] (B, H, Sq, 576), K = [kv_latent | k_rope] and V = kv_latent repeated for every head (stride-0
views; a backend that needs them materialised copies 1152 + 1024 bytes per key and head, which the
math backend is skipped for past --max-expanded-gb). Decode cases (Sq = 1: no mask) also time SDPA with
the heads *folded* into the query rows (one head of H * Sq queries against the one K/V head: the same
attention with no copy), the fairest plain-torch baseline.

``--prefill-form BxSxH`` cases time the prefill form's kernel (q/k 192 = 128 nope + 64 rope, v 128, MHA,
causal; ``fa4_mlir.torch.mla.launch_prefill``) against SDPA on the concatenated q and k (cuDNN, flash,
memory-efficient), 2 * (192 + 128) FLOPs per visible (query, key, head).

TFLOP/s counts the useful work, 2 * (576 + 512) FLOPs per visible (query, key, head); GB/s counts the
latent cache read once (B * Sk * 576 * 2 bytes), the decode kernel's floor. Each case is checked
against the SDPA results first (relative error < 2e-2). Where the op splits the keys over more CTAs
(split KV: decode grids of B * H / 64 CTAs short of the SMs), ``no-split`` times the kernel without
it. ``--sweep`` also times the kernel's other (block_n, stages) tiles (artifacts:
``test/gpu/build_artifacts.py --bench``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

import torch
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

from fa4_mlir import runtime
from fa4_mlir.configs.mla import MLAConfig
from fa4_mlir.torch import mla_attention
from fa4_mlir.torch.mla import launch, launch_prefill, sm_count, split_count, tile_heads

SCALE = 576 ** -0.5
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}
SWEEP = ((32, 2), (32, 3), (16, 4), (16, 8))  # (block_n, stages) beside the default (32, 4): build_artifacts.MLA_SWEEP


def _sdpa(backend, q, k, v, causal: bool):
    with sdpa_kernel(backend):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SCALE)


def variant(h: int, causal: bool, block_n: int, stages: int, splits: int = 1):
    """fn(q_nope, q_rope, kv, k_rope) running the bf16 kernel with another tile (over ``splits`` key
    ranges when more than 1)."""
    config = MLAConfig(causal=causal, tile_heads=tile_heads(h), block_n=block_n, stages=stages, split_kv=splits > 1)
    kernel = runtime.load("mla-attention", config)

    def run(q_nope, q_rope, kv, k_rope):
        out = torch.empty_like(q_nope)
        launch(config, kernel, q_nope, q_rope, kv, k_rope, out, None, SCALE, splits=splits)
        return out
    return run


def visible_pairs(sq: int, sk: int, causal: bool) -> int:
    """(query, key) pairs the mask leaves: all, or key j <= query i (the top-left diagonal)."""
    if not causal:
        return sq * sk
    return sum(min(i + 1, sk) for i in range(sq))


def measure(b: int, sq: int, sk: int, h: int, causal: bool, repeats: int, max_expanded_gb: float,
            sweep: bool) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(b * sk + sq)
    q_nope = torch.randn(b, sq, h, 512, device="cuda", generator=gen).bfloat16()
    q_rope = torch.randn(b, sq, h, 64, device="cuda", generator=gen).bfloat16()
    kv = torch.randn(b, sk, 512, device="cuda", generator=gen).bfloat16()
    k_rope = torch.randn(b, sk, 64, device="cuda", generator=gen).bfloat16()
    ours = mla_attention(q_nope, q_rope, kv, k_rope, causal=causal)
    cases = {"fa4-mlir": lambda: mla_attention(q_nope, q_rope, kv, k_rope, causal=causal)}
    notes, results = {}, {}
    # expanded heads: (B, H, S, D) views, the K/V head repeated by stride 0
    q = torch.cat([q_nope, q_rope], dim=-1).transpose(1, 2)
    k1 = torch.cat([kv, k_rope], dim=-1)[:, None]  # (B, 1, Sk, 576)
    k, v = k1.expand(b, h, sk, 576), kv[:, None].expand(b, h, sk, 512)
    expanded_gb = b * h * sk * (576 + 512) * 2 / 1e9
    for name, backend in BACKENDS.items():
        if name == "math" and expanded_gb > max_expanded_gb:
            notes[name] = f"skipped: expanded K/V would be {expanded_gb:.0f} GB"
            continue
        try:
            results[name] = _sdpa(backend, q, k, v, causal).transpose(1, 2)
            cases[name] = (lambda backend=backend: _sdpa(backend, q, k, v, causal))
        except Exception as exc:  # a backend that refuses the shape (cuDNN and flash: head dim 576)
            notes[name] = f"unavailable: {type(exc).__name__}: {exc}"[:160]
    if sq == 1 and not causal:  # heads folded into the query rows: one head of H queries
        qf = q.reshape(b, 1, h * sq, 576)
        for name in ("efficient", "math"):
            try:
                results[f"{name}-folded"] = _sdpa(BACKENDS[name], qf, k1, kv[:, None], False).reshape(b, h, sq, 512) \
                    .transpose(1, 2)
                cases[f"{name}-folded"] = (lambda backend=BACKENDS[name]: _sdpa(backend, qf, k1, kv[:, None], False))
            except Exception as exc:
                notes[f"{name}-folded"] = f"unavailable: {type(exc).__name__}: {exc}"[:160]
    splits = split_count(b, sq, sk, h, causal, sm_count(torch.cuda.current_device()))
    if splits > 1:
        fn = variant(h, causal, 0, 0)
        results["no-split"] = fn(q_nope, q_rope, kv, k_rope)
        cases["no-split"] = (lambda fn=fn: fn(q_nope, q_rope, kv, k_rope))
    if sweep:
        for bn, st in SWEEP:
            fn = variant(h, causal, bn, st, splits)
            results[f"bn{bn}x{st}"] = fn(q_nope, q_rope, kv, k_rope)
            cases[f"bn{bn}x{st}"] = (lambda fn=fn: fn(q_nope, q_rope, kv, k_rope))
    errors = {n: float((ours.float() - r.float()).norm() / r.float().norm()) for n, r in results.items()}
    if torch.isnan(ours).any() or any(e > 2e-2 for e in errors.values()) or not errors:
        raise SystemExit(f"fa4 mla_attention disagrees at B{b} Sq{sq} Sk{sk} H{h} causal={causal}: {errors} {notes}")
    del results
    ms = {n: triton.testing.do_bench(fn, warmup=25, rep=repeats, return_mode="median") for n, fn in cases.items()}
    flops = 2 * (576 + 512) * b * h * visible_pairs(sq, sk, causal)
    kv_bytes = b * sk * 576 * 2
    return {"batch": b, "seq_q": sq, "seq_k": sk, "heads": h, "causal": causal, "splits": splits, "ms": ms,
            "tflops": {n: flops / (t * 1e-3) / 1e12 for n, t in ms.items()},
            "kv_gbps": {n: kv_bytes / (t * 1e-3) / 1e9 for n, t in ms.items()}, "rel_err": errors, "notes": notes}


def measure_prefill_form(b: int, s: int, h: int, repeats: int) -> dict:
    """The prefill form (causal, MHA) against SDPA on [q_nope | q_rope], [k_nope | k_rope], v."""
    gen = torch.Generator(device="cuda").manual_seed(s + h)
    q_nope, k_nope, v = (torch.randn(b, s, h, 128, device="cuda", generator=gen).bfloat16() for _ in range(3))
    q_rope, k_rope = (torch.randn(b, s, h, 64, device="cuda", generator=gen).bfloat16() for _ in range(2))
    scale = 192 ** -0.5
    config = MLAConfig(form="prefill", causal=True)
    kernel = runtime.load("mla-attention", config)
    ours = torch.empty_like(v)

    def run():
        launch_prefill(config, kernel, q_nope, q_rope, k_nope, k_rope, v, ours, None, scale)
        return ours

    run()
    q, k = (torch.cat(pair, dim=-1).transpose(1, 2) for pair in ((q_nope, q_rope), (k_nope, k_rope)))
    vt = v.transpose(1, 2)
    cases, notes, errors = {"fa4-mlir": run}, {}, {}
    for name in ("cudnn", "flash", "efficient"):
        backend = BACKENDS[name]

        def sdpa(backend=backend):
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(q, k, vt, is_causal=True, scale=scale)
        try:
            theirs = sdpa().transpose(1, 2)
            errors[name] = float((ours.float() - theirs.float()).norm() / theirs.float().norm())
            cases[name] = sdpa
        except Exception as exc:
            notes[name] = f"unavailable: {type(exc).__name__}: {exc}"[:160]
    if torch.isnan(ours).any() or any(e > 2e-2 for e in errors.values()) or not errors:
        raise SystemExit(f"the prefill form disagrees at B{b} S{s} H{h}: {errors} {notes}")
    ms = {n: triton.testing.do_bench(fn, warmup=25, rep=repeats, return_mode="median") for n, fn in cases.items()}
    flops = 2 * (192 + 128) * b * h * visible_pairs(s, s, True)
    return {"form": "prefill", "batch": b, "seq_q": s, "seq_k": s, "heads": h, "causal": True, "ms": ms,
            "tflops": {n: flops / (t * 1e-3) / 1e12 for n, t in ms.items()}, "rel_err": errors, "notes": notes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="32,128", help="decode batch sizes")
    parser.add_argument("--seqlens", default="1024,4096,8192", help="decode cache lengths Sk")
    parser.add_argument("--heads", type=int, default=128, help="decode query heads")
    parser.add_argument("--prefill", default="1x4096x16,2x1024x128", help="prefill-like BxSxH cases (causal); "
                                                                         "empty for none")
    parser.add_argument("--prefill-form", default="1x4096x16,4x2048x16",
                        help="prefill-form BxSxH cases (q/k 192, v 128, causal); empty for none")
    parser.add_argument("--repeats", type=int, default=200, help="ms of timed runs per case (do_bench rep)")
    parser.add_argument("--max-expanded-gb", type=float, default=16.0,
                        help="skip SDPA math past this much expanded K/V (it materialises them)")
    parser.add_argument("--sweep", action="store_true", help="also time the other (block_n, stages) tiles")
    parser.add_argument("--json")
    args = parser.parse_args()
    shapes = [(b, 1, s, args.heads, False) for b in map(int, args.batches.split(",")) for s in
              map(int, args.seqlens.split(","))]
    for case in filter(None, args.prefill.split(",")):
        b, s, h = map(int, case.lower().split("x"))
        shapes.append((b, s, s, h, True))
    rows = []
    for shape in shapes:
        rows.append(measure(*shape, args.repeats, args.max_expanded_gb, args.sweep))
        torch.cuda.empty_cache()
    names = [n for n in ("fa4-mlir", "no-split", "cudnn", "efficient", "flash", "math", "efficient-folded", "math-folded",
                         *(f"bn{b}x{s}" for b, s in SWEEP)) if any(n in r["tflops"] for r in rows)]
    print(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | {datetime.date.today()} | "
          f"{' '.join(sys.argv)}")
    print("| B | Sq | Sk | H | causal | splits | " + " | ".join(f"{n} TFLOP/s (KV GB/s)" for n in names)
          + " | " + " | ".join(f"fa4-mlir / {n}" for n in names[1:]) + " |")
    print("|---" * (2 * len(names) + 5) + "|")
    for r in rows:
        t, g = r["tflops"], r["kv_gbps"]
        cells = [f"{t[n]:.0f} ({g[n]:.0f})" if n in t else "-" for n in names]
        ratio = [f"{t['fa4-mlir'] / t[n]:.2f}" if n in t else "-" for n in names[1:]]
        print(f"| {r['batch']} | {r['seq_q']} | {r['seq_k']} | {r['heads']} | {'yes' if r['causal'] else 'no'} | "
              f"{r['splits']} | "
              + " | ".join(cells) + " | " + " | ".join(ratio) + " |")
    forms = [measure_prefill_form(*map(int, case.lower().split("x")), args.repeats)
             for case in filter(None, args.prefill_form.split(","))]
    if forms:
        print("\n| prefill form B | S | H | " + " | ".join(f"{n} TFLOP/s" for n in ("fa4-mlir", "cudnn", "flash",
                                                                                    "efficient"))
              + " | fa4-mlir / cudnn |\n" + "|---" * 8 + "|")
        for r in forms:
            t = r["tflops"]
            ratio = f"{t['fa4-mlir'] / t['cudnn']:.2f}" if "cudnn" in t else "-"
            print(f"| {r['batch']} | {r['seq_q']} | {r['heads']} | "
                  + " | ".join(f"{t[n]:.0f}" if n in t else "-" for n in ("fa4-mlir", "cudnn", "flash", "efficient"))
                  + f" | {ratio} |")
    rows += forms
    for r in rows:
        for n, note in r["notes"].items():
            print(f"# B{r['batch']} Sq{r['seq_q']} Sk{r['seq_k']} H{r['heads']}: {n} {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
