"""The GEMM epilogue of one tile, shared by both targets: ``D = alpha * acc + beta * C``.

A tile's ``tile_n / epi_tile_n`` sub-tiles each: wait for the C sub-tile (the EpiLoadPipeline
consumer), let the storing thread wait until the TMA store that last read the D staging buffer
``j % 2`` is done, meet at the role's named barrier, compute and write D into the buffer (16-byte
(sm_100a) or 4-byte (sm_90a) accesses at swizzled offsets), release C, fence the generic-proxy
writes, meet again, and one thread TMA-stores the buffer. The tile is built twice, with C and
without (``has_c`` 0: C is never read), as the two arms of one ``scf.if`` whose result is the C
ring's state. The accumulator comes from the caller: ``values`` yields its f32 vector for a chunk.
"""

from __future__ import annotations

import contextlib

from fa4_mlir._mlir import ir
from fa4_mlir.kernels.gemm.prologue import Gemm


def swizzled_rows(g: Gemm, row):
    """(rowb, sw): the byte offset of ``row`` in a C/D sub-tile and the row's swizzle phase, address
    bits 7.. of the row start masked to the 16-byte chunk bits the swizzle XORs."""
    dsl, pitch = g.dsl, g.c.epi_row_bytes
    rowb = row * pitch
    return rowb, dsl.andi(dsl.shrui(rowb, 7), pitch // 16 - 1)


def chunk_offset(g: Gemm, sw, chunk: int, rowb):
    """The byte offset of 16-byte chunk ``chunk`` of a row (``rowb``, swizzle phase ``sw``)."""
    return g.dsl.shli(g.dsl.xori(sw, chunk), 4) + rowb


class Epilogue:
    """A role's epilogue: the per-role constants (built where this is made) and ``tile``, the
    sub-tiles of one output tile.

    ``width``: accumulator elements per chunk (8 on sm_100a, 2 on sm_90a); ``group``: the D staging
    buffers' storing group; ``lead``: the thread that stores; ``barrier``/``threads``: the role's
    named barrier."""

    def __init__(self, g: Gemm, width: int, group: int, lead, barrier: str, threads: int):
        dsl, c = g.dsl, g.c
        self.g, self.width, self.group, self.lead, self.barrier, self.threads = g, width, group, lead, barrier, threads
        self.d_stages = (dsl.arith.constant(dsl.i32(), 0), dsl.arith.constant(dsl.i32(), 1))
        f32 = ir.F32Type.get()
        self.wide = ir.VectorType.get([width], f32)
        self.narrow = ir.VectorType.get([width], ir.BF16Type.get() if c.dtype == "bf16" else ir.F16Type.get())
        self.alpha = dsl.vector.broadcast(self.wide, g.arg.alpha)
        self.beta = dsl.vector.broadcast(self.wide, g.arg.beta)

    def tile(self, epi, col, store_row, chunks, values, before=None) -> None:
        """All sub-tiles of the tile at column ``col``, with C where ``has_c`` and without; ``epi``
        (the C ring's consumer) is the branch's result. ``chunks(j)`` lists this thread's
        (chunk, C byte offset, D byte offset) of sub-tile ``j``; ``values(chunk, pre)`` is the f32
        accumulator vector of a chunk, where ``pre`` is what ``before(j, with_c)`` (run ahead of
        sub-tile ``j``) returned."""
        dsl = self.g.dsl
        with dsl.if_else(self.g.load_c, carry=[epi]) as branch:
            for with_c, arm in ((True, branch.then_), (False, branch.else_)):
                with arm():
                    for j in range(self.g.c.num_epi_subtiles):
                        pre = before(j, with_c) if before else None
                        self._subtile(epi, j, with_c, col, store_row, chunks(j), values, pre)

    def _subtile(self, epi, j: int, with_c: bool, col, store_row, chunks, values, pre) -> None:
        g, dsl, c, smem = self.g, self.g.dsl, self.g.c, self.g.smem
        pending = 1 if c.num_epi_subtiles % 2 == 0 else 0  # buffer j % 2 was last stored 2 stores ago
        n = self.width
        with epi.consume_explicit() if with_c else contextlib.nullcontext() as stage:
            if with_c:
                c_addr = dsl.fa4.smem_address(smem.src_tile(stage.index()))
            with g.k.if_(self.lead):
                dsl.fa4.tma_store_wait(pending=pending)
            dsl.fa4.named_barrier(sym_name=self.barrier, threads=self.threads)
            d_tile = smem.out_tile(self.d_stages[j % 2], self.group)
            d_addr = dsl.fa4.smem_address(d_tile)
            for chunk, c_off, d_off in chunks:
                y = dsl.arith.mulf(values(chunk, pre), self.alpha)
                if with_c:
                    residual = dsl.llvm.load(self.narrow, dsl.byte_offset(c_addr, c_off), alignment=2 * n)
                    scaled = dsl.arith.mulf(dsl.arith.extf(self.wide, residual), self.beta)
                    y = dsl.arith.addf(y, scaled)
                out = dsl.arith.truncf(self.narrow, y)
                dsl.llvm.store(out, dsl.byte_offset(d_addr, d_off), alignment=2 * n)
            if with_c:
                stage.arrive()  # C is read: the epilogue load may refill the stage
            dsl.nvvm.fence_proxy(dsl.nvvm.ProxyKind.async_shared, space=dsl.nvvm.SharedSpace.shared_cta)
            dsl.fa4.named_barrier(sym_name=self.barrier, threads=self.threads)
            with g.k.if_(self.lead):
                column = col + j * c.epi_tile_n
                dsl.fa4.tma_store(g.arg.d, d_tile, [column.value, store_row.value], bytes=smem.out_tile_bytes)
