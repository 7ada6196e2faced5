"""The 5th-generation tensor-core family (``tcgen05.*``, sm_100a): tensor-memory allocation, loads and
stores between registers and TMEM, ``tcgen05.mma`` and ``tcgen05.commit``.

PTX ISA "TensorCore 5th Generation Family Instructions" (sections named per instruction below):

- ``tcgen05.alloc/dealloc/relinquish_alloc_permit .cta_group::1/::2`` ("Tensor Memory Allocation"):
  warp-wide (.sync.aligned); see ``fa4_mlir.emu.tmem`` for the rules enforced.
- ``tcgen05.ld/st`` in every shape (.32x32b, .16x64b, .16x128b, .16x256b, .16x32bx2), .num and
  .pack::16b/.unpack::16b: ``ops.tcgen05_ldst`` (the fragment table in ``isa.tmem_fragments``).
- ``tcgen05.mma.cta_group::1.kind::{f16,tf32,f8f6f4} [d], a-desc, b-desc, idesc, enable-input-d`` (SS
  form: "tcgen05.mma"; descriptors in ``isa.tcgen05_desc``): D[M x N] (+)= A[M x K] x B[N x K]^T, K = 256
  bits of a row (16 f16/bf16, 8 tf32, 32 e4m3/e5m2 elements; in fp8 A and B may differ), issued by
  each executing thread, executed in issue order by the CTA's tensor core at a completion time the
  scheduler draws; operands are read and D written then. With M = 128, row ``i`` of D is TMEM lane
  ``i`` and column ``j`` is column ``col + j`` ("Data path layout" D); with M = 64, rows 16q..16q+15
  are lanes L0 + 32q .. +15 (L0 = 0 or 16; layout F). Shapes per "Matrix Shape" (Table 39): .cta_group::1
  M = 64 with N = 8..256 in steps of 8 or M = 128 with N in steps of 16; ::2 M = 128/256, N in steps of 16. An
  optional ``{disable-output-lane}`` vector before enable-input-d (4 words; 8 with .cta_group::2, which
  must be zero here) leaves TMEM lane ``32*i + j`` of D unwritten where bit ``j`` of word ``i`` is set
  (CuTe DSL always passes it).
- ``tcgen05.commit.cta_group::N.mbarrier::arrive::one[.multicast::cluster]`` ("tcgen05.commit"): one
  arrive on the mbarrier (in every CTA of the mask) once every tcgen05.mma the warp issued before it
  has completed.
- ``tcgen05.fence::before_thread_sync / after_thread_sync`` order tcgen05 operations around thread
  synchronisation; the emulator executes tcgen05 operations in a single order, so they are no-ops.

Numerics (an assumption, not a measurement: no Blackwell was available): each MMA sums the exact
products of its K step with the fp32 accumulator and rounds once to fp32 (round to nearest), whatever
the kind (tf32 operands drop their low 13 bits; e4m3/e5m2 decode exactly: ``wgmma.to_float64``).
A may come from tensor memory (the TS form ``[d], [a-tmem], b-desc, idesc, enable-input-d``): rows in
lanes 0..127, 32 / element-bits elements per column (8 columns a K step), the lower K index in the
lower bits. ``.cta_group::2``
spans the CTA pair of the cluster (``_issue``; alloc/dealloc per CTA, commit with a multicast mask): with
M = 256 each CTA holds 128 rows of D in layout A (row i in lane i); with M = 128 each CTA holds 64 rows in
layout B ("2x2": columns [0, N/2) of row r in lane r, [N/2, N) in lane 64 + r, over N/2 columns).
Unmodelled forms (a TMEM A with M = 64 or with a pair, the fp6/fp4 formats of kind::f8f6f4, an f16 D,
other kinds, sparse A, .ws) are ``Unsupported``.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu.errors import EmulationError, ProtocolError, Unsupported
from fa4_mlir.emu.isa import wgmma_layout as L
from fa4_mlir.emu.isa.tcgen05_desc import (ELEMENT_BITS, decode_instr_descriptor, decode_smem_descriptor,
                                           split_tmem_address)
from fa4_mlir.emu.machine import FULL, LANES, WAIT, Wait
from fa4_mlir.emu.memory import InFlight
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.bulk import shared_offset
from fa4_mlir.emu.ops.operands import address, reader
from fa4_mlir.emu.ops.sync import arrive
from fa4_mlir.emu.ops.tcgen05_ldst import compile_ld_st, tmem
from fa4_mlir.emu.ops.tcgen05_ldst import full_warp as _full_warp
from fa4_mlir.emu.ops.wgmma import to_float64
from fa4_mlir.emu.ptx import ast
from fa4_mlir.emu.tmem import Region

_SYNC = {"sync", "aligned"}
_KINDS = ("kind::f16", "kind::tf32", "kind::f8f6f4")
_STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32}


@handles("tcgen05")
def _tcgen05(op, ctx) -> None:
    mods = list(op.ins.modifiers)
    action = mods[0] if mods else ""
    rest = set(mods[1:])
    if action in ("fence::before_thread_sync", "fence::after_thread_sync") and not rest:
        before = action == "fence::before_thread_sync"

        def fence(w, m):  # orders nothing in this single-order machine; the race checks track it
            if w.launch.races is not None:
                (w.launch.races.before_thread_sync if before else w.launch.races.after_thread_sync)(w)
        op.run = fence
        return
    if action in ("wait::ld", "wait::st") and rest == _SYNC:
        op.run = _wait_ld if action == "wait::ld" else _wait_st
        return
    # cta_group::2 allocation: one warp of each CTA of the pair allocates in its own tensor memory; the
    # same allocation sequence in both gives both the same address, as the ISA requires.
    group = rest & {"cta_group::1", "cta_group::2"}
    if action == "alloc" and len(group) == 1 and rest - group == _SYNC | {"shared::cta", "b32"}:
        return _alloc(op, ctx)
    if action == "dealloc" and len(group) == 1 and rest - group == _SYNC | {"b32"}:
        return _dealloc(op, ctx)
    if action == "relinquish_alloc_permit" and len(group) == 1 and rest - group == _SYNC:
        def relinquish(w, m):
            _full_warp(w, op, m, "tcgen05.relinquish_alloc_permit")
            tmem(w.cta).relinquished = w.where(op)
        op.run = relinquish
        return
    if action in ("ld", "st"):
        return compile_ld_st(op, ctx, action, mods[1:])
    if action == "mma":
        return _mma(op, ctx, mods[1:])
    if action == "commit":
        return _commit(op, ctx, rest)
    raise unsupported(op)


# -- allocation --------------------------------------------------------------------------------------
def _alloc(op, ctx) -> None:
    dst, cols = op.ins.operands
    _, addr = address(ctx, dst, op.ins, "shared")
    rcols = reader(ctx, cols, "u32", op.ins)

    def run(w, m):
        _full_warp(w, op, m, "tcgen05.alloc")
        ncols, at = int(rcols(w)[0]), shared_offset(w, op, int(addr(w)[0]), "the destination")
        memory = tmem(w.cta)

        def attempt() -> bool:
            start = memory.try_alloc(ncols, w.where(op))
            if start is None:
                return False
            w.cta.smem.check(np.array([at]), 4, lambda i: w.where(op))
            w.cta.smem.buf[at:at + 4] = np.array([start], np.uint32).view(np.uint8)
            return True
        if attempt():
            return None
        w.wait = Wait(attempt, lambda: f"waits at {op.where} for {ncols} free tensor-memory columns "
                      f"(allocated: {memory.describe()})", retry=False, op=op)
        return WAIT
    op.run = run


def _dealloc(op, ctx) -> None:
    taddr, cols = (reader(ctx, o, "u32", op.ins) for o in op.ins.operands)

    def run(w, m):
        _full_warp(w, op, m, "tcgen05.dealloc")
        if w.launch.races is not None:  # every access to the columns must be ordered before
            column = int(taddr(w)[0]) & 0xFFFF
            w.launch.races.dealloc(w, w.cta, column, min(column + int(cols(w)[0]), 512))
        tmem(w.cta).dealloc(int(taddr(w)[0]), int(cols(w)[0]), w.where(op))
    op.run = run


# -- loads and stores ------------------------------------------------------------------------------------
def _wait_ld(w, m) -> None:
    if w.launch.races is not None:
        w.launch.races.wait_ld(w)
    if w.tmem_ld_reads:
        memory = tmem(w.cta)
        for region in w.tmem_ld_reads:
            memory.release(region)
        w.tmem_ld_reads = []


def _wait_st(w, m) -> None:
    if w.launch.races is not None:
        w.launch.races.wait_st(w)
    if w.tmem_st_pending:
        memory = tmem(w.cta)
        for region in w.tmem_st_pending:
            memory.release(region)
        w.tmem_st_pending = []


# -- mma and commit ------------------------------------------------------------------------------------
def _mma(op, ctx, mods) -> None:
    rest = [x for x in mods if x not in ("collector::a::discard", "collector::a::fill", "collector::a::use",
                                          "collector::a::lastuse", "collector::b::discard")]
    if len(rest) != 2 or rest[0] not in ("cta_group::1", "cta_group::2") or rest[1] not in _KINDS:
        raise unsupported(op, "only .cta_group::1/::2 with .kind::f16, .kind::tf32 or .kind::f8f6f4 is modelled")
    pair, kind = rest[0] == "cta_group::2", rest[1][len("kind::"):]
    ins = op.ins
    operands = list(ins.operands)
    words = 8 if pair else 4
    mask_op = operands.pop(4) if len(operands) == 6 and isinstance(operands[4], ast.Vector) else None
    if len(operands) != 5:
        raise unsupported(op, "expected [d-tmem], a-desc, b-desc, idesc, [{disable-output-lane},] enable-input-d "
                              "(no scale-input-d)")
    if mask_op is not None and len(mask_op.elements) != words:
        raise unsupported(op, f"the disable-output-lane vector of .{rest[0]} must have {words} elements, got "
                              f"{len(mask_op.elements)}")
    rmask = [reader(ctx, x, "b32", ins) for x in mask_op.elements] if mask_op is not None else []
    d_op, a_op, b_op, i_op, e_op = operands
    from_tmem = isinstance(a_op, ast.Address)  # the TS form: A in tensor memory
    _, d_addr = address(ctx, d_op, ins, "tmem")
    ra = address(ctx, a_op, ins, "tmem")[1] if from_tmem else reader(ctx, a_op, "b64", ins)
    rb = reader(ctx, b_op, "b64", ins)
    ri, re_ = reader(ctx, i_op, "b32", ins), reader(ctx, e_op, "pred", ins)
    line = op.where.split(":")[0]

    def run(w, m):
        for lane in (LANES if m is FULL else LANES[m]):
            _issue(w, op, line, int(d_addr(w)[lane]), int(ra(w)[lane]), int(rb(w)[lane]), int(ri(w)[lane]),
                   bool(re_(w)[lane]), from_tmem, pair, [int(r(w)[lane]) for r in rmask], kind=kind)
    op.run = run


def _pair(w, op):
    """The CTAs a .cta_group::2 operation spans: the even-rank CTA of the executing CTA's pair, then the odd."""
    ctas, rank = w.launch.cluster_ctas, w.cta.cluster_rank
    if len(ctas) < 2 or (rank | 1) >= len(ctas):
        raise ProtocolError(f"{w.where(op)}: .cta_group::2 needs a cluster with the CTA pair {rank & ~1}, "
                            f"{rank | 1}; the cluster has {len(ctas)} CTA(s)")
    return [ctas[rank & ~1], ctas[rank | 1]]


def _issue(w, op, line, taddr, a_desc, b_desc, idesc, accumulate, from_tmem, pair=False, disable=(),
           kind="f16") -> None:
    """One MMA. With .cta_group::2 it spans the pair: CTA v reads its M/2 rows of A and its N/2 rows of B
    at the same shared-memory offsets (the descriptors' values), and gets its M/2 rows of D in its own
    tensor memory at the same address (PTX ISA "tcgen05.mma", cta_group::2): with M = 256 row i in lane i
    (data-path layout A); with M = 128 (layout B, "2x2") row r's columns [0, N/2) in lane r and [N/2, N) in
    lane 64 + r, both halves at columns col .. col + N/2 - 1.
    ``disable`` is the disable-output-lane vector: bit b of word i set leaves TMEM lane 32*i + b of D
    unwritten (docs/emulator-tcgen05-isa.md section 6)."""
    where = w.where(op)
    if pair and any(disable):
        # Which of the 8 words address which CTA of the pair is not stated by the ISA; refuse to guess.
        raise Unsupported(f"{where}: a non-zero disable-output-lane vector is modelled for .cta_group::1 only, got "
                          f"{[hex(x) for x in disable]} with .cta_group::2")
    off = np.array([(disable[lane // 32] >> (lane % 32)) & 1 for lane in range(128)], bool) if any(disable) else None
    try:
        shape = decode_instr_descriptor(idesc, kind)
        da = None if from_tmem else decode_smem_descriptor(a_desc)
        db = decode_smem_descriptor(b_desc)
    except EmulationError as exc:
        raise type(exc)(f"{where}: {exc}") from None
    ctas = _pair(w, op) if pair else [w.cta]
    # PTX ISA "Matrix Shape" (Table 39), dense, no .ws: .cta_group::1 M = 64 with N = 8..256 in steps of 8,
    # M = 128 with N = 16..256 in steps of 16; .cta_group::2 M = 128 or 256 with N = 16..256 in steps of 16
    # (CUTLASS's SM100_MMA_*_SS / _2x1SM_SS static_asserts state the same).
    valid_m = (128, 256) if pair else (64, 128)
    if shape.m not in valid_m:
        raise ProtocolError(f"{where}: tcgen05.mma .{'cta_group::2' if pair else 'cta_group::1'} M must be "
                            f"{valid_m[0]} or {valid_m[1]}, got M = {shape.m} (instruction descriptor 0x{idesc:08x})")
    if pair and from_tmem:
        raise Unsupported(f"{where}: .cta_group::2 is modelled with A in shared memory only, got A in tensor memory "
                          f"(M = {shape.m})")
    step = 8 if shape.m == 64 and not pair else 16
    if shape.n % step or not step <= shape.n <= 256:
        raise ProtocolError(f"{where}: tcgen05.mma .{'cta_group::2' if pair else 'cta_group::1'} N must be a "
                            f"multiple of {step} in [{step}, 256] for M = {shape.m}, got {shape.n}")
    if shape.d_type != "f32":
        raise Unsupported(f"{where}: tcgen05.mma D format must be f32 to be modelled, got {shape.d_type}")
    if kind == "tf32" and not (shape.a_k_major and shape.b_k_major):
        # PTX ISA "tcgen05.mma" swizzling table: a transposed tf32 operand needs the 128-byte swizzle with
        # 32-byte atomicity (descriptor mode 1), which the descriptor decode already reports as not modelled.
        raise ProtocolError(f"{where}: a transposed (MN-major) .kind::tf32 operand must use the 128B swizzle "
                            f"with 32-byte atomicity, got A {'K' if shape.a_k_major else 'MN'}-major, B "
                            f"{'K' if shape.b_k_major else 'MN'}-major with another mode")
    lane, col = split_tmem_address(taddr)
    n, k, eb = shape.n, shape.k, ELEMENT_BITS[shape.a_type] // 8  # K: 256 bits of each row of A and B
    a_cols = k * eb // 4  # a TMEM A's 32-bit columns per row: always 8
    m_rows, n_part = shape.m // len(ctas), n // len(ctas)  # per CTA
    what = f"the tcgen05.mma at {line} ({w.name})"
    remedy = "wait on the mbarrier its tcgen05.commit arrives on (then tcgen05.fence::after_thread_sync) first"
    width = n  # the TMEM columns D spans in each lane
    if m_rows == 128:
        # "Data path layout" D (M = 128, cta_group::1) and A (M = 256, cta_group::2): row i in lane i.
        if lane:
            raise ProtocolError(f"{where}: with {m_rows} rows per CTA the D address must be at lane 0, got lane {lane}")
        rows_at = np.arange(128)
        blocks = [(0, 128)]
    elif pair:
        # "Data path layout" B (M = 128, cta_group::2, dense A; "2x2" datapath organization, lane alignment 0):
        # each CTA's 64 rows r of D fill all 128 lanes over N/2 columns: D[r][j] in lane r + 64 * (j >= N/2),
        # column col + j % (N/2) (complete() folds the column halves onto the lane halves).
        if lane:
            raise ProtocolError(f"{where}: with .cta_group::2 and M = 128 (data-path layout B) the D address must "
                                f"be at lane 0, got lane {lane}")
        rows_at = np.arange(128)
        blocks = [(0, 128)]
        width = n // 2
    else:
        # Layout F (M = 64, cta_group::1): rows 16q..16q+15 in lanes L0 + 32q .. +15 of each warp quarter q,
        # L0 = 0 or 16 (the half of the quarter).
        if lane not in (0, 16):
            raise ProtocolError(f"{where}: with M = 64 the D address lane must be 0 or 16, got lane {lane}")
        rows_at = lane + (np.arange(64) % 16) + 32 * (np.arange(64) // 16)
        blocks = [(lane + 32 * q, lane + 32 * q + 16) for q in range(4)]
    a_col = None
    if from_tmem:
        # A (128 x K elements) in lanes 0..127, 4 / element-bytes elements per 32-bit column, the lower K
        # index in the lower bits ("Data path layout": M = 128, A from tensor memory; "8-bit containers
        # contiguously packed in a 32-bit word" for 8-bit types).
        a_lane, a_col = split_tmem_address(a_desc)
        if m_rows != 128:
            raise Unsupported(f"{where}: an A operand in tensor memory is modelled for M = 128 only, got M = {m_rows}")
        if a_lane or not shape.a_k_major:
            raise ProtocolError(f"{where}: an A operand in tensor memory must start at lane 0 and be K-major, got "
                                f"lane {a_lane}, {'K' if shape.a_k_major else 'MN'}-major")
    owned = []  # per CTA: (memory, regions, smem, access)
    for cta in ctas:
        memory = tmem(cta)
        memory.check_allocated(col, col + width, where)
        regions = []
        for lo, hi in blocks:
            memory.guard(lo, hi, col, col + width, True, where, by_mma=True)
            if w.launch.races is not None:
                w.launch.races.tmem(w, cta, lo, hi, col, col + width, "mma")
            regions.append(memory.track(Region(lo, hi, col, col + width, True, what, remedy, mma=True)))
        if a_col is not None:
            memory.check_allocated(a_col, a_col + a_cols, where)
            memory.guard(0, 128, a_col, a_col + a_cols, False, where, by_mma=True)
            if w.launch.races is not None:
                w.launch.races.tmem(w, cta, 0, 128, a_col, a_col + a_cols, "mma_a")
            regions.append(memory.track(Region(0, 128, a_col, a_col + a_cols, False, what, remedy, mma=True)))
        try:
            index = L.operand_addresses(db, n_part, k, eb, shape.b_k_major)
            if da is not None:
                index = np.concatenate([L.operand_addresses(da, m_rows, k, eb, shape.a_k_major), index])
        except EmulationError as exc:
            raise type(exc)(f"{where}: {exc}") from None
        access = cta.smem.track(InFlight(index.min(), index.max() + 1, False, what,
                                         "wait on the mbarrier its tcgen05.commit arrives on first", index=index),
                                where)
        owned.append((memory, regions, cta.smem, access))

    def complete():
        a_parts, b_parts = [], []
        for memory, regions, smem, access in owned:
            for region in regions:
                memory.release(region)
            smem.release(access)
            try:
                if da is None:
                    a_bits = np.ascontiguousarray(memory.cells[:, a_col:a_col + a_cols]).view(_STORAGE[eb])
                else:
                    a_bits = L.load_operand(smem.buf, da, m_rows, k, eb, shape.a_k_major, transposable=(1, 2))
                a_parts.append(to_float64(a_bits, shape.a_type))
                b_bits = L.load_operand(smem.buf, db, n_part, k, eb, shape.b_k_major, transposable=(1, 2))
                b_parts.append(to_float64(b_bits, shape.b_type))
            except EmulationError as exc:
                raise type(exc)(f"{where}: {exc}") from None
        b = np.concatenate(b_parts)  # CTA v holds rows v*N/2 .. of B (its columns of D)
        if shape.negate_b:
            b = -b
        for (memory, _, _, _), a in zip(owned, a_parts):
            d = (-a if shape.negate_a else a) @ b.T
            if width != n:  # layout B: columns [0, N/2) in lanes 0..63, [N/2, N) in lanes 64..127
                d = np.concatenate([d[:, :width], d[:, width:]])
            if accumulate:
                d += memory.cells[rows_at, col:col + width].view(np.float32).astype(np.float64)
            keep = np.ones(len(rows_at), bool) if off is None else ~off[rows_at]
            memory.cells[rows_at[keep], col:col + width] = d[keep].astype(np.float32).view(np.uint32)

    lead, launch = ctas[0], w.launch
    done_at = max(lead.tc_tail, launch.now + launch.delay())  # the tensor core executes MMAs in issue order
    lead.tc_tail = done_at
    w.tc_tail = done_at
    launch.schedule(complete, delay=done_at - launch.now)


def _commit(op, ctx, rest: set) -> None:
    """One arrive (count 1) once the executing thread's earlier MMAs complete, on the mbarrier at a
    shared::cluster address or, with .multicast::cluster, at the same offset in every CTA whose rank bit
    is set in the 16-bit mask (PTX ISA "tcgen05.commit")."""
    known = {"cta_group::1", "cta_group::2", "mbarrier::arrive::one", "shared::cluster", "shared::cta", "b64",
             "multicast::cluster"}
    if rest - known or "mbarrier::arrive::one" not in rest or len(rest & {"cta_group::1", "cta_group::2"}) != 1:
        raise unsupported(op, "expected .cta_group::N.mbarrier::arrive::one[.shared::cluster][.multicast::cluster]")
    ins = op.ins
    multicast = "multicast::cluster" in rest
    if len(ins.operands) != (2 if multicast else 1):
        raise unsupported(op, f"expected the mbarrier{' and the CTA mask' if multicast else ''}")
    _, addr = address(ctx, ins.operands[0], ins, "shared")
    rmask = reader(ctx, ins.operands[1], "b16", ins) if multicast else None

    def run(w, m):
        where = w.where(op)
        for lane in (LANES if m is FULL else LANES[m]):
            value = int(addr(w)[lane])
            cta, at = w.cta.peer(value, where)
            if multicast:
                mask = int(rmask(w)[lane])
                ctas = [c for c in w.launch.cluster_ctas if mask >> c.cluster_rank & 1]
                if mask >> len(w.launch.cluster_ctas):
                    raise ProtocolError(f"{where}: the commit's CTA mask 0x{mask:x} names ranks beyond the "
                                        f"cluster's {len(w.launch.cluster_ctas)} CTA(s)")
            else:
                ctas = [cta]
            bars = [c.mbarrier(at, where) for c in ctas]
            launch = w.launch
            when = max(w.tc_tail, launch.now) + 1  # after the warp's MMAs so far complete
            message = launch.races.commit(w) if launch.races is not None else None

            def fire(bars=bars, w=w, message=message):
                for bar in bars:
                    if message is not None:
                        launch.races.deliver(bar, message)
                    arrive(w, bar, 1, where)
            launch.schedule(fire, delay=when - launch.now)
    op.run = run
