"""Placement rules shared by the allocation passes and fa4-layout. No MLIR import.

* Shared memory: regions in program order, each at the next multiple of its alignment after the
  previous one; an alias sits at its base's offset plus its own offset and adds nothing.
* Mbarriers: arrays in program order, contiguous, one index per barrier.
* TMEM: regions in program order, contiguous columns; the kernel allocates the next power of two
  >= 32 that covers them (tcgen05.alloc takes a power of two in [32, 512]).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence


@dataclasses.dataclass(frozen=True)
class Placed:
    offsets: dict[Hashable, int]
    total: int


def place_smem(regions: Sequence[tuple[Hashable, int, int, Hashable | None, int]]) -> Placed:
    """``regions``: (key, bytes, align, key of the alias base or None, offset inside the base)."""
    offsets: dict[Hashable, int] = {}
    cursor = 0
    for name, size, align, alias_of, alias_offset in regions:
        if alias_of is not None:
            offsets[name] = offsets[alias_of] + alias_offset
            continue
        offsets[name] = -(-cursor // align) * align
        cursor = offsets[name] + size
    return Placed(offsets, cursor)


def place_contiguous(items: Sequence[tuple[Hashable, int]]) -> Placed:
    """Barrier indices or TMEM columns: each item starts where the previous one ended."""
    offsets: dict[Hashable, int] = {}
    cursor = 0
    for name, size in items:
        offsets[name] = cursor
        cursor += size
    return Placed(offsets, cursor)


def tmem_allocation(columns: int) -> int:
    """Columns that tcgen05.alloc must request to cover ``columns``."""
    n = 32
    while n < columns:
        n *= 2
    return n
