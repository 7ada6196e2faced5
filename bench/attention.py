"""fa4 flash_attention against torch SDPA (cuDNN and flash backends) and FlashAttention-4, in one run.

    FA4_CACHE_DIR=.fa4-cache python bench/attention.py [--head-dims 64,128,256,512] [--seqlens 1024,4096,16384]
        [--causal both|yes|no] [--repeats 200] [--json out.json] [--block-n 128,176,3x128]
        [--shapes fa3,gqa,short] [--dtype bf16|fp16|fp8]

Row sets (``--shapes``): ``fa3``, FA3's shapes: B * S = 16384 tokens, H * D = 2048, MHA, for each head dim
and seqlen; ``gqa``: 64 query heads over 8 K/V heads, d128, S 8k and 16k (B * S = 16k); ``short``: B32
S512 d128 H16. For each row and mask: the median time (triton.testing.do_bench, CUDA events) of
``fa4_mlir.torch.flash_attention``, torch SDPA forced to the cuDNN backend, torch SDPA forced to the flash
backend (FA2) and, when ``flash_attn.cute`` is installed (``../shared/tools/peers/fetch.sh``),
FlashAttention-4; past head dim 256 (the flash backend refuses it, cuDNN may), also SDPA forced to the
memory-efficient and the math backends, what a user runs there. SDPA gets GQA's K/V expanded to every
query head. TFLOP/s = 4 * B * H * S^2 * D (halved when causal) / time, and the ratios fa4 / FA4, fa4 /
cuDNN, fa4 / flash (and fa4 / efficient, fa4 / math) from the same run. Each case is checked against
SDPA first. ``--dtype fp16`` runs the same in fp16.
``--block-n`` also times the sm_90a kernel with other tiles, each ``BN`` (keys per K/V tile,
``AttentionConfig.block_n``) or ``NQxBN`` (``num_q`` consumer warpgroups of 64 rows; BN 0: the default),
either prefixed ``P`` for the persistent kernel (``AttentionConfig.persistent``; ``P`` alone: the default
tile) or ``H`` for the causal tiles in each head's order (``AttentionConfig.causal_order="heads"``, the
order before the sections; ``H`` alone: the default tile, causal rows only), and suffixed ``sN`` for N K and V
stages (``AttentionConfig.kv_stages``) or ``L`` for one K/V loop (``AttentionConfig.single_kv_loop``); their
artifacts come from ``test/gpu/build_artifacts.py --bench``. With ``--dtype fp8``,
``--exp2-emulation 0,8,8h`` times those ``AttentionConfig.exp2_emulation`` counts (columns ``fp8_ex<n>``; ``h``:
with ``exp2_f16x2``, the packed f16 polynomial).

``--dtype fp8`` times our kernel in fp8 e4m3 against the same kernel in bf16 on the same inputs (quantized
with one scale per tensor: amax / 448), the fp8 op as a user calls it (V^T made by the op included), the
V^T copy alone, with ``--token-scales`` also the per-token scale kernel (a scale per row of Q and K), and
torch SDPA on float8 inputs under the cuDNN backend when this torch takes it (else the error is printed).
fp8 TFLOP/s count the same FLOPs as bf16.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from typing import NamedTuple

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from fa4_mlir import runtime
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.attention_op import default_exp2, default_num_q, op_fields
from fa4_mlir.torch import flash_attention
from fa4_mlir.torch.attention import launch

TOKENS, WIDTH = 16384, 2048


def peers(d: int):
    """Name -> fn(q, k, v, causal) over (B, S, H, D) tensors, for what this machine has at head dim ``d``."""
    def sdpa(backend):
        def run(q, k, v, causal):
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run, True  # takes (B, H, S, D)

    out = {"cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "flash": sdpa(SDPBackend.FLASH_ATTENTION)}
    if d > 256:  # FA2 stops at 256: the fallbacks SDPA would pick
        out.update(efficient=sdpa(SDPBackend.EFFICIENT_ATTENTION), math=sdpa(SDPBackend.MATH))
    try:
        from flash_attn.cute import flash_attn_func  # FlashAttention-4 (CuTe DSL)

        out["fa4_cute"] = (lambda q, k, v, causal: flash_attn_func(q, k, v, causal=causal)), False
    except Exception:  # not installed
        pass
    return out


ORDERS = {"H": "heads"}  # --block-n prefixes: AttentionConfig.causal_order


class Tile(NamedTuple):
    """A ``--block-n`` entry: the sm_90a kernel's ``AttentionConfig`` fields it sets."""
    num_q: int = 2
    block_n: int = 0
    persistent: bool = False
    order: str = ""  # causal_order, "" for the default
    kv_stages: int = 0
    single_kv_loop: bool = False
    one_role: bool = False  # AttentionConfig.one_consumer_role
    op: bool = False  # the op's tile for the row (``op_fields``), the entry "U"

    @property
    def name(self) -> str:
        if self.op:
            return "op1role"
        return ("p" if self.persistent else self.order[:1]) \
            + (f"bn{self.block_n}" if self.num_q == 2 else f"q{self.num_q}bn{self.block_n}") \
            + (f"s{self.kv_stages}" if self.kv_stages else "") + ("L" if self.single_kv_loop else "") \
            + ("U" if self.one_role else "")

    def fields_for(self, dtype: str, d: int, causal: bool, seq: int) -> dict:
        """The ``AttentionConfig`` fields of a row's variant: the op's for the row with one consumer role (the
        entry "U"), else this tile's."""
        if self.op:
            fields = {k: v for k, v in op_fields("sm_90a", dtype, d, causal, seq).items() if not k.startswith("exp2")}
            return {**fields, "one_consumer_role": True}
        return self.fields

    @property
    def fields(self) -> dict:
        return dict(num_q=self.num_q, block_n=self.block_n, persistent=self.persistent, kv_stages=self.kv_stages,
                    single_kv_loop=self.single_kv_loop, **({"causal_order": self.order} if self.order else {}),
                    **({"one_consumer_role": True} if self.one_role else {}))


def parse_tiles(text: str) -> list[Tile]:
    """``--block-n`` entries: ``BN`` (keys per tile, two consumer warpgroups), ``NQxBN`` (``num_q``
    consumer warpgroups of 64 rows; BN 0: the head dim's default), either prefixed with ``P`` for the
    persistent kernel or with ``H`` for a causal order (``ORDERS``; alone: the default tile), optionally
    suffixed ``sN`` for N K and V stages each (``AttentionConfig.kv_stages``) and ``L`` for one K/V loop
    (``AttentionConfig.single_kv_loop``), then ``U`` for one consumer role (``AttentionConfig.one_consumer_role``);
    ``U`` alone: the op's tile for each row with one consumer role."""
    tiles = []
    for entry in filter(None, text.split(",")):
        if entry == "U":
            tiles.append(Tile(one_role=True, op=True))
            continue
        one_role = entry.endswith("U")
        entry = entry.removesuffix("U")
        single = entry.endswith("L")
        entry, _, stages = entry.removesuffix("L").partition("s")
        persistent, order = entry.startswith("P"), ORDERS.get(entry[:1], "")
        nq, _, bn = entry.lstrip("P" + "".join(ORDERS)).rpartition("x")
        tiles.append(Tile(int(nq or 2), int(bn or 0), persistent, order, int(stages or 0), single, one_role))
    return tiles


def load_variant(**fields):
    """(config, kernel) of the sm_90a attention with these ``AttentionConfig`` fields; None (and a line
    saying why) where that is not a config or its artifact was not built (``build_artifacts.py --bench``)."""
    from fa4_mlir.errors import ArtifactError, ConfigError

    try:
        config = AttentionConfig(target="sm_90a", **fields)
        config.validate()
        return config, runtime.load("attention", config)
    except (ConfigError, ArtifactError) as exc:
        print(f"  variant {fields}: {exc}"[:200])
        return None


def variant(d: int, causal: bool, tile: Tile, dtype: str = "bf16", seq: int = 0):
    """fn(q, k, v) running the 16-bit kernel with ``tile`` (``parse_tiles``) at ``seq`` keys; None where
    ``load_variant`` finds none."""
    found = load_variant(dtype=dtype, head_dim=d, causal=causal, **tile.fields_for(dtype, d, causal, seq)) \
        if causal or not tile.order else None  # a causal order is a causal kernel's
    if found is None:
        return None
    config, kernel = found

    def run(q, k, v):
        out = torch.empty_like(q)
        launch(config, kernel, q, k, v, out, None, d ** -0.5)
        return out
    return run


def shape_rows(kind: str, head_dims: list[int], seqlens: list[int]) -> list[tuple[int, int, int, int, int]]:
    """(head dim, seqlen, batch, heads, kv heads) of a row set: ``fa3`` (B * S = 16k tokens, H * D = 2048,
    MHA), ``gqa`` (64 query heads over 8 K/V heads, d128, S 8k and 16k, B * S = 16k), ``short`` (B32 S512,
    d128, H16)."""
    if kind == "gqa":
        return [(128, s, TOKENS // s, 64, 8) for s in (8192, 16384)]
    if kind == "short":
        return [(128, 512, 32, 16, 16)]
    return [(d, s, TOKENS // s, WIDTH // d, WIDTH // d) for d in head_dims for s in seqlens]


def median_ms(fn, repeats: int) -> float:
    """``fn``'s median time in ms (``triton.testing.do_bench``, CUDA events; triton imported here, so the
    argument checks run without it)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=50, rep=repeats, return_mode="median")


def timed(cases: dict, repeats: int, rounds: int = 1) -> dict[str, float]:
    """Name -> median ms of each case (do_bench), over ``rounds`` rounds that time every case in turn (the
    median of the rounds' medians): a drift of the clocks over a row meets every case alike."""
    runs = [{name: median_ms(fn, repeats) for name, fn in cases.items()} for _ in range(max(1, rounds))]
    return {name: statistics.median(run[name] for run in runs) for name in cases}


def measure(d: int, s: int, causal: bool, repeats: int, tiles=(), b: int = 0, h: int = 0, hk: int = 0,
            dtype: str = "bf16", rounds: int = 1) -> dict:
    b, h = b or TOKENS // s, h or WIDTH // d
    hk = hk or h
    tdt = torch.float16 if dtype == "fp16" else torch.bfloat16
    q = torch.randn(b, s, h, d, device="cuda").to(tdt)
    k, v = (torch.randn(b, s, hk, d, device="cuda").to(tdt) for _ in range(2))
    # SDPA's backends get K/V expanded to every query head (the work is the same; GQA only saves reads)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, *(x.repeat_interleave(h // hk, dim=2) for x in (k, v))))
    ours = flash_attention(q, k, v, causal=causal)
    cases = {"fa4-mlir": lambda: flash_attention(q, k, v, causal=causal)}
    errors = {}
    for name, (fn, bhsd) in peers(d).items():
        args = (qt, kt, vt) if bhsd else (q, k, v)
        try:
            theirs = fn(*args, causal)
            theirs = theirs[0] if isinstance(theirs, tuple) else theirs
            theirs = theirs.transpose(1, 2) if bhsd else theirs
            errors[name] = float((ours.float() - theirs.float()).norm() / theirs.float().norm())
            cases[name] = (lambda fn=fn, args=args: fn(*args, causal))
        except Exception as exc:  # a backend that refuses the shape
            print(f"  {name} unavailable at D{d} S{s} causal={causal}: {type(exc).__name__}: {exc}"[:200])
    for tile in tiles:  # other tiles of the kernel (GQA too: the group is a launch argument)
        fn = variant(d, causal, tile, dtype, s)
        if fn is not None:
            name = tile.name
            errors[name] = float((fn(q, k, v).float() - ours.float()).norm() / ours.float().norm())
            cases[name] = (lambda fn=fn: fn(q, k, v))
    if torch.isnan(ours).any() or any(e > 2e-2 for e in errors.values()):
        raise SystemExit(f"fa4 flash_attention disagrees at D{d} S{s} causal={causal}: {errors}")
    ms = timed(cases, repeats, rounds)
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    return {"head_dim": d, "seqlen": s, "batch": b, "heads": h, "kv_heads": hk, "causal": causal, "dtype": dtype,
            "ms": ms, "tflops": {n: flops / (t * 1e-3) / 1e12 for n, t in ms.items()}, "rel_err": errors}


def _quantize(t: torch.Tensor, dim=None):
    """``t`` as e4m3 with its scale (amax / 448: one for the tensor, or per token over ``dim``)."""
    amax = t.abs().amax() if dim is None else t.abs().amax(dim=dim)
    scale = (amax.float() / 448).clamp(min=1e-12)
    div = scale if dim is None else scale.unsqueeze(-1)
    return (t.float() / div).to(torch.float8_e4m3fn), scale


def fp8_variant(d: int, causal: bool, tile: Tile, softmax_scale: float, v_scale: float,
                exp2_emulation: int = -1, exp2_f16x2: bool = False, seq: int = 0):
    """fn(q8, k8, v8) running the fp8 kernel (tensor-wise scales) with ``tile`` (``parse_tiles``) and
    ``exp2_emulation`` exponentials per 32 by polynomial (-1: the op's default; ``exp2_f16x2``: the packed
    f16 form), V^T made per call as the op does; None where ``load_variant`` finds none."""
    from fa4_mlir.torch.attention import Fp8Scales

    exp2 = default_exp2("sm_90a", "fp8_e4m3", d) if exp2_emulation < 0 else \
        dict(exp2_emulation=exp2_emulation, exp2_f16x2=exp2_f16x2)
    fields = dict(dtype="fp8_e4m3", head_dim=d, causal=causal, **exp2, **tile.fields_for("fp8_e4m3", d, causal, seq))
    found = load_variant(**fields) if causal or not tile.order else None  # a causal order is a causal kernel's
    if found is None:
        return None
    config, kernel = found

    def run(q, k, v):
        out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
        launch(config, kernel, q, k, v, out, None, softmax_scale, scales=Fp8Scales(v_scale))
        return out
    return run


def measure_fp8(d: int, s: int, causal: bool, repeats: int, token_scales: bool, tiles=(), emulations=()) -> dict:
    """fp8 against bf16, our kernel both times (see the module docstring)."""
    from fa4_mlir.torch.attention import v_transposed

    b, h = TOKENS // s, WIDTH // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda").bfloat16() for _ in range(3))
    (q8, qs), (k8, ks), (v8, vs) = (_quantize(t) for t in (q, k, v))
    qs, ks, vs = float(qs), float(ks), float(vs)
    ref = flash_attention(q, k, v, causal=causal)
    cases = {"bf16": lambda: flash_attention(q, k, v, causal=causal),
             "fp8": lambda: flash_attention(q8, k8, v8, causal=causal, q_scale=qs, k_scale=ks, v_scale=vs),
             "v_transpose": lambda: v_transposed(v8, AttentionConfig(target="sm_90a", dtype="fp8_e4m3",
                                                                      head_dim=d).hopper.sum_rows)}
    outs = {"fp8": cases["fp8"]()}
    if token_scales:  # per-token scales: amax over D of each (batch, position, head), as (B, H, S)
        (qt8, qts), (kt8, kts) = _quantize(q, dim=-1), _quantize(k, dim=-1)
        qts, kts = qts.permute(0, 2, 1).contiguous(), kts.permute(0, 2, 1).contiguous()
        cases["fp8_tokens"] = lambda: flash_attention(qt8, kt8, v8, causal=causal, q_scale=qts, k_scale=kts,
                                                      v_scale=vs)
        outs["fp8_tokens"] = cases["fp8_tokens"]()
    for tile in tiles:  # fp8 tiles other than the head dim's default
        fn = fp8_variant(d, causal, tile, qs * ks / d ** 0.5, vs, seq=s)
        if fn is not None:
            cases["fp8_" + tile.name] = (lambda fn=fn: fn(q8, k8, v8))
            outs["fp8_" + tile.name] = fn(q8, k8, v8)
    for e in emulations:  # exp2 emulation counts (the head dim's default tile), "h": the packed f16 form
        fn = fp8_variant(d, causal, Tile(default_num_q("sm_90a", "fp8_e4m3", d, causal)), qs * ks / d ** 0.5,
                         vs, int(e.removesuffix("h")), e.endswith("h"))
        if fn is not None:
            cases[f"fp8_ex{e}"] = (lambda fn=fn: fn(q8, k8, v8))
            outs[f"fp8_ex{e}"] = fn(q8, k8, v8)
    errors = {n: float((o.float() - ref.float()).norm() / ref.float().norm()) for n, o in outs.items()}
    try:  # cuDNN fp8 SDPA, if this torch has one: fp8 (B, H, S, D) inputs
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            args = [t.transpose(1, 2) for t in (q8, k8, v8)]
            theirs = torch.nn.functional.scaled_dot_product_attention(*args, is_causal=causal, scale=qs * ks / d ** 0.5)
        errors["cudnn_fp8"] = float((theirs.transpose(1, 2).float() * vs - ref.float()).norm() / ref.float().norm())
        cases["cudnn_fp8"] = lambda: torch.nn.functional.scaled_dot_product_attention(
            *args, is_causal=causal, scale=qs * ks / d ** 0.5)
    except Exception as exc:
        print(f"  cudnn fp8 SDPA unavailable at D{d} S{s} causal={causal}: {type(exc).__name__}: {exc}"[:300])
    if any(errors[n] > 0.08 for n in outs) or any(torch.isnan(o).any() for o in outs.values()):
        print(f"  WARNING: fa4 fp8 flash_attention disagrees with bf16 at D{d} S{s} causal={causal}: {errors}")
    ms = {}
    for name, fn in cases.items():
        if name == "cudnn_fp8":
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                ms[name] = median_ms(fn, repeats)
        else:
            ms[name] = median_ms(fn, repeats)
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    return {"head_dim": d, "seqlen": s, "batch": b, "heads": h, "causal": causal, "ms": ms,
            "tflops": {n: flops / (t * 1e-3) / 1e12 for n, t in ms.items() if n != "v_transpose"},
            "rel_err_vs_bf16": errors}


def print_fp8(rows: list[dict], tiles=(), emulations=()) -> None:
    names = [n for n in ("bf16", "fp8", "fp8_tokens", "cudnn_fp8", *("fp8_" + t.name for t in tiles),
                         *(f"fp8_ex{e}" for e in emulations))
             if any(n in r["tflops"] for r in rows)]
    print("| D | S | causal | " + " | ".join(f"{n} TFLOP/s" for n in names) + " | fp8 / bf16 | "
          + ("fp8_tokens / bf16 | " if "fp8_tokens" in names else "") + "V^T ms (in fp8) |")
    print("|---" * (len(names) + 5 + ("fp8_tokens" in names)) + "|")
    for r in rows:
        t = r["tflops"]
        ratios = [f"{t['fp8'] / t['bf16']:.2f}"] + ([f"{t['fp8_tokens'] / t['bf16']:.2f}"]
                                                      if "fp8_tokens" in names else [])
        print(f"| {r['head_dim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | "
              + " | ".join(f"{t[n]:.0f}" if n in t else "-" for n in names) + " | " + " | ".join(ratios)
              + f" | {r['ms']['v_transpose']:.3f} of {r['ms']['fp8']:.3f} |")


def print_rows(rows: list[dict], tiles=()) -> None:
    names = [n for n in ("fa4-mlir", "cudnn", "flash", "fa4_cute", "efficient", "math", *(t.name for t in tiles))
             if any(n in r["tflops"] for r in rows)]
    versus = [n for n in ("fa4_cute", "cudnn", "flash", "efficient", "math") if n in names]
    variants = [t.name for t in tiles if t.name in names]  # each against the op's kernel of the row
    print("| dtype | D | B | S | H/Hkv | causal | " + " | ".join(f"{n} TFLOP/s" for n in names) + " | "
          + " | ".join([f"fa4-mlir / {n}" for n in versus] + [f"{n} / fa4-mlir" for n in variants]) + " |")
    print("|---" * (len(names) + len(versus) + len(variants) + 6) + "|")
    for r in rows:
        t = r["tflops"]
        ratio = [f"{t['fa4-mlir'] / t[n]:.2f}" if n in t else "-" for n in versus] \
            + [f"{t[n] / t['fa4-mlir']:.2f}" if n in t else "-" for n in variants]
        print(f"| {r['dtype']} | {r['head_dim']} | {r['batch']} | {r['seqlen']} | {r['heads']}/{r['kv_heads']} | "
              f"{'yes' if r['causal'] else 'no'} | " + " | ".join(f"{t[n]:.0f}" if n in t else "-" for n in names)
              + " | " + " | ".join(ratio) + " |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dims", "--head-dim", default="64,128,256", help="comma-separated (512: sm_90a)")
    parser.add_argument("--seqlens", default="1024,4096,16384")
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--repeats", type=int, default=200, help="ms of timed runs per case (do_bench rep)")
    parser.add_argument("--rounds", type=int, default=1, help="16-bit rows: time the row's cases in turn this many "
                                                              "times, the median of the rounds")
    parser.add_argument("--json")
    parser.add_argument("--block-n", default="",
                        help="also time these sm_90a tiles: BN (keys per tile) or NQxBN (num_q consumer warpgroups, "
                             "0: the default keys), either prefixed P (persistent) or H (causal, each head's order), "
                             "suffixed sN (N K/V stages) or L (one K/V loop), then U (one consumer role); U alone: the "
                             "op's tile of each row with one consumer role, "
                             "comma-separated")
    parser.add_argument("--shapes", default="fa3", help="row sets, comma-separated: fa3 (--head-dims x --seqlens), "
                                                        "gqa (64/8 heads, d128, 8k and 16k), short (B32 S512 d128)")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp8"), default="bf16",
                        help="bf16, fp16 (both against the peers) or fp8: our fp8 e4m3 kernel against our bf16 one "
                             "(and cuDNN fp8 SDPA when present)")
    parser.add_argument("--token-scales", action="store_true", help="fp8: also per-token Q and K scales")
    parser.add_argument("--exp2-emulation", default="",
                        help="fp8: also time these exp2_emulation counts (exponentials per 32 by polynomial; "
                             "suffix h: the packed f16 form, AttentionConfig.exp2_f16x2)")
    args = parser.parse_args(argv)
    emulations = [x for x in args.exp2_emulation.split(",") if x]
    if not all(x.removesuffix("h").isdigit() for x in emulations):
        parser.error(f"--exp2-emulation must be counts, each optionally suffixed h, got {args.exp2_emulation!r}")
    tiles = parse_tiles(args.block_n)
    masks = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    head_dims, seqlens = list(map(int, args.head_dims.split(","))), list(map(int, args.seqlens.split(",")))
    print(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | {datetime.date.today()} | "
          f"{' '.join(sys.argv)}")
    if args.dtype == "fp8":
        rows = [measure_fp8(d, s, c, args.repeats, args.token_scales, tiles, emulations) for c in masks
                for d in head_dims for s in seqlens]
        print_fp8(rows, tiles, emulations)
    else:
        shapes = [row for kind in args.shapes.split(",") for row in shape_rows(kind, head_dims, seqlens)]
        rows = [measure(d, s, c, args.repeats, tiles, b, h, hk, args.dtype, args.rounds) for c in masks
                for d, s, b, h, hk in shapes]
        print_rows(rows, tiles)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
