"""The packed kernels' compacted tile schedule: which sequence and query tile a CTA takes (issue 26).

A grid of ceil(max_seqlen_q / BM) x H x B CTAs gives every sequence the longest one's tiles: in a ragged
batch most of them exit at once, each still holding an SM slot for its prologue, and the batch order puts
the last sequence's tiles in the tail. The compacted grid has one CTA per query tile of some sequence: x
counts *slots* over the sequences' tiles, back to back in batch order (sequence b's ceil(Sq_b / BM) tiles
from slot P_b = sum of the tile counts before it), and a CTA finds its (b, t) on the device (``locate``).

Host bound (``kernels.attention.varlen_slots``, host side: the runtime imports it without MLIR): sum_b
ceil(Sq_b / BM) <= ceil(total_q / BM) + B - 1 (each sequence's last tile adds at most one tile to the packed
rows' count, and the first sequence with a partial tile none), which needs only total_q and B, known to the
host without reading the lengths; and <= B ceil(max_seqlen_q / BM), the smaller one for equal lengths of whole
tiles. Slots past the real count find no tile: their CTAs do nothing (no barrier wait, nothing written).

``locate``: a warp-parallel scan (FlashAttention-3's varlen scheduler): each lane of a warp takes one of 32
sequences, loads its prefix sums (``invariant``: read-only memory, ld.global.nc; the keys' too, so that no
load follows the scan) and counts its query tiles, the warp forms the inclusive prefix sums of the counts
(five ``shfl.sync.up`` steps), the chunk's total from lane 31 (``shfl.sync.idx``) says whether the slot falls
in this chunk, and a ballot of "my prefix <= the slot's offset" counts the lanes before the slot's sequence:
``popc`` is its lane, whose tile count, prefix and values ``shfl.sync.idx`` hands to every lane. Otherwise
the next 32 sequences follow (an ``scf.while``): B in the thousands costs B / 32 rounds of a few independent
loads per lane and a dozen warp steps, with no shared memory and no barrier. Every result is the same in
every thread (the protocol verifier proves it: ``fa4_mlir.protocol.uniformity``), so the roles may each
compute their own copy, which keeps the values out of the registers live across the roles' dispatch.

Order (``hopper_varlen.place_slot``). Causal, a tile's work grows with its rows' end, so each sequence's
tiles run last rows first (``reverse``), and the slots are the grid's linear index with the heads minor: the
CTAs start heavy-to-light within each sequence across every head, and the last to start are the last
sequence's short tiles. One head after another instead starts the last head's longest tiles within the
final wave. A simulation of the dispatch (``bench/varlen_order.py``: 132 SMs, CTAs started in linear order,
a CTA's time its K/V tiles plus a prologue; bench/varlen.py's ragged batches, 7-11 sequences of 1..4096 rows,
16 or 32 heads) ends this order 0.2-1.3% past the ideal (every CTA's time summed over the SMs), the old grid
2.4-8.2% and heads major 3.9-9.0%; every tile sorted by its work, longest first, would end 0.1-0.4% past
it. That sort would cost each CTA a search over work levels, each step a scan over all B sequences: the last
percent does not pay for it. Non-causal, every tile of a sequence does the same work: only sorting the
sequences by length would help (0.3-1.6% against 1.3-5.4% for the other orders), which needs the same
global sort; a head's tiles stay side by side (y = head), sharing its K/V in L2.

Every load's index is clamped into its array (``cu_seqlens`` has B + 1 entries, per-sequence arrays B): the
lanes past the last sequence read the last entry and count no tile; a slot past the real count leaves the
loop with ``found`` false and every value 0 (the roles then do nothing: ``found`` is their ``live``).
"""

from __future__ import annotations

import dataclasses

from fa4_mlir import dsl
from fa4_mlir._mlir import ir, scf
from fa4_mlir.dsl.location import here
from fa4_mlir.dsl.names import name

WARP = 32
FULL = -1  # every lane of the warp
IDX_CLAMP = 0x1F  # shfl.sync.idx: lanes 0..31, one segment


@dataclasses.dataclass
class Tile:
    """What ``locate`` finds (i32 Values, the same in every thread; ``found`` an i1)."""

    found: dsl.Value  # the slot holds a tile (else the rest is 0)
    seq: dsl.Value  # sequence b
    q_start: dsl.Value  # the tile's first row in the sequence: t BM (reversed: (tiles - 1 - t) BM)
    values: list  # ``per_lane``'s values for sequence b


def locate(slot, batch, bm: int, per_lane, width: int, reverse: bool = False, rows=None, total=None) -> Tile:
    """Sequence and query tile of ``slot`` (module docstring); ``batch`` is B. ``per_lane(i)`` builds the
    ``width`` values a lane holds for its sequence i (its loads clamped: ``clamped``), whose sequence-b copies
    the result carries; its second must be Sq_i (the tile counts come from it). ``reverse``: a sequence's
    tiles in reverse order (its last rows first: causal, the longest rows). The values leave the scan already
    combined (Sq_b, not cu_seqlens_q[b] and [b + 1]): the terms the protocol verifier decides branches over
    then hold few unknowns, and its search for values that take a branch stays short.

    ``rows`` and ``total`` (max_seqlen_q and total_q, i32 Values): where total = B rows, every sequence has
    ``rows`` rows (none has more: the ops check the lengths against max_seqlen_q), so slot s is sequence
    s / T, tile s % T of T = ceil(rows / BM), and ``_direct`` finds it without the scan: a CTA's tile is then
    one round of loads away, not loads and a dozen dependent warp steps (its load warp issues Q's TMA after
    it; equal lengths of 1024 at head dim 64 ran 0.93-0.95x the dense kernel with the scan, 0.95-0.99x
    without). A caller whose registers are full leaves them None: the scan alone (both ways cost registers)."""
    if rows is not None:
        return _either(slot, batch, bm, per_lane, width, reverse, rows, total)
    i32, i1 = dsl.i32(), ir.IntegerType.get_signless(1)
    zero = dsl.Value(0).value
    types = [i32, i32, i1] + [i32] * (2 + width)
    init = [zero, zero, dsl.arith.constant(i1, 0)] + [zero] * (2 + width)
    loop = scf.WhileOp(types, init, loc=here())
    before = ir.Block.create_at_start(loop.before, types)
    with ir.InsertionPoint(before):
        first, found = dsl.Value(before.arguments[0]), before.arguments[2]
        more = dsl.arith.andi(_slt(first, batch).value, dsl.arith.xori(found, dsl.arith.constant(i1, 1)))
        scf.ConditionOp(more, list(before.arguments), loc=here())
    after = ir.Block.create_at_start(loop.after, types)
    with ir.InsertionPoint(after):
        state = [dsl.Value(a) if a.type == i32 else a for a in after.arguments]
        scf.YieldOp(_chunk(slot, batch, bm, per_lane, reverse, state), loc=here())
    name(loop.results[0], "sched")  # %sched#0 ..: first, tiles before, found, b, q_start, the values
    r = list(loop.results)
    return Tile(found=dsl.Value(r[2]), seq=dsl.Value(r[3]), q_start=dsl.Value(r[4]),
                values=[dsl.Value(v) for v in r[5:]])


def _either(slot, batch, bm: int, per_lane, width: int, reverse: bool, rows, total) -> Tile:
    """``locate``'s two ways in an ``scf.if`` on total = B rows (in 64 bits: the product of two i32 may wrap
    onto total_q): ``_direct`` where it holds, else the scan."""
    i32, i64, i1 = dsl.i32(), ir.IntegerType.get_signless(64), ir.IntegerType.get_signless(1)
    wide = [dsl.arith.extsi(i64, dsl.Value(v).value) for v in (batch, rows, total)]
    equal = dsl.arith.cmpi(dsl.arith.CmpIPredicate.eq, dsl.arith.muli(wide[0], wide[1]), wide[2])
    branch = scf.IfOp(equal, [i1, i32, i32] + [i32] * width, has_else=True, loc=here())
    for block, way in ((branch.then_block, _direct), (branch.else_block, locate)):
        with ir.InsertionPoint(block):
            tile = way(slot, batch, bm, per_lane, width, reverse) if way is locate else \
                way(slot, batch, bm, per_lane, rows, reverse)
            scf.YieldOp([tile.found.value, tile.seq.value, tile.q_start.value] + [v.value for v in tile.values],
                        loc=here())
    name(branch.results[0], "tile")  # %tile#0 ..: found, b, q_start, the values
    r = list(branch.results)
    return Tile(found=dsl.Value(r[0]), seq=dsl.Value(r[1]), q_start=dsl.Value(r[2]),
                values=[dsl.Value(v) for v in r[3:]])


def _direct(slot, batch, bm: int, per_lane, rows, reverse: bool) -> Tile:
    """Slot s of B sequences of ``rows`` rows each: sequence s / T, tile s % T of T = ceil(rows / BM) (at least
    1: no division by 0), its values ``per_lane(b)`` (every lane loads the same, clamped, addresses); found
    where b < B and the tile's first row is inside the sequence (which a bound below a real length, the ops'
    error, would break: the kernel then skips rows, never reads past an array), else every value 0."""
    tiles = dsl.Value(dsl.arith.maxsi(((dsl.Value(rows) + (bm - 1)) // bm).value, dsl.Value(1).value))
    seq = slot // tiles
    tile = slot - seq * tiles
    if reverse:
        tile = tiles - 1 - tile
    values = per_lane(seq)
    start = tile * bm
    found = dsl.Value(dsl.arith.andi(_slt(seq, batch).value, _slt(start, values[1]).value))
    zero = dsl.Value(0).value
    kept = [dsl.Value(dsl.arith.select(found.value, dsl.Value(v).value, zero)) for v in [seq, start, *values]]
    return Tile(found=found, seq=kept[0], q_start=kept[1], values=kept[2:])


def clamped(array, index, last) -> dsl.Value:
    """``array[min(index, last)]`` (int32, read-only: ld.global.nc): a lane past the last sequence reads the
    last entry (``last`` B for a B + 1 array, B - 1 for a B array)."""
    i32 = dsl.i32()
    at = dsl.Value(dsl.arith.minsi(dsl.Value(index).value, dsl.Value(last).value))
    return dsl.Value(dsl.llvm.load(i32, dsl.element_ptr(array, at, i32), invariant=True))


def sequence_values(arg, paged: bool):
    """``locate``'s ``per_lane`` for the packed kernels of both targets and its width: sequence i's (q0, Sq, k0,
    Sk) from ``cu_seqlens_q`` / ``cu_seqlens_k``; ``paged`` (keys in pages), (q0, Sq, Sk = seqused_k[i])."""
    def per_lane(i):
        q0 = clamped(arg.cu_seqlens_q, i, arg.batch)
        rows = clamped(arg.cu_seqlens_q, i + 1, arg.batch) - q0
        if paged:
            return [q0, rows, clamped(arg.seqused_k, i, arg.batch - 1)]
        k0 = clamped(arg.cu_seqlens_k, i, arg.batch)
        return [q0, rows, k0, clamped(arg.cu_seqlens_k, i + 1, arg.batch) - k0]
    return per_lane, 3 if paged else 4


def _chunk(slot, batch, bm: int, per_lane, reverse: bool, state: list) -> list:
    """One round of the scan over sequences [first, first + 32): the next state (first + 32, the tiles before
    them, whether the slot is among theirs and, if so, its sequence, tile start row and values)."""
    first, base, _, seq, start, *kept = state
    i32 = dsl.i32()
    lane = dsl.Value(dsl.nvvm.read_ptx_sreg_laneid(i32))
    values = per_lane(first + lane)
    count = dsl.Value(dsl.arith.divsi(dsl.arith.maxsi((values[1] + (bm - 1)).value, dsl.Value(bm - 1).value),
                                      dsl.Value(bm).value))  # the query tiles: 0 past the last sequence
    prefix = count  # inclusive prefix sums over the lanes
    for step in (1, 2, 4, 8, 16):
        up = dsl.Value(dsl.nvvm.shfl_sync(i32, dsl.Value(FULL).value, prefix.value, dsl.Value(step).value,
                                          dsl.Value(0).value, dsl.nvvm.ShflKind.up))
        prefix = prefix + dsl.Value(dsl.arith.select(_slt(lane, step).value, dsl.Value(0).value, up.value))
    total = _from_lane(prefix, dsl.Value(WARP - 1))
    offset = slot - base  # >= 0: the rounds before passed only slots past their tiles
    hit = _slt(offset, total)
    below = dsl.Value(dsl.nvvm.vote_sync(i32, dsl.Value(FULL).value, _sle(prefix, offset).value,
                                         dsl.nvvm.VoteSyncKind.ballot))
    at = dsl.Value(dsl.llvm.intr_ctpop(below.value))  # the first lane whose prefix passes the offset (32: none)
    tile = offset - _from_lane(prefix - count, at)  # the slot's tile in its sequence
    if reverse:
        tile = _from_lane(count, at) - 1 - tile
    found = [first + at, tile * bm] + [_from_lane(v, at) for v in values]
    chosen = [dsl.Value(dsl.arith.select(hit.value, new.value, old.value)) for new, old in
              zip(found, [seq, start, *kept])]
    return [(first + WARP).value, (base + total).value, hit.value] + [v.value for v in chosen]


def _from_lane(value, lane) -> dsl.Value:
    """``value`` in lane ``lane`` (the same in every lane: shfl.sync.idx, one segment)."""
    return dsl.Value(dsl.nvvm.shfl_sync(dsl.i32(), dsl.Value(FULL).value, dsl.Value(value).value,
                                        dsl.Value(lane).value, dsl.Value(IDX_CLAMP).value, dsl.nvvm.ShflKind.idx))


def _slt(a, b) -> dsl.Value:
    return dsl.Value(dsl.arith.cmpi(dsl.arith.CmpIPredicate.slt, dsl.Value(a).value, dsl.Value(b).value))


def _sle(a, b) -> dsl.Value:
    return dsl.Value(dsl.arith.cmpi(dsl.arith.CmpIPredicate.sle, dsl.Value(a).value, dsl.Value(b).value))
