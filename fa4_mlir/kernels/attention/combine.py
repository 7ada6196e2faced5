"""attention-combine: merge split-KV partials (fp32 O_s and LSE_s per key range) into O and its LSE.

A split-KV attention kernel (``AttentionConfig.split_kv``, the MLA split) writes for each row (b, q, h)
and key range s the output normalised over the range's keys, ``o_partial[b, q, h, s, :]`` (fp32, D
columns), and the range's natural-log LSE ``lse_partial[b, h, q, s]`` (-inf where the row saw no key of
the range). This kernel computes, rounding once to the output dtype::

    m   = max_s LSE_s,   w_s = exp(LSE_s - m) (0 for LSE_s = -inf),   W = sum_s w_s
    O   = sum_s w_s O_s / W,   lse = m + ln W

and, for a row whose ranges are all -inf (it saw no key), O = 0 and lse = +inf (FlashAttention's
convention, the paged kernel's). No NaN: a range of weight 0 is skipped, never multiplied.

It is memory-bound (it reads S x D x 4 bytes a row to write D x 2), so the layout serves the loads: one
warp per row, ``CombineConfig.warps`` rows a CTA. Lane l holds columns 4 (l + 32 i), i < ceil(D / 128),
and reads them as one 16-byte ld.global.nc.v4 per range: a warp reads a partial row's 512-byte runs
whole (D = 96 and 192 leave the last step's upper lanes reading a clamped column they never store).
Pass 1: each lane reads one LSE of every 32 (lane s % 32) and the warp takes the maximum with a
butterfly; pass 2 walks the ranges in chunks of 32: lane l computes chunk c's weight ``w_{32c+l}``,
every lane takes ``w_s`` by shfl.idx and accumulates ``w_s O_s``, ``CombineConfig.splits_per_step``
ranges a step with all their loads issued before the first FMA (decode has few rows, so few warps an SM:
the loads in flight a warp keep the bandwidth); a range of weight 0 is not read (a uniform branch: a
range past a short sequence's keys costs no load, and its O_s, whatever it holds, is never multiplied by
0). One division at the end. Offsets into
the partials are 64-bit (B x Sq x H x S x D passes 2^31 for large decode batches); the output's row index
is 32-bit (``launch_geometry`` checks B x Sq x H < 2^31).
"""

from __future__ import annotations

from fa4_mlir.configs.combine import LANES, VECTOR, CombineConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.source import KernelSource

NAME = "attention_combine"
MAX_ROWS = (1 << 31) - 1  # row indices (b, q, h) are i32; the partials' offsets i64
LOG2E = 1.4426950408889634


def launch_geometry(config: CombineConfig, batch: int, seq_q: int, heads: int) -> tuple[int, int, int]:
    """The grid for B x Sq x H rows: ceil(rows / warps) CTAs along x (one warp a row)."""
    rows = batch * seq_q * heads
    if not 1 <= rows <= MAX_ROWS:
        raise LaunchError(f"attention-combine: B * Sq * H must be in [1, {MAX_ROWS}] (32-bit row indices), got "
                          f"{rows} ({batch} x {seq_q} x {heads})")
    return (-(-rows // config.warps), 1, 1)


def check_shapes(config: CombineConfig, o_partial, lse_partial, o, lse=None) -> tuple[int, int, int, int]:
    """(B, Sq, H, S) of a launch on operands of these shapes: o_partial (B, Sq, H, S, D), lse_partial
    (B, H, Sq, S), o (B, Sq, H, D) and lse (B, H, Sq) unless None, D = ``config.head_dim``; LaunchError
    naming the operand otherwise."""
    o_partial, lse_partial, o = tuple(o_partial), tuple(lse_partial), tuple(o)
    if len(o_partial) != 5 or o_partial[4] != config.head_dim or min(o_partial) < 1:
        raise LaunchError(f"attention-combine: o_partial must be (B, Sq, H, S, {config.head_dim}) with every "
                          f"dimension >= 1 (the config's head_dim last), got {o_partial}")
    b, sq, h, s, d = o_partial
    for name, shape, want in (("lse_partial", lse_partial, (b, h, sq, s)), ("o", o, (b, sq, h, d)),
                              ("lse", lse, (b, h, sq))):
        if shape is not None and tuple(shape) != want:
            raise LaunchError(f"attention-combine: {name} must be {want} for o_partial {o_partial}, got "
                              f"{tuple(shape)}")
    return b, sq, h, s


def build(config: CombineConfig) -> KernelSource:
    """The kernel, built through ``fa4_mlir.dsl`` (imported here: the launch geometry above imports
    without MLIR)."""
    from fa4_mlir import dsl
    from fa4_mlir._mlir import ir
    from fa4_mlir.dsl import math as fm

    c = config
    d = c.head_dim
    k = dsl.Kernel(NAME, c.target, c.num_warps)
    k.ptr("o_partial", f"f32 [B, Sq, H, num_splits, {d}]: each key range's O, normalised over its keys")
    k.ptr("lse_partial", "f32 [B, H, Sq, num_splits]: each key range's natural-log LSE (-inf: no key)")
    k.ptr("o", f"{c.dtype} [B, Sq, H, {d}], contiguous: the combined output")
    k.ptr("lse", "f32 [B, H, Sq]: the combined LSE (+inf where every range is -inf), when write_lse")
    k.i32("batch", "B")
    k.i32("seq_q", "Sq")
    k.i32("num_heads", "H")
    k.i32("num_splits", "key ranges S (>= 1)")
    k.i32("write_lse", "1: write lse; 0: leave it (it may be null)")
    with k.body() as arg:
        # ptxas, left to itself, holds this kernel to 32-40 registers (an occupancy target of its own) and
        # serialises or spills the loads in flight; a floor of CTAs per SM gives it the register budget
        # the in-flight loads need (64 a thread) and keeps half the SM's warps resident
        kernel_op = ir.InsertionPoint.current.block.owner
        kernel_op = getattr(kernel_op, "operation", kernel_op)
        kernel_op.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), c.min_ctas)
        f32, i64, out = ir.F32Type.get(), ir.IntegerType.get_signless(64), ir.Type.parse(c.elem.mlir)
        vec, out_vec = ir.VectorType.get([VECTOR], f32), ir.VectorType.get([VECTOR], out)
        tid = dsl.tid_x()
        lane, warp = tid % LANES, tid // LANES
        row = dsl.ctaid("x") * c.warps + warp  # (b * Sq + q) * H + h
        rows = arg.batch * arg.seq_q * arg.num_heads
        with k.role("combine", warps=range(c.warps)), k.if_(row < rows):  # uniform in the warp

            def wide(x) -> dsl.Value:
                return dsl.Value(dsl.arith.extui(i64, dsl.Value(x).value))

            head, bq = row % arg.num_heads, row // arg.num_heads
            lse_row = (bq // arg.seq_q * arg.num_heads + head) * arg.seq_q + bq % arg.seq_q  # (b * H + h) * Sq + q
            splits = wide(arg.num_splits)
            lse_base, o_base = wide(lse_row) * splits, wide(row) * splits * d
            ninf, zero = fm.constant(fm.NEG_INF), fm.constant(0.0)
            full, clamp = dsl.Value(-1).value, dsl.Value(LANES - 1).value

            def lse_of(chunk) -> ir.Value:
                """LSE of range ``chunk + lane`` (-inf past num_splits; range 0 read in its place)."""
                s = chunk + lane
                inside = s < arg.num_splits
                at = lse_base + wide(dsl.arith.select(inside.value, s.value, dsl.Value(0).value))
                value = dsl.llvm.load(f32, dsl.element_ptr(arg.lse_partial, at, f32), invariant=True)
                return dsl.arith.select(inside.value, value, ninf)

            top = dsl.Var(ninf)  # pass 1: the row's largest LSE
            with k.range(0, arg.num_splits, LANES, carry=[top]) as chunk:
                top.value = dsl.arith.maxnumf(top.value, lse_of(chunk))
            m = top.value
            for offset in (16, 8, 4, 2, 1):
                other = dsl.nvvm.shfl_sync(f32, full, m, dsl.Value(offset).value, clamp, dsl.nvvm.ShflKind.bfly)
                m = dsl.arith.maxnumf(m, other)
            m_log2 = dsl.arith.mulf(m, fm.constant(LOG2E))

            columns = [lane + LANES * i for i in range(c.steps)]  # in vectors
            if c.vectors % LANES:  # the last step's lanes past D / 4 read the last vector, store nothing
                columns[-1] = columns[-1].min(c.vectors - 1)
            acc = [dsl.Var(dsl.vector.broadcast(vec, zero)) for _ in columns]
            total = dsl.Var(zero)  # W: every lane adds every weight, so every lane holds it
            with k.range(0, arg.num_splits, LANES, carry=[*acc, total]) as chunk:  # pass 2
                lse_s = lse_of(chunk)
                keyless = dsl.arith.cmpf(dsl.arith.CmpFPredicate.OEQ, lse_s, ninf)
                weight = dsl.arith.select(keyless, zero, fm.exp2(fm.fma(lse_s, fm.constant(LOG2E),
                                                                         dsl.arith.negf(m_log2))))
                group = c.splits_per_step
                with k.range(0, (arg.num_splits - chunk).min(LANES), group, carry=[*acc, total]) as j:
                    # ranges j .. j + group - 1 of the chunk (those past num_splits weigh 0): every load
                    # issued before the first FMA waits on one, so a warp has group x steps in flight
                    ws = [dsl.nvvm.shfl_sync(f32, full, weight, (j + u).value, clamp, dsl.nvvm.ShflKind.idx)
                          for u in range(group)]
                    parts = []
                    for u, w in enumerate(ws):
                        base = o_base + wide(chunk + j + u) * d
                        part = [dsl.Var(dsl.vector.broadcast(vec, zero)) for _ in columns]
                        with k.if_(dsl.arith.cmpf(dsl.arith.CmpFPredicate.OGT, w, zero), carry=part):
                            for x, col in zip(part, columns):  # a range of weight 0 is never read
                                x.value = dsl.llvm.load(vec, dsl.element_ptr(arg.o_partial, base + wide(col * VECTOR),
                                                                             f32), alignment=16, invariant=True)
                        parts.append(part)
                    for w, part in zip(ws, parts):
                        total.value = dsl.arith.addf(total.value, w)
                        for a, x in zip(acc, part):
                            a.value = fm.fma(dsl.vector.broadcast(vec, w), x.value, a.value)

            seen = dsl.arith.cmpf(dsl.arith.CmpFPredicate.OGT, total.value, zero)
            inv = dsl.arith.select(seen, dsl.arith.divf(fm.constant(1.0), total.value), zero)
            invs = dsl.vector.broadcast(vec, inv)
            o_row = wide(row) * d
            for i, (a, col) in enumerate(zip(acc, columns)):
                y = dsl.arith.truncf(out_vec, dsl.arith.mulf(a.value, invs))
                ptr = dsl.element_ptr(arg.o, o_row + wide(col * VECTOR), out)
                if (i + 1) * LANES <= c.vectors:
                    dsl.llvm.store(y, ptr, alignment=VECTOR * c.elem.bytes)
                else:
                    with k.if_(lane + LANES * i < c.vectors):
                        dsl.llvm.store(y, ptr, alignment=VECTOR * c.elem.bytes)
            lse = dsl.arith.select(seen, fm.fma(fm.log2(total.value), fm.constant(fm.LN2), m),
                                   fm.constant(float("inf")))
            with k.if_((lane == 0).value), k.if_(arg.write_lse != 0):
                dsl.llvm.store(lse, dsl.element_ptr(arg.lse, lse_row, f32))
    return k.source(grid="(ceil(B * Sq * H / warps), 1, 1): one warp a (b, q, h) row (launch_geometry)",
                    config={f: getattr(c, f) for f in ("dtype", "head_dim", "warps")})
