"""The sm_90a attention's load warp over a paged K/V cache (``AttentionConfig.page_size``): K and V are
caches [num_pages, page_size, Hk, D] (tensor maps of dims (D, Hk, page_size, num_pages), box rows
``config.page_chunk`` = gcd(BN, page_size)), and sequence b's key j lies in row j % page_size of page
``block_table[b * pages_per_seq + j / page_size]``. The rest of the kernel is the packed one's
(``hopper_varlen``: the sequence's values, bottom-right causal, rows that see no key).

Each K or V tile is BN / chunk TMA loads per 64-column block (one barrier and stage: the stage's
transaction bytes are the dense tile's), chunk i of tile t taking keys [t BN + i chunk, ... + chunk),
which lie inside one page, to ``chunk`` rows further into the block. The block table entries are
read-only loads (ld.global.nc) of the one elected thread, each read after the stage's wait (a debug build
checks each against ``num_pages``: ``paged.read_entry``). A tile of at
most ``UNROLLED`` loads (chunks x blocks: a page holds the tile, or few chunks) is issued unrolled and its
entries are carried from its K load to its V load (K_j and V_j read the same pages; the warp loads
K_{j+1} ahead of V_j). Larger tiles are issued chunk by chunk in a loop (one entry and a TMA load per
block an iteration; V reads its entries again, L1 hits): unrolled, ptxas takes all the loads' operands
at once and the load warp spills. The loop's trip count is made opaque to LLVM (which would unroll a
constant one), and the paged kernel's load warp has 40 registers (consumers 232; ``hopper``).

A chunk past the sequence's last page (the last tile's keys past Sk_b, up to the tile's end) must still
deliver its bytes (the stage's transaction count is fixed): its page index is clamped to the last page,
ceil(Sk_b / page_size) - 1 (entries past it may hold anything), and its keys are masked like every key
past Sk_b. A tile's first chunk never needs the clamp (the tile has a key below Sk_b), so a tile of one
chunk has none.
"""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir.dsl.names import name, name_all
from fa4_mlir.kernels.attention.paged import read_entry

# TMA loads of a K/V tile (chunks x 64-column blocks) issued unrolled, at most; more go in a loop over the chunks
# (unrolled, ptxas takes their operands at once and the load warp spills)
UNROLLED = 4


class PagedLoads:
    """The load warp's K and V tiles from the block table's pages (built into the open elected region)."""

    def __init__(self, k, g):
        self.k, self.g, c, t = k, g, g.c, g.t
        self.page, self.chunk, self.bn = c.page_size, c.page_chunk, t.bn
        self.chunks = self.bn // self.chunk
        arg = g.arg
        i32 = dsl.i32()
        self.table = dsl.element_ptr(arg.block_table, g.seq * arg.pages_per_seq, i32)  # sequence b's row
        # the sequence's last page (Sk_b >= 1 where the warp loads: its trip count is > 0; split KV: the last
        # page of the CTA's keys, kv_limit the range's end)
        self.last = name(dsl.Value(dsl.arith.divsi((g.kv_limit - 1).value, dsl.Value(self.page).value)),
                         "last_page") if self.chunks > 1 else None

    def entries_of(self, tile) -> list:
        """Tile ``tile``'s block table entries (the pages' indices in the cache), one per distinct page
        position: ``bn / page`` (tiles span pages), 1 (a page spans tiles, or holds the tile), else one a
        chunk; as functions, each reading its entry when called (after the stage's wait: read earlier, they
        would all be live at once)."""
        if self.bn % self.page == 0:  # chunk == page: chunk i is page tile * bn / page + i
            per = self.bn // self.page
            return [lambda i=i: self._entry(tile * per + i) for i in range(per)]
        if self.chunks == 1:  # chunk == bn: the tile lies in page tile * bn / page
            return [lambda: self._entry(self._div(tile * self.bn, self.page))]
        return [lambda i=i: self._entry(self._div(tile * self.bn + i * self.chunk, self.page))
                for i in range(self.chunks)]

    def _div(self, a, b: int):
        return dsl.Value(dsl.arith.divsi(dsl.Value(a).value, dsl.Value(b).value))

    def _entry(self, page):
        """``block_table[b, page]`` (page clamped to the sequence's last: a chunk past its keys); invariant:
        read-only in the kernel."""
        if self.last is not None:
            page = dsl.Value(dsl.arith.minsi(dsl.Value(page).value, self.last.value))
        return read_entry(self.k, self.table, self.g.seq, page, self.g.arg.num_pages)

    def rows_of(self, tile) -> list:
        """Row in its page of each chunk's first key, with the index of its entry (``entries_of``)."""
        if self.bn % self.page == 0:
            return [(dsl.Value(0), i) for i in range(self.chunks)]
        if self.chunks == 1:
            return [(dsl.Value(dsl.arith.remsi((tile * self.bn).value, dsl.Value(self.page).value)), 0)]
        return [(dsl.Value(dsl.arith.remsi((tile * self.bn + i * self.chunk).value, dsl.Value(self.page).value)), i)
                for i in range(self.chunks)]

    def load(self, which: str, tile, state, entries=None) -> list:
        """Acquire the state's stage of the K or V ring, load tile ``tile`` chunk by chunk into it (its
        block table ``entries``, Values: read here when None), step; returns the entries used."""
        g = self.g
        ring, full, tensor_map = (g.kring, g.kfull, g.arg.k) if which == "k" else (g.vring, g.vfull, g.arg.v)
        nbytes = g.t.kv_stage_bytes
        state.producer_acquire()
        state.producer_commit(tx_bytes=nbytes)
        buf = dsl.fa4.smem_stage(ring, state.stage, bytes=nbytes)
        read = self.entries_of(tile) if entries is None else None
        used = list(entries) if entries is not None else [None] * len(read)
        per_block = g.row // g.t.elem_bytes
        for i, (row, e) in enumerate(self.rows_of(tile)):
            if used[e] is None:
                used[e] = read[e]()
            for blk in range(g.blocks):
                coords = [dsl.Value(blk * per_block).value, g.kvh.value, row.value, used[e].value]
                dsl.fa4.tma_load(tensor_map, buf, full, state.stage, coords, bytes=self.chunk * g.row,
                                 dst_offset=blk * self.bn * g.row + i * self.chunk * g.row)
        state.step()
        return used

    def load_looped(self, k, which: str, tile, state) -> None:
        """``load`` with the chunks in a loop (one entry and ``g.blocks`` TMA loads an iteration), into chunk
        buffers of the stage; the trip count is ``chunks + min(num_pages, 0)`` (num_pages >= 1), which LLVM
        cannot fold: it unrolls a constant one, and ptxas then spills."""
        g = self.g
        bound = dsl.Value(dsl.arith.minsi(g.arg.num_pages.value, dsl.Value(0).value)) + self.chunks
        ring, full, tensor_map = (g.kring, g.kfull, g.arg.k) if which == "k" else (g.vring, g.vfull, g.arg.v)
        nbytes, cbytes = g.t.kv_stage_bytes, self.chunk * g.row
        state.producer_acquire()
        state.producer_commit(tx_bytes=nbytes)
        per_block = g.row // g.t.elem_bytes
        first = dsl.Value(state.stage) * (nbytes // cbytes)  # the stage's first chunk buffer
        with k.range(0, bound) as i:
            key = tile * self.bn + i * self.chunk
            entry = self._entry(self._div(key, self.page))
            row = dsl.Value(dsl.arith.remsi(key.value, dsl.Value(self.page).value))
            for blk in range(g.blocks):
                buf = dsl.fa4.smem_stage(ring, (first + blk * self.chunks + i).value, bytes=cbytes)
                coords = [dsl.Value(blk * per_block).value, g.kvh.value, row.value, entry.value]
                dsl.fa4.tma_load(tensor_map, buf, full, state.stage, coords, bytes=cbytes)
        state.step()


def load_kv(k, g, ks, vs) -> None:
    """``hopper._load_kv`` over the paged cache: K_0, then per tile j K_j ahead of V_{j-1}, then the last V.
    Tiles of at most ``UNROLLED`` TMA loads are issued unrolled, V_{j-1} taking K_{j-1}'s block table
    entries (carried through the loop); larger ones chunk by chunk in a loop, V reading its entries again.
    Split KV: the tiles are numbered from the sequence's first key (tile t: keys t BN .., so the block table
    positions are absolute), the CTA's from kv_begin / BN (its range is whole tiles): the loop's bounds carry
    the range, no key offset is added per load (the warp has 56 registers there: ``hopper.SPLIT_REGISTERS``)."""
    loads = PagedLoads(k, g)
    first, start, stop = dsl.Value(0), 1, g.n_tiles
    if g.kv_begin is not None:
        first = name(dsl.Value(dsl.arith.divsi(g.kv_begin.value, dsl.Value(g.bn).value)), "ld_first")
        start, stop = first + 1, first + g.n_tiles
    if loads.chunks * g.blocks > UNROLLED:
        loads.load_looped(k, "k", first, ks)
        with k.range(start, stop, carry=[ks, vs]) as j:
            name_all([ks.stage, ks.phase, vs.stage, vs.phase], ["ld_ks", "ld_kph", "ld_vs", "ld_vph"])
            loads.load_looped(k, "k", j, ks)
            loads.load_looped(k, "v", j - 1, vs)
        name(vs.stage, "ld_loop")
        loads.load_looped(k, "v", stop - 1, vs)
        return
    held = [dsl.Var(e) for e in loads.load("k", first, ks)]
    with k.range(start, stop, carry=[ks, vs, *held]) as j:
        name_all([ks.stage, ks.phase, vs.stage, vs.phase], ["ld_ks", "ld_kph", "ld_vs", "ld_vph"])
        entries = loads.load("k", j, ks)
        loads.load("v", j - 1, vs, [h.value for h in held])
        for h, e in zip(held, entries):
            h.value = e
    name(vs.stage, "ld_loop")
    loads.load("v", stop - 1, vs, [h.value for h in held])
