"""The fp8 (e4m3) parts of the sm_90a attention (``hopper.py``, ``hopper_consumer.py``): operand tiles,
P as e4m3 register fragments, the P@V of a transposed V, per-token scales.

fp8 wgmma (``m64nNk32.f32.e4m3.e4m3``) reads both shared-memory operands K-major only. Q K' is K-major
already (Q and K rows are head-dim contiguous); P@V needs V with the keys contiguous. FA3 transposes
each V tile in the kernel (shared memory -> registers -> shared memory, a warpgroup's work per tile).
Here the torch op passes V^T (B, H / group, D + R, Sk'; R rows of ones, below) instead (``v_transpose``): one copy
of V per call on the current stream (a Triton tile copy: 0.025 ms for V at 16k tokens x 2048 on an H200,
1% of the fp8 attention at head dim 128; the benchmark's fp8 time includes it, docs/PERF.md), and the
kernel's V load is a plain TMA of V^T tiles.

The P operand comes from registers. The S accumulator gives a thread, per 8 keys, keys ``2q, 2q + 1`` of
rows r and r + 8 (q = lane % 4); the e4m3 A fragment wants 4 consecutive K elements per register: row r,
K ``4q .. 4q + 3`` (then r + 8, then K ``16 + 4q ..``). FA3 permutes bytes across registers. Here the
keys of V^T are permuted instead, inside every 16: position ``4q + 2a + b`` of V^T holds key
``8a + 2q + b`` (a, b in {0, 1}), which is the key the accumulator holds at that place, so each register
of P is just 4 of the thread's probabilities converted in order (``cvt.rn.satfinite.e4m3x2.f32`` twice).
The permutation is free: the op's transpose does it in the same copy (Sk' = Sk rounded up to 16, zeros).
S's key order stays the natural one (K is not permuted), so masking and the k scales index keys as before.

The exp2 bias (spec 4.8): P = exp2(x + P_BIAS) with x = (s - m) * scale <= 0, so P <= 2^P_BIAS; e4m3's
normal range starts at 2^-6, so a bias of 8 keeps P normal down to 2^-14 (instead of 2^-6) of the row
maximum, and 2^8 = 256 < 448 (e4m3's largest finite value). The reference's 6 (= 8 + its lazy-rescale
threshold -2) leaves room for a maximum that is up to 2^2 stale; this kernel rescales every tile, its
maximum is exact, so 8 is the largest power of two below 448. The bias multiplies the row sum and O alike
and cancels in O / sum; the LSE subtracts it.

Row sums on the tensor core (``HopperTile.row_sums``, head dims 64 and 128): the op appends ``sum_rows`` (8)
rows of e4m3 ones to V^T (B, H / group, D + 8, Sk'), so P times them is each row's sum of the e4m3 P, which
the P V wgmmas compute instead of one FADD a probability in the softmax (about a sixth of the consumer's
instructions at head dim 128). "columns": O's wgmmas are n(D + 8); each tile the consumer reads the 8 sum
columns (all equal) out of O's accumulator and zeroes them before the next P V. "wgmma": an n8 wgmma a k step
over the ones rows, into an accumulator that starts from zero each tile. Either way the tensor core sums one
tile's keys and the row's sum across tiles is fp32 on the CUDA cores: the tensor core's fp8 accumulation
keeps fewer bits than fp32, and one running sum over 16k keys in O's accumulator lost the small terms (a
relative error of 0.32 against bf16 at 16k on the H100, against 0.054 with the sums per tile). The sum is of
the e4m3-rounded P, the one P @ V multiplies, so O is normalised by its own weights; the LSE is that sum's
(``reference.attention_fp8_yardstick``'s ``rounded_sums``).

Per-token scales (``token_scales``): S[r, c] of the dequantized inputs is (q_s[r] k_s[c]) S[r, c]. The
kernel multiplies S by k_s[c] (one FMUL per element; K-stage buffer of ``bn`` fp32 loaded by TMA with the
K tile, on its barrier) and folds q_s[r] into the row's softmax scale (``q_s[r] * scale_log2e``): the
maximum of q_s S k_s is q_s times that of S k_s (q_s > 0). The q scales of the CTA's rows are TMA-loaded
with Q. O is multiplied by ``v_scale`` with 1 / row sum.
"""

from __future__ import annotations

from typing import NamedTuple

from fa4_mlir.kernels.source import TensorMapSpec

P_BIAS = 8.0  # log2 of P's scale before the e4m3 cast (see the module docstring)
K_STEP_BYTES = 32  # one wgmma K step: k16 of 16-bit types, k32 of e4m3


def swizzle(width: int) -> str:
    return f"{width}B"


def boxes(config):
    """(q, k, o, v, (q_scale, k_scale) or None) TMA boxes of the fp8 kernel."""
    t = config.hopper
    w, vw = t.row_bytes, t.v_row_bytes
    q = TensorMapSpec(config.dtype, (w, 1, 64, 1), swizzle(w))
    k = TensorMapSpec(config.dtype, (w, 1, t.bn, 1), swizzle(w))
    o = TensorMapSpec(config.out_dtype, (64, 1, 64, 1), "128B")
    v = TensorMapSpec(config.dtype, (vw, config.head_dim + t.sum_rows, 1, 1), swizzle(vw))
    scales = (TensorMapSpec("fp32", (t.bm, 1, 1)), TensorMapSpec("fp32", (t.bn, 1, 1))) if config.token_scales \
        else None
    return q, k, o, v, scales


# -- consumer warpgroup pieces (``c`` is the ``hopper_consumer.Consumer``) ------------------------------
class Half(NamedTuple):
    """Probability ``index`` (0: the low half) of a packed f16x2 pair (``exp2.exp2_poly_f16x2``): P's values
    (i, i + 1) of a row, i even, as the packed polynomial gives them; ``pack`` converts the pair to e4m3 in
    one instruction."""
    word: object  # the f16x2 word (i32)
    index: int


def exponentials(c, vals: list, scale, nms, idx: list, probs: list) -> None:
    """One row's probabilities into ``probs[idx[n]]``: ``exp2(vals[n] * scale + nms)``, pairs (n, n + 1), n
    even, of ``exp2_emulation`` per 32 by the packed f16 polynomial (``exp2.exp2_poly_f16x2``: two ``Half``s of
    one word, values (i, i + 1) of the thread, one row), the others by ``ex2.approx``."""
    from fa4_mlir.dsl import math as fm
    from fa4_mlir.kernels.attention.exp2 import emulated, exp2_poly_f16x2

    pairs = emulated(len(vals) // 2, c.g.exp2_emulation)
    for n in range(0, len(vals), 2):
        ys = [fm.fma(x, scale, nms) for x in vals[n:n + 2]]
        if n // 2 in pairs:
            word = exp2_poly_f16x2(*ys)
            probs[idx[n]], probs[idx[n + 1]] = Half(word, 0), Half(word, 1)
        else:
            probs[idx[n]], probs[idx[n + 1]] = (fm.exp2(y) for y in ys)


def as_f32(x):
    """A probability as f32: a ``Half``'s f16 widened (the softmax's FADD row sums), else ``x``."""
    from fa4_mlir import dsl
    from fa4_mlir.dsl import math as fm

    if not isinstance(x, Half):
        return x
    return dsl.llvm.inline_asm(fm.f32(), [x.word], "{\n.reg .b16 l, h;\nmov.b32 {l, h}, $1;\n"
                               f"cvt.f32.f16 $0, {'lh'[x.index]};\n}}", "=f,r")


def pack(c, probs: list) -> list:
    """P as e4m3 RS fragments, one vector<4xi32> per 32 keys. Values ``16 j ..`` of the thread hold, per 8
    keys ``8 i``, (r, 2q), (r, 2q + 1), (r + 8, 2q), (r + 8, 2q + 1); register h of fragment j takes row
    ``r + 8 (h % 2)`` of keys ``16 (h // 2) ..``: values ``16 j + 8 (h // 2) + 2 (h % 2) + {0, 1, 4, 5}``
    (V^T's key order matches, see the module docstring). A pair of f32 values converts with
    ``cvt.rn.satfinite.e4m3x2.f32``, a packed f16x2 pair (``Half``) with ``.e4m3x2.f16x2``."""
    from fa4_mlir import dsl

    frags = []
    for j in range(len(probs) // 16):
        words = []
        for h in range(4):
            base = 16 * j + 8 * (h // 2) + 2 * (h % 2)
            operands, kinds, lines = [], [], []
            for half, e in (("lo", 0), ("hi", 4)):
                x0, x1 = probs[base + e], probs[base + e + 1]
                if isinstance(x0, Half):  # the f16x2 word holds x0 in its low half: x0 lands in the low byte
                    assert x0.index == 0 and x1 == Half(x0.word, 1), "a packed pair is values (i, i + 1), i even"
                    operands.append(x0.word)
                    kinds.append("r")
                    lines.append(f"cvt.rn.satfinite.e4m3x2.f16x2 {half}, ${len(operands)};")
                else:  # cvt d, a, b puts a in the upper byte: x0 lands in the low byte
                    operands += [x0, x1]
                    kinds += ["f", "f"]
                    lines.append(f"cvt.rn.satfinite.e4m3x2.f32 {half}, ${len(operands)}, ${len(operands) - 1};")
            words.append(dsl.llvm.inline_asm(
                c.i32, operands, "{\n.reg .b16 lo, hi;\n" + "\n".join(lines) + "\nmov.b32 $0, {lo, hi};\n}",
                "=r," + ",".join(kinds)))
        frags.append(dsl.vector.from_elements(c.fragment, words))
    return frags


def pv(c, vb, o, frags):
    """O += P V from the V^T stage ``vb`` (K-major: per head-dim row, the tile's keys in blocks of
    ``HopperTile.v_row_bytes`` bytes, one block after the other, each D rows and the ``sum_rows`` rows of
    ones): one k32 wgmma per fragment, n(D + 8) with "columns" row sums. Returns (O, the tile's row sums'
    accumulator: "wgmma"'s n8 one, else None)."""
    from fa4_mlir import dsl

    g = c.g
    vw, rows = g.vrow, g.d + g.t.sum_rows
    n = g.o_cols + (g.t.sum_rows if g.row_sums == "columns" else 0)
    sums = dsl.llvm.mlir_undef(c.sum_acc) if g.row_sums == "wgmma" else None
    for j, frag in enumerate(frags):
        blk, sub = divmod(j * K_STEP_BYTES, vw)
        o = dsl.fa4.wgmma(frag, vb, o, n=n, ab_type="e4m3", accumulate=1, b_offset=blk * rows * vw + sub)
        if sums is not None:  # the ones rows after the block's D rows; from zero at the tile's first step
            sums = dsl.fa4.wgmma(frag, vb, sums, n=g.t.sum_rows, ab_type="e4m3", accumulate=int(j > 0),
                                 b_offset=blk * rows * vw + g.d * vw + sub)
    return o, sums


def key_scaled(c, vals: list, ks_stage) -> list:
    """S times its keys' k scales (value i of the thread is key ``8 (i // 4) + 2q + i % 2``), read from the
    K stage's scale buffer ``ks_stage`` as one 8-byte load per 8 keys."""
    from fa4_mlir import dsl
    from fa4_mlir._mlir import ir

    base = dsl.fa4.smem_address(ks_stage)
    pair = ir.VectorType.get([2], c.f32)
    q8 = c.q2 * 4
    out = list(vals)
    for chunk in range(len(vals) // 4):
        ks = dsl.llvm.load(pair, dsl.byte_offset(base, q8 + 32 * chunk), alignment=8)
        scales = [dsl.llvm.extractelement(ks, dsl.Value(e).value) for e in (0, 1)]
        for i in range(4 * chunk, 4 * chunk + 4):
            out[i] = dsl.arith.mulf(vals[i], scales[i % 2])
    return out


def row_scales(c) -> list:
    """The rows' softmax scales ``q_s[row] * scale_log2e`` (the q scales TMA-loaded with Q)."""
    from fa4_mlir import dsl

    g = c.g
    base = dsl.fa4.smem_address(g.qscale)
    first = (c.r0 + c.w * g.wg_rows) * 4
    return [dsl.arith.mulf(dsl.llvm.load(c.f32, dsl.byte_offset(base, first + 32 * r), alignment=4),
                           g.arg.scale_log2e) for r in (0, 1)]
