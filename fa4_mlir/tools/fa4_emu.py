"""fa4-emu: run a built-in kernel in the PTX emulator on random inputs and check it against NumPy.

    fa4-emu copy-pipeline                              # 256x128 bf16, scale 1.5, on sm_90a
    fa4-emu gemm --shape 256x256x512                   # D = alpha A @ B + beta C (the residual)
    fa4-emu gemm --b-major mn --dtype fp16 --json
    fa4-emu attention --head-dim 64 --causal --shape 1x128x256x1
    fa4-emu attention --group 4 --shape 1x128x200x4    # GQA: 4 query heads on one K/V head
    fa4-emu attention --dtype fp8_e4m3 --shape 1x70x300x2   # fp8 e4m3 in, bf16 out (tensor-wise scales)
    fa4-emu mla-attention --tile-heads 16 --shape 2x1x300x16  # MLA decode, absorbed (576 / 512)
    fa4-emu attention-combine --head-dim 512 --shape 4x1x16x8  # split-KV partials merged (8 ranges)

Takes the same kernel options as ``fa4-compile KERNEL`` (``--target`` defaults to sm_90a here: the
emulator runs Hopper code), compiles the config through the runtime's artifact cache
(``FA4_CACHE_DIR``), runs it with ``runtime.load(..., device="emulator")`` on random inputs drawn
from ``--seed`` (which also seeds the emulator's scheduling), and compares with the float64 NumPy
reference of ``fa4_mlir.reference``. It prints the max abs and rel error (rel: max abs / max|ref|),
the rms error, the elements bit-identical to the exact result (copy-pipeline: scale * x in f32,
rounded once; gemm and attention: the float64 reference correctly rounded), instructions executed and
seconds; ``--json`` prints one object instead.

Shapes (``--shape``): copy-pipeline ``ROWSxCOLS`` (default 256x128; columns a multiple of 8, TMA's
16-byte rows), gemm ``MxNxK`` (default 256x256x512; N and K multiples of 8), attention
``BxSQxSKxH`` (default 1x128x256xG for group G; H a multiple of the group; the head dim is the
config's), mla-attention ``BxSQxSKxH`` (default 1x1x256xT for the config's tile_heads T; H a multiple
of T), attention-combine ``BxSQxHxS`` (default 2x3x5x7: S key ranges of partials with LSEs spread over
e^+-60, a quarter of them -inf; the head dim is the config's).

Tolerance (``fa4_mlir.reference``): copy-pipeline must be bit-identical; gemm and attention pass when
their max and rms errors are at most twice those of the same computation in NumPy at the kernel's
precision, plus 1e-6 max|ref|; attention's LSE within 1e-3 (1 + max|lse|). fp8 attention draws e4m3 inputs
with tensor-wise scales and checks the bf16 O against the dequantized float64 attention with the fp8 yardstick
of its target (P rounded to e4m3; sm_90a's row sums of the rounded P at head dims 64 and 128, whose LSE is
bounded by ``reference.fp8_lse_limit``). attention-combine's O
passes within twice the rounding error of the float64 result (its yardstick is that result correctly
rounded), its LSE as attention's, +inf exactly where every range is -inf.

Exit status: 0 within tolerance; 1 outside it, or when the kernel fails to compile or fails in the
emulator (deadlock, memory fault, an instruction it does not support: sm_100a's tcgen05 for now);
2 for usage errors (bad options, configs or shapes). Errors are one ``fa4-emu: error:`` line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys

import numpy as np

from fa4_mlir import __version__, reference
from fa4_mlir.errors import LaunchError
from fa4_mlir.tools.kernel_options import kernel_options as _kernel_options
from fa4_mlir.tools.kernel_options import shorthands as _shorthands

USAGE, FAILED = 2, 1
DEFAULT_SHAPES = {"copy-pipeline": "256x128", "gemm": "256x256x512", "attention": "1x128x256x{group}",
                  "attention-combine": "2x3x5x7",  # 30 rows: the last CTA of 4 warps half full
                  "mla-attention": "1x1x256x{tile_heads}"}  # prefill form: 1 position of 1 head
SHAPE_FORMS = {"copy-pipeline": ("ROWSxCOLS", ("rows", "cols")), "gemm": ("MxNxK", ("m", "n", "k")),
               "attention": ("BxSQxSKxH", ("batch", "seq_q", "seq_k", "heads")),
               "attention-combine": ("BxSQxHxS", ("batch", "seq_q", "heads", "splits")),
               "mla-attention": ("BxSQxSKxH", ("batch", "seq_q", "seq_k", "heads"))}
COMBINE_EMPTY = 0.25  # the share of key ranges fa4-emu attention-combine draws with LSE -inf (no key seen)
COPY_SCALE = 1.5
# The largest operand (elements) and attention score matrix (B * H * Sq * Sk) fa4-emu draws. The
# emulator runs about 3 million thread-instructions a second on one core (2026-11: gemm 256x256x512,
# 757k in 0.27 s), so a GEMM of this size already takes hours.
MAX_ELEMENTS = 1 << 26
GEMM_ALPHA, GEMM_BETA = 1.0, 1.0  # a plain residual: D = A @ B + C


class UsageError(Exception):
    """A bad option, config or shape: exit 2."""


def _base_parser(add_help: bool) -> argparse.ArgumentParser:
    from fa4_mlir.kernels import KERNELS

    p = argparse.ArgumentParser(
        prog="fa4-emu", add_help=add_help,
        description="Run a built-in kernel in the PTX emulator on random inputs and compare with a float64 "
                    "NumPy reference.",
        epilog="Kernel options are fa4-compile's: fa4-emu KERNEL --help lists them.")
    p.add_argument("kernel", choices=list(KERNELS), help="a built-in kernel")
    p.add_argument("--target", default="sm_90a", help="sm_90a (default) or sm_100a")
    p.add_argument("--shape", default=None, help="problem shape: copy-pipeline ROWSxCOLS, gemm MxNxK, "
                                                 "attention BxSQxSKxH, attention-combine BxSQxHxS (defaults: "
                                                 "small; see the module doc)")
    p.add_argument("--seed", type=int, default=0, help="seeds the inputs and the emulator's schedule (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--version", action="version", version=f"fa4-emu {__version__}")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from fa4_mlir.kernels import KERNELS

    kernel = next((a for a in argv if a in KERNELS), None)  # its config options join the parser
    parser = _base_parser(add_help=True)
    if kernel is not None:
        _kernel_options(parser, KERNELS[kernel][0])
    args = parser.parse_args(argv)  # exits 2 with a usage line on a bad option
    try:
        return _run(args, KERNELS[args.kernel][0])
    except UsageError as exc:
        print(f"fa4-emu: error: {exc}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one line, not a traceback
        from fa4_mlir.core.isolate import report_internal_error

        report_internal_error("fa4-emu", exc)
        return FAILED


def _failed(message: str) -> int:
    print(f"fa4-emu: error: {message}", file=sys.stderr)
    return FAILED


def _config(args, config_cls):
    from fa4_mlir.errors import ConfigError

    options = {k[len("cfg_"):]: v for k, v in vars(args).items() if k.startswith("cfg_")}
    short = _shorthands(args)
    if isinstance(short, str):
        raise UsageError(short)
    options.update(short)
    try:
        return config_cls(target=args.target, **options)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def parse_shape(kernel: str, text: str) -> dict[str, int]:
    """``--shape`` as named dims, each an int >= 1; UsageError naming the form otherwise."""
    form, names = SHAPE_FORMS[kernel]
    parts = text.lower().split("x")
    if len(parts) != len(names) or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise UsageError(f"--shape of {kernel} must be {form} with integers >= 1, got '{text}'")
    return dict(zip(names, (int(p) for p in parts)))


def check_shape(kernel: str, config, shape: dict[str, int]) -> None:
    """The kernel's rules for a problem shape (TMA rows, GQA heads, tile counts); UsageError."""
    from fa4_mlir.errors import LaunchError

    per_row = 16 // 2  # TMA: rows 16-byte aligned, of 2-byte elements (bf16, fp16)
    try:
        if kernel == "copy-pipeline":
            from fa4_mlir.kernels.copy_pipeline import launch_geometry

            if shape["cols"] % per_row:
                raise UsageError(f"copy-pipeline COLS must be a multiple of {per_row} (TMA reads 16-byte rows), "
                                 f"got {shape['cols']}")
            launch_geometry(config, shape["rows"], shape["cols"], 1)
        elif kernel == "gemm":
            from fa4_mlir.kernels.gemm import launch_geometry

            for name in ("n", "k"):
                if shape[name] % per_row:
                    raise UsageError(f"gemm {name.upper()} must be a multiple of {per_row} (TMA reads 16-byte "
                                     f"rows of A, B, C and D), got {shape[name]}")
            launch_geometry(config, shape["m"], shape["n"], shape["k"], 1)
        elif kernel == "attention-combine":
            from fa4_mlir.kernels.attention.combine import launch_geometry

            launch_geometry(config, shape["batch"], shape["seq_q"], shape["heads"])
        elif kernel == "mla-attention":
            from fa4_mlir.kernels.attention.mla import launch_geometry  # by target and form

            launch_geometry(config, shape["batch"], shape["seq_q"], shape["heads"], shape["seq_k"])
        else:
            from fa4_mlir.kernels.attention import launch_geometry

            if config.token_scales:  # per-token scale tensors: the torch op pads and maps them
                raise UsageError("attention --token-scales must be off for fa4-emu (it draws tensor-wise scales), "
                                 "got on: per-token fp8 scales run in the emulator through "
                                 "torch.ops.fa4.flash_attention on CPU tensors (fa4_mlir.torch.emulated.emulator)")
            if shape["heads"] % config.group:
                raise UsageError(f"attention H must be a multiple of the config's group ({config.group}: query "
                                 f"heads per K/V head), got {shape['heads']}")
            launch_geometry(config, shape["batch"], shape["seq_q"], shape["heads"], shape["seq_k"])
    except LaunchError as exc:
        raise UsageError(str(exc)) from None
    if kernel == "copy-pipeline":
        sizes = {"ROWS * COLS": shape["rows"] * shape["cols"]}
    elif kernel == "gemm":
        m, n, k = shape["m"], shape["n"], shape["k"]
        sizes = {"M * K": m * k, "N * K": n * k, "M * N": m * n}
    elif kernel == "attention-combine":
        sizes = {"B * SQ * H * S * D": math.prod(shape.values()) * config.head_dim}
    elif kernel == "mla-attention":
        b, sq, sk, h = shape["batch"], shape["seq_q"], shape["seq_k"], shape["heads"]
        sizes = {"B * SQ * H * D": b * sq * h * config.qk_depth, "B * SK * H * D": b * sk * h * config.qk_depth,
                 "B * H * SQ * SK": b * h * sq * sk}
    else:
        b, sq, sk, h = shape["batch"], shape["seq_q"], shape["seq_k"], shape["heads"]
        sizes = {"B * SQ * H * D": b * sq * h * config.head_dim, "B * SK * H * D": b * sk * h * config.head_dim,
                 "B * H * SQ * SK": b * h * sq * sk}
    for name, size in sizes.items():
        if size > MAX_ELEMENTS:
            raise UsageError(f"{kernel} {name} must be <= {MAX_ELEMENTS} for fa4-emu (the emulator runs a few "
                             f"million thread-instructions a second), got {size}")


# -- launches on host arrays (also what the GPU tests' emulator mode runs) -----------------------------------

def launch_copy_pipeline(kernel, config, x: np.ndarray, out: np.ndarray, scale: float, *,
                         ctas: int | None = None, seed: int = 0):
    """``out = scale * x`` (2-D arrays of ``config.dtype`` bits; ``x`` may be a row-strided view)."""
    from fa4_mlir.kernels.copy_pipeline import launch_geometry
    from fa4_mlir.runtime import GlobalTensor

    grid, tiles = launch_geometry(config, x.shape[0], x.shape[1], ctas or kernel.resident_ctas)
    e = config.dtype
    return kernel.launch(grid, {"src": GlobalTensor.host(x, e), "dst": GlobalTensor.host(out, e), **tiles,
                                "scale": float(scale)}, seed=seed)


def launch_gemm(kernel, config, a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray, alpha: float,
                beta: float, *, ctas: int | None = None, seed: int = 0):
    """``d = alpha * a @ B + beta * c``: ``a`` (M, K), ``b`` as the kernel reads it ((N, K) for b_major
    "k", (K, N) for "mn"), ``c`` and ``d`` (M, N), all ``config.dtype`` bits."""
    from fa4_mlir.kernels import gemm
    from fa4_mlir.runtime import GlobalTensor

    (m, k), n = a.shape, d.shape[1]
    grid, scalars = gemm.launch_geometry(config, m, n, k, ctas or kernel.resident_ctas)
    e = config.dtype
    return kernel.launch(grid, {"a": GlobalTensor.host(a, e), "b": GlobalTensor.host(b, e),
                                "c": GlobalTensor.host(c, e), "d": GlobalTensor.host(d, e), **scalars,
                                "alpha": float(alpha), "beta": float(beta), "has_c": int(beta != 0)}, seed=seed)


def launch_attention(kernel, config, q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray,
                     lse: np.ndarray | None, scale: float, *, seed: int = 0, v_scale: float = 1.0):
    """``o = softmax(scale q k') v`` for (B, S, H, D) arrays of ``config.dtype`` bits, and the (B, H, Sq)
    float32 ``lse`` unless None (as torch.ops.fa4.flash_attention launches it). fp8 (tensor-wise scales): q, k
    and v e4m3 bytes, ``scale`` with the Q and K scales folded in, O bf16 bits times ``v_scale``; on sm_90a ``v``
    is V^T (``v_transposed_bits``)."""
    from fa4_mlir.kernels.attention import gqa_arguments, launch_geometry, walk_arguments
    from fa4_mlir.runtime import GlobalTensor

    b, sq, h, _ = q.shape
    sk, hk = k.shape[1], k.shape[2]
    e = config.dtype
    fp8 = {"v_scale": float(v_scale)} if config.is_fp8 else {}
    return kernel.launch(launch_geometry(config, b, sq, h, sk, kernel.resident_ctas),
                         {"q": GlobalTensor.host(q, e), "k": GlobalTensor.host(k, e), "v": GlobalTensor.host(v, e),
                          "o": GlobalTensor.host(o, config.out_dtype), "lse": lse, "seq_q": sq, "seq_k": sk,
                          "num_heads": h, **gqa_arguments(config, h, hk), **walk_arguments(config, b),
                          "scale_log2e": scale * math.log2(math.e),
                          "write_lse": int(lse is not None), **fp8}, seed=seed)


def _batch_of_one(t: np.ndarray) -> np.ndarray:
    """A packed (total, heads, D) array as a (1, total, heads, D) view: the kernels' TMA operand, whose batch
    stride is the whole tensor (``t[None]``'s is 0, which TMA rejects). A view, so O is written in place:
    ``t`` must be C-contiguous (a reshape would copy it and the results would be lost)."""
    if not t.flags.c_contiguous:
        raise LaunchError(f"a packed array must be C-contiguous (the kernel writes O through a view of it), got "
                          f"strides {t.strides}; pass np.ascontiguousarray(...)")
    return t.reshape(1, *t.shape)


def launch_varlen_attention(kernel, config, q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray,
                            lse: np.ndarray | None, scale: float, cu_seqlens_q: np.ndarray, cu_seqlens_k: np.ndarray,
                            *, seed: int = 0):
    """Packed sequences (``config.varlen``): q and o (total_q, H, D), k and v (total_k, Hk, D) arrays of
    ``config.dtype`` bits, the int32[B + 1] prefix sums, and the (H, total_q) float32 ``lse`` unless None."""
    from fa4_mlir.kernels.attention import gqa_arguments, varlen_arguments, varlen_geometry
    from fa4_mlir.runtime import GlobalTensor

    h, hk, e = q.shape[1], k.shape[1], config.dtype
    lengths_q, lengths_k = np.diff(cu_seqlens_q), np.diff(cu_seqlens_k)
    max_q, max_k = max(int(lengths_q.max(initial=0)), 1), max(int(lengths_k.max(initial=0)), 1)

    def packed(t):  # (total, heads, D) as the kernel's (1, total, heads, D) operand
        return GlobalTensor.host(_batch_of_one(t), e)

    batch = len(cu_seqlens_q) - 1
    return kernel.launch(varlen_geometry(config, batch, q.shape[0], max_q, h, max_k),
                         {"q": packed(q), "k": packed(k), "v": packed(v), "o": packed(o), "lse": lse,
                          "seq_q": max_q, "seq_k": max_k, "num_heads": h, **gqa_arguments(config, h, hk),
                          "scale_log2e": scale * math.log2(math.e), "write_lse": int(lse is not None),
                          **varlen_arguments(config, cu_seqlens_q, cu_seqlens_k, q.shape[0], o, batch)}, seed=seed)


def launch_paged_attention(kernel, config, q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, o: np.ndarray,
                           lse: np.ndarray | None, scale: float, block_table: np.ndarray, seqused_k: np.ndarray,
                           cu_seqlens_q: np.ndarray | None = None, *, seed: int = 0, num_splits: int = 0):
    """A paged K/V cache (``config.page_size``): k_cache and v_cache (num_pages, page_size, Hk, D) bits, the
    int32 (B, pages_per_seq) ``block_table`` and (B,) ``seqused_k``; q and o dense (B, Sq, H, D) with the (B, H,
    Sq) ``lse``, or packed (total_q, H, D) with ``cu_seqlens_q`` (``config.varlen``) and the (H, total_q) lse.
    A ``split_kv`` kernel takes ``num_splits`` (at most that many key ranges: ``splitkv.split_geometry``) and
    writes float32 partials into ``o`` (B, Sq, H, S, D) and ``lse`` (B, H, Sq, S), S the grid's ranges
    (``splitkv.ranges_of``)."""
    from fa4_mlir.kernels.attention import (gather_arguments, gqa_arguments, paged_arguments, varlen_arguments,
                                            varlen_geometry)
    from fa4_mlir.kernels.attention.splitkv import ranges_of, split_arguments, split_geometry
    from fa4_mlir.runtime import GlobalTensor

    e, hk = config.dtype, k_cache.shape[2]
    caches = [np.ascontiguousarray(c) for c in (k_cache, v_cache)]  # gathered: behind pointers, contiguous
    max_k = max(int(np.max(seqused_k, initial=0)), 1)
    if cu_seqlens_q is None:
        b, sq, h, _ = q.shape
        maps, packed = {"q": GlobalTensor.host(q, e)}, {}
        if not config.split_kv:  # split KV: o is a pointer to the fp32 partials (below)
            maps["o"] = GlobalTensor.host(o, e)
    else:
        h, b = q.shape[1], len(cu_seqlens_q) - 1
        sq = max(int(np.diff(cu_seqlens_q).max(initial=0)), 1)
        maps = {n: GlobalTensor.host(_batch_of_one(t), e) for n, t in (("q", q), ("o", o))}
        packed = varlen_arguments(config, cu_seqlens_q, None, q.shape[0], o, b)
    grid, split = varlen_geometry(config, b, q.shape[0] if packed else b * sq, sq, h, max_k), {}
    if config.split_kv:
        grid, keys = split_geometry(config, b, sq, h, max_k, num_splits)
        ranges = ranges_of(grid, config, b, sq, h, max_k)
        want = ((b, sq, h, ranges, config.head_dim), (b, h, sq, ranges))
        if o.shape != want[0] or lse is None or lse.shape != want[1]:
            raise LaunchError(f"attention: a split_kv launch over {ranges} ranges must have o {want[0]} and lse "
                              f"{want[1]} float32, got {o.shape} and {None if lse is None else lse.shape}")
        maps["o"], split = o, split_arguments(config, ranges, keys)
    return kernel.launch(grid,
                         {**maps, "k": GlobalTensor.host(k_cache, e), "v": GlobalTensor.host(v_cache, e), "lse": lse,
                          "seq_q": sq, "seq_k": max_k, "num_heads": h, **gqa_arguments(config, h, hk),
                          "scale_log2e": scale * math.log2(math.e), "write_lse": int(lse is not None), **packed,
                          **paged_arguments(config, block_table, block_table.shape[1], seqused_k, k_cache.shape[0]),
                          **gather_arguments(config, *caches, *(_element_strides(c)[:3] for c in caches)), **split},
                         seed=seed)


def _element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(s // array.itemsize for s in array.strides)


def launch_attention_combine(kernel, config, o_part: np.ndarray, lse_part: np.ndarray, o: np.ndarray,
                             lse: np.ndarray | None, *, seed: int = 0):
    """Split-KV partials merged (``attention-combine``): o_part (B, Sq, H, S, D) and lse_part (B, H, Sq, S)
    float32, into o (B, Sq, H, D) ``config.dtype`` bits and the (B, H, Sq) float32 ``lse`` unless None; all
    C-contiguous (the kernel indexes them densely)."""
    from fa4_mlir.kernels.attention.combine import check_shapes, launch_geometry

    b, sq, h, s = check_shapes(config, o_part.shape, lse_part.shape, o.shape, None if lse is None else lse.shape)
    for name, t, kind in (("o_part", o_part, np.float32), ("lse_part", lse_part, np.float32), ("o", o, np.uint16),
                          ("lse", lse, np.float32)):
        if t is not None and (t.dtype != kind or not t.flags.c_contiguous):
            raise LaunchError(f"attention-combine: {name} must be a C-contiguous {np.dtype(kind).name} array, got "
                              f"{t.dtype}{'' if t.flags.c_contiguous else ' (not C-contiguous)'}")
    return kernel.launch(launch_geometry(config, b, sq, h),
                         {"o_partial": o_part, "lse_partial": lse_part, "o": o, "lse": lse, "batch": b, "seq_q": sq,
                          "num_heads": h, "num_splits": s, "write_lse": int(lse is not None)}, seed=seed)


def launch_mla_attention(kernel, config, q_nope: np.ndarray, q_rope: np.ndarray, kv: np.ndarray,
                         k_rope: np.ndarray, o: np.ndarray, lse: np.ndarray | None, scale: float, *, seed: int = 0):
    """The absorbed MLA (``torch.ops.fa4.mla_attention``'s launch) on contiguous bit arrays: q_nope
    (B, Sq, H, 512), q_rope (B, Sq, H, 64), kv (B, Sk, 512), k_rope (B, Sk, 64), o (B, Sq, H, 512) and
    the (B, H, Sq) float32 ``lse`` unless None."""
    from fa4_mlir.kernels.attention.mla import launch_geometry  # by target and form
    from fa4_mlir.runtime import GlobalTensor

    b, sq, h, _ = q_nope.shape
    sk = kv.shape[1]
    e = config.dtype

    def heads(t):  # the latent tensors as the kernel's (B, S, 1, D) operands
        return GlobalTensor.host(np.ascontiguousarray(t).reshape(t.shape[0], t.shape[1], 1, t.shape[2]), e)

    return kernel.launch(launch_geometry(config, b, sq, h, sk),
                         {"q_nope": GlobalTensor.host(q_nope, e), "q_rope": GlobalTensor.host(q_rope, e),
                          "kv": heads(kv), "k_rope": heads(k_rope), "o": GlobalTensor.host(o, e), "lse": lse,
                          "seq_q": sq, "seq_k": sk, "num_heads": h, "scale_log2e": scale * math.log2(math.e),
                          "write_lse": int(lse is not None)}, seed=seed)


def launch_mla_prefill(kernel, config, q_nope: np.ndarray, q_rope: np.ndarray, k_nope: np.ndarray,
                       k_rope: np.ndarray, v: np.ndarray, o: np.ndarray, lse: np.ndarray | None, scale: float, *,
                       seed: int = 0, v_scale: float | None = None):
    """The prefill-form MLA on bit arrays: q_nope (B, Sq, H, 128), q_rope (B, Sq, H, 64), k_nope and v
    (B, Sk, H / group, 128), k_rope (B, Sk, H / group, 64), o (B, Sq, H, 128), ``lse`` as above. fp8
    configs: q_nope, k_nope, v e4m3 bytes, the rope in ``config.rope``, o bf16, and ``v_scale``."""
    from fa4_mlir.kernels.attention.mla import launch_geometry  # by target and form
    from fa4_mlir.runtime import GlobalTensor

    b, sq, h, _ = q_nope.shape
    e, rope = config.dtype, config.rope
    out = "bf16" if e == "fp8_e4m3" else e
    maps = {n: GlobalTensor.host(t, kind) for n, t, kind in (
        ("q_nope", q_nope, e), ("q_rope", q_rope, rope), ("k_nope", k_nope, e), ("k_rope", k_rope, rope), ("v", v, e),
        ("o", o, out))}
    scales = {} if v_scale is None else {"v_scale": float(v_scale)}
    return kernel.launch(launch_geometry(config, b, sq, h, k_nope.shape[1]),
                         {**maps, "lse": lse, "seq_q": sq, "seq_k": k_nope.shape[1], "num_heads": h,
                          "scale_log2e": scale * math.log2(math.e), "write_lse": int(lse is not None), **scales},
                         seed=seed)


# -- the run ---------------------------------------------------------------------------------------------------

def _run(args, config_cls) -> int:
    from fa4_mlir import emu, runtime
    from fa4_mlir.errors import ArtifactError, LaunchError

    config = _config(args, config_cls)
    if args.shape is None:
        args.shape = DEFAULT_SHAPES[args.kernel].format(group=getattr(config, "group", 1),
                                                        tile_heads=getattr(config, "heads_per_tile", 1))
    shape = parse_shape(args.kernel, args.shape)
    check_shape(args.kernel, config, shape)
    try:
        kernel = runtime.load(args.kernel, config, device="emulator", debug=False)
    except (ArtifactError, LaunchError) as exc:
        return _failed(str(exc))
    except emu.EmulationError as exc:
        return _failed(f"the emulator cannot load {args.kernel}'s PTX: {exc}")
    rng = np.random.default_rng(args.seed)
    try:
        stats, checks = RUNS[args.kernel](kernel, config, shape, rng, args.seed)
    except emu.EmulationError as exc:
        return _failed(f"{args.kernel} failed in the emulator ({type(exc).__name__}, --seed {args.seed}): {exc}")
    except LaunchError as exc:
        return _failed(str(exc))
    ok = all(c["ok"] for c in checks.values())
    report = {"kernel": args.kernel, "target": config.target, "config": dataclasses.asdict(config), "shape": shape,
              "seed": args.seed, "instructions": stats.instructions, "warp_instructions": stats.warp_instructions,
              "ctas": stats.ctas, "seconds": round(stats.seconds, 3), "checks": checks, "ok": ok}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        dims = "x".join(str(v) for v in shape.values())
        form = SHAPE_FORMS[args.kernel][0]
        print(f"{args.kernel} {config.target} {config.dtype} {dims} ({form}), seed {args.seed}: "
              f"{stats.instructions} instructions ({stats.warp_instructions} warp), {stats.ctas} CTAs, "
              f"{stats.seconds:.2f} s in the emulator")
        for name, check in checks.items():
            print(f"  {name}: {check['summary']}: {'ok' if check['ok'] else 'FAILED'}")
        print("within tolerance" if ok else "OUTSIDE TOLERANCE")
    return 0 if ok else FAILED


def _check(comparison: reference.Comparison) -> dict:
    """A comparison as JSON-ready values: non-finite errors (NaN where nothing was written) as strings."""
    values = {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in vars(comparison).items()}
    return {**values, "summary": comparison.summary()}


def _run_copy(kernel, config, shape, rng, seed):
    rows, cols = shape["rows"], shape["cols"]
    x = reference.random_bits(rng, (rows, cols), config.dtype)
    out = np.full((rows, cols), reference.POISON[config.dtype], np.uint16)
    stats = launch_copy_pipeline(kernel, config, x, out, COPY_SCALE, seed=seed)
    ref = reference.copy_pipeline(reference.to_f64(x, config.dtype), COPY_SCALE)
    return stats, {"out": _check(reference.compare_exact(out, reference.scaled(x, COPY_SCALE, config.dtype), ref,
                                                         config.dtype))}


def _run_gemm(kernel, config, shape, rng, seed):
    m, n, k, e = shape["m"], shape["n"], shape["k"], config.dtype
    a, c = reference.random_bits(rng, (m, k), e, 1.0), reference.random_bits(rng, (m, n), e, 1.0)
    b = reference.random_bits(rng, (k, n), e, 1.0)
    b_mem = np.ascontiguousarray(b.T) if config.b_major == "k" else b
    d = np.full((m, n), reference.POISON[e], np.uint16)
    stats = launch_gemm(kernel, config, a, b_mem, c, d, GEMM_ALPHA, GEMM_BETA, seed=seed)
    ref = reference.gemm_residual(reference.to_f64(a, e), reference.to_f64(b, e), reference.to_f64(c, e),
                                  GEMM_ALPHA, GEMM_BETA)
    return stats, {"d": _check(reference.compare(d, ref, reference.gemm_yardstick(ref, e), e))}


def _run_attention(kernel, config, shape, rng, seed):
    if config.is_fp8:  # e4m3 in, bf16 out, V^T on sm_90a: fa4_emu_fp8
        from fa4_mlir.tools import fa4_emu_fp8

        q, k, v, v_op, o, lse, scale, (qs, ks, vs) = fa4_emu_fp8.draw(config, shape, rng)
        stats = launch_attention(kernel, config, q, k, v_op, o, lse, scale * qs * ks, seed=seed, v_scale=vs)
        ref, ref_lse, yard, limit = fa4_emu_fp8.expected(config, q, k, v, scale, (qs, ks, vs))
        return stats, {"o": _check(reference.compare(o, ref, yard, "bf16")), "lse": _lse_check(lse, ref_lse, limit)}
    bsz, sq, sk, h, e = shape["batch"], shape["seq_q"], shape["seq_k"], shape["heads"], config.dtype
    hk, dim = h // config.group, config.head_dim
    q = reference.random_bits(rng, (bsz, sq, h, dim), e, 1.0)
    k = reference.random_bits(rng, (bsz, sk, hk, dim), e, 1.0)
    v = reference.random_bits(rng, (bsz, sk, hk, dim), e, 1.0)
    o = np.full((bsz, sq, h, dim), reference.POISON[e], np.uint16)
    lse = np.full((bsz, h, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(dim)
    stats = launch_attention(kernel, config, q, k, v, o, lse, scale, seed=seed)
    qf, kf, vf = (reference.to_f64(t, e) for t in (q, k, v))
    ref, ref_lse = reference.attention(qf, kf, vf, config.causal, scale)
    yard = reference.attention_yardstick(qf, kf, vf, config.causal, scale, e)
    lse_err = float(np.abs(lse - ref_lse).max())
    limit = reference.lse_tolerance(ref_lse)
    lse_ok = bool(lse_err <= limit)  # NaN (never written) fails
    return stats, {"o": _check(reference.compare(o, ref, yard, e)),
                   "lse": {"max_abs": lse_err if math.isfinite(lse_err) else str(lse_err), "limit_max": limit,
                           "ok": lse_ok,
                           "summary": f"max abs error {lse_err:.3g} (limit {limit:.3g})"}}


def _run_mla(kernel, config, shape, rng, seed):
    bsz, sq, sk, h, e = shape["batch"], shape["seq_q"], shape["seq_k"], shape["heads"], config.dtype
    if config.form == "prefill":
        return _run_mla_prefill(kernel, config, shape, rng, seed)
    q_nope, q_rope = (reference.random_bits(rng, (bsz, sq, h, d), e, 1.0) for d in (512, 64))
    kv, k_rope = (reference.random_bits(rng, (bsz, sk, d), e, 1.0) for d in (512, 64))
    o = np.full((bsz, sq, h, 512), reference.POISON[e], np.uint16)
    lse = np.full((bsz, h, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(576)
    stats = launch_mla_attention(kernel, config, q_nope, q_rope, kv, k_rope, o, lse, scale, seed=seed)
    inputs = [reference.to_f64(t, e) for t in (q_nope, q_rope, kv, k_rope)]
    ref, ref_lse = reference.mla_attention(*inputs, config.causal, scale)
    yard = reference.mla_attention_yardstick(*inputs, config.causal, scale, e)
    return stats, {"o": _check(reference.compare(o, ref, yard, e)), "lse": _lse_check(lse, ref_lse)}


def _run_mla_prefill(kernel, config, shape, rng, seed):
    bsz, sq, sk, h, e = shape["batch"], shape["seq_q"], shape["seq_k"], shape["heads"], config.dtype
    hk = h // config.group
    q_nope, q_rope = (reference.random_bits(rng, (bsz, sq, h, d), e, 1.0) for d in (128, 64))
    k_nope, k_rope, v = (reference.random_bits(rng, (bsz, sk, hk, d), e, 1.0) for d in (128, 64, 128))
    o = np.full((bsz, sq, h, 128), reference.POISON[e], np.uint16)
    lse = np.full((bsz, h, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(192)
    stats = launch_mla_prefill(kernel, config, q_nope, q_rope, k_nope, k_rope, v, o, lse, scale, seed=seed)
    q = np.concatenate([reference.to_f64(q_nope, e), reference.to_f64(q_rope, e)], axis=-1)
    k = np.concatenate([reference.to_f64(k_nope, e), reference.to_f64(k_rope, e)], axis=-1)
    vf = reference.to_f64(v, e)
    ref, ref_lse = reference.attention(q, k, vf, config.causal, scale)
    yard = reference.attention_yardstick(q, k, vf, config.causal, scale, e)
    return stats, {"o": _check(reference.compare(o, ref, yard, e)), "lse": _lse_check(lse, ref_lse)}


def _lse_check(lse: np.ndarray, ref_lse: np.ndarray, limit: float | None = None) -> dict:
    """Within ``limit`` (default ``lse_tolerance``) of the reference's finite values; +inf exactly where it is
    +inf (a row that saw no key)."""
    keyless = np.isposinf(ref_lse)
    if (np.isposinf(lse) != keyless).any():
        lse_err = math.inf
    else:
        lse_err = float(np.abs(lse[~keyless] - ref_lse[~keyless]).max(initial=0.0))
    if limit is None:
        limit = reference.lse_tolerance(np.where(keyless, 0.0, ref_lse))
    return {"max_abs": lse_err if math.isfinite(lse_err) else str(lse_err), "limit_max": limit,
            "ok": bool(lse_err <= limit),  # NaN (never written) fails
            "summary": f"max abs error {lse_err:.3g} (limit {limit:.3g})"}


def _run_combine(kernel, config, shape, rng, seed):
    bsz, sq, h, splits, e = shape["batch"], shape["seq_q"], shape["heads"], shape["splits"], config.dtype
    o_part = rng.standard_normal((bsz, sq, h, splits, config.head_dim), dtype=np.float32)
    lse_part = (rng.standard_normal((bsz, h, sq, splits)) * 20).astype(np.float32)  # weights e^-60 .. 1
    lse_part[rng.random(lse_part.shape) < COMBINE_EMPTY] = -np.inf
    o = np.full((bsz, sq, h, config.head_dim), reference.POISON[e], np.uint16)
    lse = np.full((bsz, h, sq), np.nan, np.float32)
    stats = launch_attention_combine(kernel, config, o_part, lse_part, o, lse, seed=seed)
    ref, ref_lse = reference.combine_partials(o_part, lse_part)
    return stats, {"o": _check(reference.compare(o, ref, reference.round_to(ref, e), e)),
                   "lse": _lse_check(lse, ref_lse)}


RUNS = {"copy-pipeline": _run_copy, "gemm": _run_gemm, "attention": _run_attention,
        "attention-combine": _run_combine, "mla-attention": _run_mla}


if __name__ == "__main__":
    sys.exit(main())
