"""A paged K/V cache (``AttentionConfig.page_size``) in the sm_100a FA4 kernel's load warp, built through
``fa4_mlir.dsl`` (imported when a kernel is built: this module imports without MLIR): the TMA path, pages of
a power of two from 16 keys (the others are gathered row by row: ``AttentionConfig.page_gather``, ``gather``).

The K and V caches are [num_pages, page_size, Hk, D], TMA maps over dims (D, Hk, page_size, num_pages)
whose box is ``chunk`` = gcd(bn, page_size) rows (``config.page_chunk``): a chunk never crosses a page.
K/V tile t (keys [t * bn, t * bn + bn) of sequence b) is bn / chunk loads, chunk i of key
j = t * bn + i * chunk from row j % page_size of page block_table[b * pages_per_seq + j / page_size], each
into its place in the stage (chunk * row bytes apart inside each 64-column block: the K sub-stage's and
the V stage's blocks are bn rows each), all on the stage's barrier with its fixed transaction count.

A tile's chunks past the sequence's last page (ceil(Sk_b / page_size) pages) still have to deliver their
bytes, so their page index is clamped to the last page (the entries past it may hold anything, e.g. -1);
the keys they bring are masked (-inf) like every key past Sk_b. The load role runs only with a trip
count > 0, hence Sk_b >= 1 there and the last page (Sk_b - 1) / page_size is >= 0. Split KV (``split``): the
CTA's tile t holds keys kv_begin + t * bn.. of its range (kv_begin a multiple of bn); the page index and its
clamp are on those absolute keys.

The K and V tiles of one tile share their pages: the load warp reads the tile's block-table entries once
(``Pages.tile``) at the top of its loop iteration, before the K stage's acquire (the loads' latency
overlaps the wait), and issues both tiles' loads from them, chunk-major (each page's column blocks
together). Of the orders tried, this one left ptxas the fewest spills (reading the entries after
the acquire, block-major issue, or reading them again for V all spilled more: the load warp has 64
registers, and its pressure spills values the whole kernel shares).
"""

from __future__ import annotations

import types


ENTRY_CHECK = ("fa4 debug: block_table entry out of range: sequence %d, page %d, entry %d (num_pages %d)")


def read_entry(k, row, seq, page, num_pages, invariant: bool = True):
    """``row[page]``, a block-table entry, which a debug build checks against the cache's ``num_pages``
    (``fa4.debug_check``: it traps naming the sequence ``seq`` and the page; a release build reads it unchecked:
    the op checked the table before the launch). ``invariant``: an ld.global.nc (the kernel never writes the
    table), which LLVM may also move freely; the sm_100a load warp keeps plain loads, in the order it issues
    them (invariant, LLVM hoists a tile's entries together and ptxas spills at pages of 16 and 32)."""
    from fa4_mlir import dsl

    entry = dsl.Value(dsl.llvm.load(dsl.i32(), dsl.element_ptr(row, page, dsl.i32()), invariant=invariant))
    k.debug_check(entry < num_pages, ENTRY_CHECK, seq, page, entry, num_pages)  # unsigned: negatives fail too
    return entry


class Pages:
    """The load warp's view of sequence b's block-table row: ``tile(t)`` gives each chunk's (page, row)."""

    def __init__(self, k, x, c, bn: int):
        from fa4_mlir import dsl

        self.k, self.dsl, self.x, self.c, self.bn = k, dsl, x, c, bn
        self.chunk, self.page = c.page_chunk, c.page_size
        arg = x.arg
        # &block_table[b * pages_per_seq]: the entries this CTA may read
        self.row = dsl.element_ptr(arg.block_table, x.bz * arg.pages_per_seq, dsl.i32())
        self.last = (x.seq.sk - 1) // self.page  # Sk_b >= 1 where the load warp runs (trip count > 0)
        # split KV: the CTA's tiles start at its range's first key (a multiple of bn), absolute in the sequence
        self.first = x.kv_begin if c.split_kv else None
        if self.first is not None and self.bn % self.page == 0 and self.page % self.bn:
            self.first = x.kv_begin // self.page  # whole pages a tile: the range's first page

    def tile(self, tile) -> list:
        """Tile ``tile``'s chunks as namespaces (``page``: the page index, i32 loaded from the block table
        with the index clamped to the last page; ``row``: the first row in it), in key order. A page at
        least as long as the tile: one chunk at row (t * bn) % page_size; pages shorter than a tile that
        divide it: bn / page_size whole pages, row 0; otherwise chunks of gcd(bn, page_size) rows."""
        V = self.dsl.Value
        chunks = []
        for i in range(self.bn // self.chunk):
            if self.page % self.bn == 0:
                key = self._start(tile * self.bn)
                index, row = key // self.page, key % self.page
            elif self.bn % self.page == 0:
                index, row = self._start(tile * (self.bn // self.page) + i), V(0)
            else:
                key = self._start(tile * self.bn + i * self.chunk)
                index, row = key // self.page, key % self.page
            page = read_entry(self.k, self.row, self.x.bz, index.min(self.last), self.x.arg.num_pages,
                              invariant=False)
            chunks.append(types.SimpleNamespace(page=page, row=row))
        return chunks

    def _start(self, offset):
        """``offset`` (a key, or a page in the whole-pages case) from the CTA's first: split KV adds its
        range's first key (page)."""
        return offset if self.first is None else self.first + offset


def load_chunks(d, fa4, tmap, buf, barrier, index, blocks, kvh, chunks) -> None:
    """A K sub-stage's or a V stage's 64-column ``blocks`` ((column, byte offset in ``buf``) each), chunk by
    chunk (``Pages.tile``) from their pages, each ``chunk`` rows after the previous one in its block;
    chunk-major, so that each page's loads are issued together."""
    from fa4_mlir.dsl.values import raw

    rows = d.bn // len(chunks)
    for i, ch in enumerate(chunks):
        for col, offset in blocks:
            fa4.tma_load(tmap, buf, barrier, index, [raw(col), raw(kvh), raw(ch.row), raw(ch.page)],
                         bytes=rows * d.row_bytes, dst_offset=offset + i * rows * d.row_bytes)
