"""Tensor memory (TMEM, sm_100a): one CTA's 128 lanes x 512 columns of 32-bit cells, its column
allocator, and the cells that asynchronous tcgen05 operations still own.

PTX ISA "Tensor Memory" -> "Tensor Memory Allocation": ``tcgen05.alloc`` takes a power-of-two number of
columns, at least 32, and writes the address of the allocation (lane 0, its first column) to shared
memory; an allocation the CTA cannot satisfy blocks until columns are freed; ``tcgen05.dealloc``
frees exactly what an alloc returned; every allocation must be freed before the CTA exits, and after
``tcgen05.relinquish_alloc_permit`` the CTA may not allocate again. Allocations are placed at the
lowest column aligned to their size (the ISA leaves placement to the hardware).

In flight (as ``memory.InFlight`` is for shared memory): the D columns of a ``tcgen05.mma`` from issue
until it completes, the cells a ``tcgen05.st`` writes until the warp's ``tcgen05.wait::st``. Reading
or writing such cells meanwhile is a ``ProtocolError`` naming both instructions. The cells a
``tcgen05.ld`` reads until the warp's ``tcgen05.wait::ld``: writing them meanwhile is one too.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu.errors import ProtocolError
from fa4_mlir.emu.isa.tcgen05_desc import TMEM_COLUMNS, TMEM_LANES

FILL = 0xA5A5A5A5  # unwritten cells hold garbage on a GPU; a fixed pattern makes reads of it visible


class Region:
    """Cells ``[lane0, lane1) x [col0, col1)`` an asynchronous operation owns; ``writes``: it writes them."""
    __slots__ = ("lane0", "lane1", "col0", "col1", "writes", "what", "remedy", "mma")

    def __init__(self, lane0, lane1, col0, col1, writes, what, remedy, mma=False):
        self.lane0, self.lane1, self.col0, self.col1 = lane0, lane1, col0, col1
        self.writes, self.what, self.remedy, self.mma = writes, what, remedy, mma

    def overlaps(self, lane0, lane1, col0, col1) -> bool:
        return lane0 < self.lane1 and self.lane0 < lane1 and col0 < self.col1 and self.col0 < col1


class TensorMemory:
    def __init__(self):
        self.cells = np.full((TMEM_LANES, TMEM_COLUMNS), FILL, np.uint32)
        self.allocations: dict[int, tuple[int, str]] = {}  # first column -> (columns, where)
        self.relinquished: str | None = None
        self.in_flight: list[Region] = []

    # -- allocation ------------------------------------------------------------------------------
    def try_alloc(self, ncols: int, where: str) -> int | None:
        """The first column of a new allocation, or None when no aligned block is free yet."""
        if self.relinquished:
            raise ProtocolError(f"{where}: tcgen05.alloc after this CTA relinquished its allocation permit "
                                f"({self.relinquished})")
        if ncols < 32 or ncols > TMEM_COLUMNS or ncols & (ncols - 1):
            raise ProtocolError(f"{where}: tcgen05.alloc column count must be a power of 2 in [32, {TMEM_COLUMNS}], "
                                f"got {ncols}")
        for start in range(0, TMEM_COLUMNS, ncols):
            if all(start + ncols <= s or s + n <= start for s, (n, _) in self.allocations.items()):
                self.allocations[start] = (ncols, where)
                return start
        return None

    def dealloc(self, taddr: int, ncols: int, where: str) -> None:
        lane, column = taddr >> 16, taddr & 0xFFFF
        held = self.allocations.get(column)
        if lane or held is None:
            raise ProtocolError(f"{where}: tcgen05.dealloc of 0x{taddr:08x} ({ncols} columns) frees nothing "
                                f"tcgen05.alloc returned (allocated: {self.describe()}): a double free or a "
                                f"wrong address")
        if held[0] != ncols:
            raise ProtocolError(f"{where}: tcgen05.dealloc column count must equal the allocation's, "
                                f"{held[0]} at column {column}, got {ncols}")
        mine = [r for r in self.in_flight if r.col0 < column + ncols and column < r.col1]
        # A tcgen05.ld not yet waited for does not hold its columns: dealloc changes no cell, and what
        # tcgen05.wait::ld orders is a later write (PTX ISA 9.7.16.6.4.5). CuTe DSL's GEMMs free the
        # accumulator after using the loaded registers, with no wait::ld.
        busy = [r for r in mine if r.writes or r.mma]
        if busy:
            raise ProtocolError(f"{where}: tcgen05.dealloc frees columns {column}..{column + ncols - 1} that "
                                f"{busy[0].what} still uses; {busy[0].remedy}")
        for region in mine:
            self.release(region)
        del self.allocations[column]

    def describe(self) -> str:
        return ", ".join(f"{n} columns at {s}" for s, (n, _) in sorted(self.allocations.items())) or "none"

    def leaks(self) -> str | None:
        if not self.allocations:
            return None
        return "; ".join(f"{n} columns at column {s} (allocated at {w})" for s, (n, w) in sorted(self.allocations.items()))

    # -- access ------------------------------------------------------------------------------------
    def check_allocated(self, col0: int, col1: int, where: str) -> None:
        for s, (n, _) in self.allocations.items():
            if s <= col0 and col1 <= s + n:
                return
        raise ProtocolError(f"{where}: tensor-memory columns {col0}..{col1 - 1} are not inside one allocation "
                            f"(allocated: {self.describe()}); tcgen05.alloc them first")

    def guard(self, lane0, lane1, col0, col1, writing: bool, where: str, by_mma: bool = False) -> None:
        """ProtocolError if the access races with an operation in flight: a write to cells it owns, a
        read of cells it writes. ``by_mma``: the access is a tcgen05.mma's, which the tensor core orders
        after every MMA issued before it (the pipeline executes them in issue order)."""
        for r in self.in_flight:
            if (writing or r.writes) and not (by_mma and r.mma) and r.overlaps(lane0, lane1, col0, col1):
                verb = "writes" if writing else "reads"
                raise ProtocolError(f"{where} {verb} tensor memory lanes {max(lane0, r.lane0)}..{min(lane1, r.lane1) - 1}"
                                    f", columns {max(col0, r.col0)}..{min(col1, r.col1) - 1} that {r.what} still "
                                    f"{'writes' if r.writes else 'reads'}: a data race; {r.remedy}")

    def track(self, region: Region) -> Region:
        self.in_flight.append(region)
        return region

    def release(self, region: Region) -> None:
        if region in self.in_flight:
            self.in_flight.remove(region)
