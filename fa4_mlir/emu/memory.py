"""The emulator's state spaces and the one 64-bit generic address map they live in.

    GLOBAL_BASE .. : the caller's arrays, one allocation each, 256-byte aligned with a guard gap
                     between them (an access that runs off one allocation never lands in the next)
    SHARED_BASE + a: shared-window address ``a`` of the current CTA (``cvta.shared``/``cvta.to.shared``)
    PARAM_BASE  + a: the kernel parameter buffer (``cvta.param``)
    LOCAL_BASE  + a: the current thread's local memory (``cvta.local``)

Shared-window address 0 .. RESERVED_SMEM-1 is the system's reserved shared memory (Hopper and
Blackwell keep 1 KiB per CTA); static ``.shared`` variables follow it and the dynamic window
(``.extern .shared`` arrays) comes after them, aligned to its declared alignment.

Every access names its instruction (``what``) so a fault can say which PTX line, warp and lane did it.

Shared memory also keeps the bytes that asynchronous operations still own (``InFlight``): a TMA or
bulk load's destination until it lands, a TMA or bulk store's source until its issuing warp's
``cp.async.bulk.wait_group`` retires it, a wgmma's shared operands until a ``wgmma.wait_group`` of its
warpgroup retires it. The memory model orders none of these with other accesses before that point, so
writing such bytes meanwhile, or reading bytes a load still owns, is a data race: a ``ProtocolError``
naming both instructions, whatever the values involved. (A read after the load landed but without
the wait that orders it is a race too; the seeds whose timing keeps the load in flight report it.)
"""

from __future__ import annotations

import bisect

import numpy as np

from fa4_mlir.emu.errors import MemoryFault, ProtocolError

GLOBAL_BASE = 0x0000_0001_0000_0000
# A CTA's shared::cta window sits at its rank's slot of the cluster's shared::cluster window (the PTX ISA's
# "the shared::cta window is contained in the shared::cluster window"; on sm_90/sm_100 the slot is
# rank << 24, which CUTLASS and our pair kernels rely on when they clear bit 24 to reach the even CTA).
CLUSTER_SHIFT = 24
GLOBAL_ALIGN = 256
GLOBAL_GUARD = 4096
SHARED_BASE = 0x0000_7F00_0000_0000
PARAM_BASE = 0x0000_7E00_0000_0000
LOCAL_BASE = 0x0000_7D00_0000_0000
WINDOW_SIZE = 1 << 32
RESERVED_SMEM = 1024

_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def lane_bytes(buf: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each offset of ``buf`` as an (n, width) uint8 array."""
    return buf[offsets[:, None] + np.arange(width, dtype=np.int64)]


def as_words(raw: np.ndarray, width: int) -> np.ndarray:
    """(n, k*width) little-endian bytes -> (n, k) unsigned words of ``width`` bytes."""
    return np.ascontiguousarray(raw).view(_DTYPES[width])


def _owner(array: np.ndarray) -> np.ndarray:
    """The ndarray that owns the memory ``array`` views (through views, reshapes and as_strided,
    whose base is a plain object holding the original array)."""
    root = array
    while root.base is not None:
        base = root.base
        if not isinstance(base, np.ndarray):
            base = getattr(base, "base", None)
            if not isinstance(base, np.ndarray):
                break
        root = base
    return root


def _byte_span(array: np.ndarray) -> np.ndarray | None:
    """The bytes from ``array``'s first element to its last, as a uint8 view of the same memory (a
    strided slice of a buffer NumPy does not own, e.g. a torch tensor's), or None when a stride is
    negative or the array is empty."""
    if array.size == 0 or any(s < 0 for s in array.strides):
        return None
    nbytes = sum((n - 1) * s for n, s in zip(array.shape, array.strides)) + array.itemsize
    first = array[tuple(slice(0, 1) for _ in array.shape)].reshape(1).view(np.uint8)
    return np.lib.stride_tricks.as_strided(first, shape=(nbytes,), strides=(1,))


class Allocation:
    __slots__ = ("base", "size", "buf", "name", "array", "writeback")

    def __init__(self, base: int, buf: np.ndarray, name: str, array=None, writeback=None):
        self.base, self.size, self.buf, self.name = base, int(buf.size), buf, name
        self.array, self.writeback = array, writeback

    @property
    def end(self) -> int:
        return self.base + self.size


class GlobalMemory:
    """The caller's arrays at fixed global addresses; every access is bounds-checked."""

    def __init__(self):
        self.allocations: list[Allocation] = []
        self._bases: list[int] = []
        self._next = GLOBAL_BASE
        self._by_buffer: dict[int, Allocation] = {}

    def add_array(self, array: np.ndarray, name: str, strided: bool = False) -> int:
        """Place ``array`` (or the buffer it views) in global memory; returns the address of its first
        element. Arrays viewing one buffer share one allocation, so aliasing views alias here too.
        ``strided``: the kernel addresses the array through its own strides (a tensor map), so a view
        of a buffer NumPy does not own (a torch tensor's) is placed in place, not compacted."""
        root = _owner(array)
        ptr = array.__array_interface__["data"][0]
        found = self._find_host(ptr)
        if found is not None:
            return found.base + (ptr - found.array.__array_interface__["data"][0])
        if root.flags.c_contiguous and root.flags.writeable:
            buf = root.reshape(-1).view(np.uint8)
            alloc = self._place(buf, name, root, None)
            return alloc.base + (ptr - root.__array_interface__["data"][0])
        if not array.flags.writeable:
            buf = np.ascontiguousarray(array).reshape(-1).view(np.uint8).copy()
            return self._place(buf, name, array, None).base
        span = _byte_span(array) if strided else None
        if span is not None:  # the bytes the view spans, in place: its strides stay valid, writes land
            return self._place(span, name, array, None).base
        # A strided view of a non-contiguous buffer behind a pointer: the kernel indexes it as
        # contiguous, so emulate a contiguous copy, written back after.
        copy = np.ascontiguousarray(array)
        alloc = self._place(copy.reshape(-1).view(np.uint8), name, copy, lambda: np.copyto(array, copy))
        return alloc.base

    def add_bytes(self, size: int, name: str) -> int:
        return self._place(np.zeros(size, np.uint8), name, None, None).base

    def _find_host(self, ptr: int):
        for alloc in self.allocations:
            if alloc.array is None:
                continue
            start = alloc.array.__array_interface__["data"][0]
            if start <= ptr < start + alloc.size:
                return alloc
        return None

    def _place(self, buf: np.ndarray, name: str, array, writeback) -> Allocation:
        base = self._next
        alloc = Allocation(base, buf, name, array, writeback)
        self.allocations.append(alloc)
        self._bases.append(base)
        size = max(1, alloc.size)
        self._next = base + ((size + GLOBAL_ALIGN - 1) // GLOBAL_ALIGN) * GLOBAL_ALIGN + GLOBAL_GUARD
        return alloc

    def finish(self) -> None:
        for alloc in self.allocations:
            if alloc.writeback is not None:
                alloc.writeback()

    def locate(self, address: int) -> Allocation | None:
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0 and address < self.allocations[i].end:
            return self.allocations[i]
        return None

    def nearest(self, address: int) -> str:
        if not self.allocations:
            return "no global allocation exists"
        best = min(self.allocations, key=lambda a: 0 if a.base <= address < a.end else
                   min(abs(address - a.base), abs(address - (a.end - 1))))
        if address < best.base:
            rel = f"{best.base - address} bytes before"
        elif address >= best.end:
            rel = f"{address - best.end} bytes past the end of"
        else:
            rel = f"at offset {address - best.base} of"
        return f"{rel} '{best.name}' (0x{best.base:x}, {best.size} bytes)"

    def resolve(self, address: int, nbytes: int, what: str) -> tuple[np.ndarray, int]:
        """The allocation buffer holding [address, address+nbytes) and the offset of ``address``."""
        alloc = self.locate(address)
        if alloc is None or address + nbytes > alloc.end:
            raise MemoryFault(f"{what}: global access of {nbytes} bytes at 0x{address:x} is outside every "
                              f"allocation ({self.nearest(address)})")
        return alloc.buf, address - alloc.base

    def offsets(self, addresses: np.ndarray, width: int, what) -> tuple[np.ndarray, np.ndarray]:
        """Per-lane (buffer, offsets) for lanes that all fall in one allocation (the common case);
        raises MemoryFault naming the first bad lane otherwise. ``what(lane)`` describes the access."""
        lo, hi = int(addresses.min()), int(addresses.max())
        alloc = self.locate(lo)
        if alloc is not None and hi + width <= alloc.end:
            return alloc.buf, (addresses - np.uint64(alloc.base)).astype(np.int64)
        # Different allocations (legal) or a fault: resolve lane by lane.
        for i, a in enumerate(addresses.tolist()):
            found = self.locate(a)
            if found is None or a + width > found.end:
                raise MemoryFault(f"{what(i)}: global access of {width} bytes at 0x{a:x} is outside every "
                                  f"allocation ({self.nearest(a)})")
        return None, None


class InFlight:
    """Shared bytes an asynchronous operation still owns: ``[lo, hi)``, or exactly the shared addresses
    in ``index`` (an int64 array within ``[lo, hi)``; a wgmma operand is not contiguous). ``writes``: the
    operation writes them (a load) rather than reads them. ``what`` names the operation and ``remedy``
    says which wait ends its ownership; ``group`` and ``seq`` identify a wgmma's warpgroup and group."""
    __slots__ = ("lo", "hi", "index", "writes", "what", "remedy", "group", "seq")

    def __init__(self, lo: int, hi: int, writes: bool, what: str, remedy: str, index=None, group=None):
        self.lo, self.hi, self.index, self.writes = int(lo), int(hi), index, writes
        self.what, self.remedy, self.group, self.seq = what, remedy, group, None

    def overlap(self, lo: int, hi: int, index) -> bool:
        if hi <= self.lo or self.hi <= lo:
            return False
        if self.index is not None:
            mine = self.index[(self.index >= lo) & (self.index < hi)]
            if index is None or not mine.size:
                return bool(mine.size)
            return bool(np.isin(index, mine).any())
        return index is None or bool(((index >= self.lo) & (index < self.hi)).any())


class SharedMemory:
    """One CTA's shared memory, indexed by shared-window address."""

    def __init__(self, static_bytes: int, dynamic_offset: int, dynamic_bytes: int):
        self.dynamic_offset = dynamic_offset
        self.dynamic_bytes = dynamic_bytes
        self.size = dynamic_offset + dynamic_bytes
        self.static_bytes = static_bytes
        self.buf = np.zeros((self.size + 15) // 16 * 16, np.uint8)
        # Uninitialised shared memory holds garbage on a GPU; a fixed pattern makes reads of it visible.
        self.buf[:] = 0xA5
        self.in_flight: list[InFlight] = []
        self.shadow = None  # races.SmemShadow when the launch checks races

    def guard(self, starts: np.ndarray, width: int, where: str, index=None, reading: bool = False) -> None:
        """Raise ProtocolError if an access at ``starts`` (``width`` bytes each; or exactly the bytes of
        ``index``) races with an asynchronous operation in flight: a write touching bytes it reads or
        writes, or (``reading``) a read touching bytes it has not written yet."""
        if not self.in_flight:
            return
        lo, hi = (int(index.min()), int(index.max()) + 1) if index is not None else \
            (int(starts.min()), int(starts.max()) + width)
        for a in self.in_flight:
            if hi <= a.lo or a.hi <= lo or (reading and not a.writes):
                continue
            exact = index  # several lanes' accesses are not one contiguous range: compare byte by byte
            if exact is None and len(starts) > 1:
                exact = (np.asarray(starts, np.int64)[:, None] + np.arange(width, dtype=np.int64)).reshape(-1)
            if a.overlap(lo, hi, exact):
                first, last = max(lo, a.lo), min(hi, a.hi) - 1
                if reading:
                    raise ProtocolError(f"{where} reads shared bytes (in 0x{first:x}..0x{last:x}) that {a.what} "
                                        f"has not written yet: a data race; {a.remedy}")
                raise ProtocolError(f"{where} writes shared bytes (in 0x{first:x}.."
                                    f"0x{last:x}) that {a.what} may still {'write' if a.writes else 'read'}: a "
                                    f"data race; {a.remedy}")

    def track(self, access: InFlight, where: str) -> InFlight:
        """Start an asynchronous operation's ownership of its bytes, after checking that it does not
        race with another operation in flight: a load must not write bytes another one owns, a store or
        wgmma must not read bytes a load has not written yet."""
        self.guard(np.array([access.lo], np.int64), access.hi - access.lo, where, access.index,
                   reading=not access.writes)
        if self.shadow is not None:  # an async-proxy read of generic writes, a load over unordered accesses?
            (self.shadow.async_write if access.writes else self.shadow.async_read)(access)
        self.in_flight.append(access)
        return access

    def release(self, access: InFlight) -> None:
        if access in self.in_flight:
            self.in_flight.remove(access)
        if self.shadow is not None and access.writes:  # a load landed: async-proxy data, fenced at completion
            self.shadow.async_wrote(access)

    def check(self, offsets: np.ndarray, width: int, what) -> None:
        lo, hi = int(offsets.min()), int(offsets.max())
        if lo >= RESERVED_SMEM and hi + width <= self.size:
            return
        for i, a in enumerate(offsets.tolist()):
            if not RESERVED_SMEM <= a or a + width > self.size:
                raise MemoryFault(f"{what(i)}: shared access of {width} bytes at shared address 0x{a:x} is "
                                  f"outside this CTA's shared memory [0x{RESERVED_SMEM:x}, 0x{self.size:x}) "
                                  f"({self.describe(a)})")

    def describe(self, a: int) -> str:
        if a < RESERVED_SMEM:
            return f"the first {RESERVED_SMEM} bytes are reserved by the system"
        if a >= self.size:
            return (f"{a - self.size} bytes past the end of the dynamic window of {self.dynamic_bytes} bytes at "
                    f"0x{self.dynamic_offset:x}; launch with more smem_bytes or fix the offset")
        return "inside"
