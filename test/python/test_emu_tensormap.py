"""fa4_mlir.emu.tensormap against the PTX ISA ("Tensors": "Tiled Mode", "Swizzling Modes"), the
driver's cuTensorMapEncodeTiled rules and the programming guide's "TMA Swizzle" tables.

Expected shared-memory images are built here independently of the module: from the ISA's swizzle
tables (16-byte chunk permutations per 128-byte line), not from the bit formula it implements.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from fa4_mlir.emu.errors import LaunchArgumentError, MemoryFault, ProtocolError
from fa4_mlir.emu.tensormap import OOB_NAN_HALF, TensorMap, swizzle, tma_load, tma_store

# PTX ISA "Swizzling Modes": destination line r (a 128-byte line; the table starts at the repeat
# boundary) holds, at chunk position p, source chunk TABLE[r % rows][p].
TABLES = {
    "none": [[0, 1, 2, 3, 4, 5, 6, 7]],
    "32B": [[0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 3, 2, 5, 4, 7, 6]],
    "64B": [[0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 3, 2, 5, 4, 7, 6], [2, 3, 0, 1, 6, 7, 4, 5],
            [3, 2, 1, 0, 7, 6, 5, 4]],
    "128B": [[0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 3, 2, 5, 4, 7, 6], [2, 3, 0, 1, 6, 7, 4, 5],
             [3, 2, 1, 0, 7, 6, 5, 4], [4, 5, 6, 7, 0, 1, 2, 3], [5, 4, 7, 6, 1, 0, 3, 2],
             [6, 7, 4, 5, 2, 3, 0, 1], [7, 6, 5, 4, 3, 2, 1, 0]],
}
SPAN = {"none": 128, "32B": 32, "64B": 64, "128B": 128}


def table_address(logical: int, mode: str) -> int:
    """Where the ISA's table puts the byte written for logical (row-major) byte address ``logical``."""
    table = TABLES[mode]
    line, chunk = logical // 128, logical // 16 % 8
    return line * 128 + table[line % len(table)].index(chunk) * 16 + logical % 16


def unswizzle_box(smem: np.ndarray, address: int, nbytes: int, mode: str) -> np.ndarray:
    return np.array([smem[table_address(a, mode)] for a in range(address, address + nbytes)], np.uint8)


class FakeMemory:
    """The machine's ``resolve`` contract: the allocation holding [address, address+nbytes)."""

    def __init__(self):
        self.allocations, self.calls, self.next = [], [], 0x1_0000_0000

    def add(self, array: np.ndarray) -> int:
        """Place C-contiguous ``array`` (shared, so writes show up in it); returns its address."""
        assert array.flags.c_contiguous
        base = self.next
        self.allocations.append((base, array.reshape(-1).view(np.uint8)))
        self.next += (array.nbytes + 255) // 256 * 256 + 4096
        return base

    def resolve(self, address: int, nbytes: int, what: str):
        self.calls.append((address, nbytes))
        for base, buf in self.allocations:
            if base <= address and address + nbytes <= base + buf.size:
                return buf, address - base
        raise MemoryFault(f"{what}: global access of {nbytes} bytes at 0x{address:x} is outside every "
                          f"allocation")


def bound(array: np.ndarray, mem: FakeMemory, root: np.ndarray | None = None, **kw) -> TensorMap:
    """A map of ``array`` (a view of ``root``, or itself) bound where ``mem`` placed the root."""
    root = array if root is None else root
    base = mem.add(root)
    offset = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return TensorMap(array, **kw).bind(base + offset)


def new_smem(size: int = 96 * 1024) -> np.ndarray:
    return np.full(size, 0xA5, np.uint8)


# -- swizzle ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", list(TABLES))
def test_swizzle_matches_isa_tables(mode):
    addresses = np.arange(0, 4096)
    expected = np.array([table_address(int(a), mode) for a in addresses])
    assert (swizzle(addresses, mode) == expected).all()
    assert all(swizzle(int(a), mode) == e for a, e in zip(addresses[::37], expected[::37]))


@pytest.mark.parametrize("mode,bits", [("32B", 1), ("64B", 2), ("128B", 3)])
def test_swizzle_bit_formula_and_involution(mode, bits):
    a = np.arange(0, 1 << 18, 16, dtype=np.int64)
    mask = (1 << bits) - 1
    assert (swizzle(a, mode) == a ^ (((a >> 7) & mask) << 4)).all()
    assert (swizzle(swizzle(a, mode), mode) == a).all()
    assert ((swizzle(a, mode) ^ a) & ~(mask << 4) == 0).all()  # only chunk bits [4, 4+bits) change


@pytest.mark.parametrize("mode,period", [("32B", 2), ("64B", 4), ("128B", 8)])
def test_swizzle_matches_programming_guide_offset_formula(mode, period):
    # "Swizzle Pattern Pointer Offset Computation": a buffer at smem_ptr has
    # offset = (smem_ptr / 128) % period and smem[y][x] <-> smem[y][((y + offset) % period) ^ x].
    for ptr in (0, 128, 384, 1024 + 640, 4096 + 896):
        offset = ptr // 128 % period
        for y in range(16):
            for x in range(8):
                got = swizzle(ptr + 128 * y + 16 * x, mode)
                assert got == ptr + 128 * y + 16 * (((y + offset) % period) ^ x)


def test_swizzle_rejects_unknown_mode():
    with pytest.raises(ProtocolError, match="swizzle mode must be one of"):
        swizzle(0, "16B")


# -- loads ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", list(TABLES))
@pytest.mark.parametrize("phase", [0, 384])
def test_load_each_swizzle_mode(mode, phase):
    mem = FakeMemory()
    array = np.arange(200 * 160, dtype=np.uint16).reshape(200, 160)
    inner = SPAN[mode] // 2 if mode != "none" else 40
    tmap = bound(array, mem, box=(96, inner), swizzle=mode, dtype="bf16")
    smem = new_smem()
    dst = 3 * 1024 + phase
    coords = (8 * 3, 17)  # {c0 = column, c1 = row}
    nbytes = tma_load(tmap, mem, coords, smem, dst)
    assert nbytes == 96 * inner * 2
    got = unswizzle_box(smem, dst, nbytes, mode).view(np.uint16).reshape(96, inner)
    assert (got == array[17:17 + 96, 24:24 + inner]).all()


def test_load_strided_view_reads_only_the_box():
    mem = FakeMemory()
    root = np.arange(64 * 256, dtype=np.uint16).reshape(64, 256)
    view = root[:, 64:192]
    tmap = bound(view, mem, root=root, box=(64, 64), swizzle="128B")
    smem = new_smem()
    tma_load(tmap, mem, (64, 0), smem, 1024)
    got = unswizzle_box(smem, 1024, 64 * 128, "128B").view(np.uint16).reshape(64, 64)
    assert (got == view[:, 64:128]).all()
    (address, nbytes), = mem.calls
    assert address == tmap.address + 64 * 2 and nbytes == 63 * 512 + 128


@pytest.mark.parametrize("fill", ["zero", "nan"])
def test_load_out_of_bounds_at_both_ends(fill):
    mem = FakeMemory()
    array = (np.arange(40 * 48, dtype=np.float32) + 1).reshape(40, 48)
    tmap = bound(array, mem, box=(32, 32), swizzle="128B", oob_fill=fill)
    smem = new_smem()
    tma_load(tmap, mem, (-8, 24), smem, 2048)  # columns -8..23, rows 24..55 (40 rows exist)
    got = unswizzle_box(smem, 2048, 32 * 32 * 4, "128B").view(np.float32).reshape(32, 32)
    inside = got[:16, 8:]
    assert (inside == array[24:40, 0:24]).all()
    outside = np.ones((32, 32), bool)
    outside[:16, 8:] = False
    bits = got.view(np.uint32)[outside]
    if fill == "zero":
        assert (bits == 0).all()
    else:
        assert np.isnan(got[outside]).all()
        assert (bits == (OOB_NAN_HALF << 16 | OOB_NAN_HALF)).all()


def test_load_nan_fill_in_the_elements_own_format():
    mem = FakeMemory()
    for dtype, fmt in ((np.uint16, "bf16"), (np.float16, None)):
        array = np.ones((16, 16), dtype)
        tmap = bound(array, mem, box=(16, 16), swizzle="none", oob_fill="nan", dtype=fmt)
        smem = new_smem()
        tma_load(tmap, mem, (8, -4), smem, 1024)
        got = smem[1024:1024 + 512].view(np.uint16).reshape(16, 16)
        nan = np.concatenate([got[:4].reshape(-1), got[4:, 8:].reshape(-1)])  # rows -4..-1, columns 16..23
        assert (nan == OOB_NAN_HALF).all() and (got[4:, :8] == array[:12, 8:].view(np.uint16)).all()
        if fmt == "bf16":  # exponent all ones, mantissa non-zero
            assert ((nan & 0x7F80) == 0x7F80).all() and (nan & 0x7F).all()
        else:
            assert np.isnan(nan.view(np.float16)).all()


def test_load_entirely_out_of_bounds_touches_no_global_memory():
    mem = FakeMemory()
    array = np.ones((16, 64), np.uint16)
    tmap = bound(array, mem, box=(8, 64))
    smem = new_smem()
    assert tma_load(tmap, mem, (0, 16), smem, 1024) == 1024
    assert mem.calls == [] and (smem[1024:2048] == 0).all()


def test_load_element_strides():
    mem = FakeMemory()
    array = np.arange(8 * 20 * 32, dtype=np.float32).reshape(8, 20, 32)
    tmap = bound(array, mem, box=(3, 10, 8), elem_strides=(2, 3, 1), swizzle="none")
    assert tmap.loaded == (2, 4, 8)
    smem = new_smem()
    nbytes = tma_load(tmap, mem, (16, 5, 3), smem, 1024)
    assert nbytes == 2 * 4 * 8 * 4
    got = smem[1024:1024 + nbytes].view(np.float32).reshape(2, 4, 8)
    assert (got == array[3:6:2, 5:15:3, 16:24]).all()


def test_element_stride_of_the_innermost_dimension_is_ignored():
    mem = FakeMemory()
    array = np.arange(4 * 32, dtype=np.float32).reshape(4, 32)
    tmap = bound(array, mem, box=(4, 8), elem_strides=(1, 4), swizzle="none")
    assert tmap.loaded == (4, 8)
    smem = new_smem()
    tma_load(tmap, mem, (4, 0), smem, 1024)
    assert (smem[1024:1024 + 128].view(np.float32).reshape(4, 8) == array[:, 4:12]).all()


def test_element_strides_run_out_of_bounds():
    mem = FakeMemory()
    array = np.arange(10 * 16, dtype=np.float32).reshape(10, 16) + 1
    tmap = bound(array, mem, box=(8, 4), elem_strides=(3, 1), swizzle="none")
    smem = new_smem()
    tma_load(tmap, mem, (0, 4), smem, 1024)  # rows 4, 7, 10 (out of bounds)
    got = smem[1024:1024 + 48].view(np.float32).reshape(3, 4)
    assert (got[:2] == array[[4, 7], :4]).all() and (got[2] == 0).all()


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_load_every_rank(rank):
    mem = FakeMemory()
    shape = (3, 5, 4, 6, 24)[-rank:]
    array = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    box = (2, 3, 2, 4, 8)[-rank:]
    tmap = bound(array, mem, box=box, swizzle="32B")
    start = (1, 2, 1, 2, 8)[-rank:]  # outermost first
    smem = new_smem()
    nbytes = tma_load(tmap, mem, start[::-1], smem, 1024)
    got = unswizzle_box(smem, 1024, nbytes, "32B").view(np.float32).reshape(box)
    assert (got == array[tuple(slice(s, s + b) for s, b in zip(start, box))]).all()


def test_at_describes_memory_without_an_array():
    mem = FakeMemory()
    storage = np.arange(32 * 64, dtype=np.float16).reshape(32, 64)
    address = mem.add(storage)
    tmap = TensorMap.at(address, "f16", (32, 48), (128,), box=(16, 32), swizzle="64B")
    assert tmap.strides == (128, 2) and tmap.array is None
    smem = new_smem()
    tma_load(tmap, mem, (32, 8), smem, 1024)
    got = unswizzle_box(smem, 1024, 16 * 64, "64B").view(np.float16).reshape(16, 32)
    assert (got[:, :16] == storage[8:24, 32:48]).all() and (got[:, 16:] == 0).all()  # columns 48.. are OOB


def test_load_is_fast():
    mem = FakeMemory()
    array = np.zeros((1024, 128), np.uint16)
    tmap = bound(array, mem, box=(128, 64), swizzle="128B", dtype="bf16")
    smem = new_smem(64 * 1024)
    tma_load(tmap, mem, (64, 128), smem, 1024)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(20):
            tma_load(tmap, mem, (64, 128), smem, 1024)
        best = min(best, (time.perf_counter() - t0) / 20)
    assert best < 1e-3, f"a 128x64 bf16 TMA load took {best * 1e3:.2f} ms"


# -- stores -----------------------------------------------------------------------------------------------

def test_store_round_trips_a_load():
    mem = FakeMemory()
    src = np.arange(128 * 64, dtype=np.uint16).reshape(128, 64)
    dst = np.zeros((256, 64), np.uint16)
    load = bound(src, mem, box=(64, 64), swizzle="128B")
    store = bound(dst, mem, box=(64, 64), swizzle="128B")
    smem = new_smem()
    tma_load(load, mem, (0, 64), smem, 4096 + 256)
    assert tma_store(store, mem, (0, 100), smem, 4096 + 256) == 64 * 128
    assert (dst[100:164] == src[64:128]).all() and (dst[:100] == 0).all() and (dst[164:] == 0).all()


def test_store_clips_at_both_ends():
    mem = FakeMemory()
    dst = np.full((20, 48), -1.0, np.float32)
    tmap = bound(dst, mem, box=(16, 32), swizzle="128B")
    image = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    smem = new_smem()
    for logical in range(image.nbytes):  # the box image as a load would have laid it out
        smem[table_address(2048 + logical, "128B")] = image.view(np.uint8).reshape(-1)[logical]
    tma_store(tmap, mem, (-8, 10), smem, 2048)  # columns -8..23, rows 10..25 (20 rows exist)
    expected = np.full((20, 48), -1.0, np.float32)
    expected[10:20, 0:24] = image[:10, 8:32]
    assert (dst == expected).all()
    tma_store(tmap, mem, (48, 0), smem, 2048)  # wholly outside: nothing written, nothing resolved
    assert (dst == expected).all()


def test_store_writes_the_whole_16_byte_chunk_of_a_ragged_row():
    # Measured on the H100 (docs/emulator.md, calibration): a bf16 tensor of 300 columns with a
    # 304-element row stride gets columns 300..303 written too: the store writes whole 16-byte
    # chunks of a row. It never passes the row stride.
    mem = FakeMemory()
    buf = np.full((4, 304), 7, np.uint16)
    tmap = bound(buf[:, :300], mem, root=buf, box=(4, 64), swizzle="128B", dtype="bf16")
    image = np.arange(4 * 64, dtype=np.uint16).reshape(4, 64)
    smem = new_smem()
    for logical in range(image.nbytes):
        smem[table_address(2048 + logical, "128B")] = image.view(np.uint8).reshape(-1)[logical]
    tma_store(tmap, mem, (256, 0), smem, 2048)  # columns 256..319 of rows 0..3
    assert (buf[:, 256:304] == image[:, :48]).all() and (buf[:, :256] == 7).all()


# -- validation (one test per rule) -----------------------------------------------------------------------

U16 = np.zeros((64, 64), np.uint16)


@pytest.mark.parametrize("make,message", [
    (lambda: TensorMap([[1]], box=(1, 8)), "array must be a numpy.ndarray, got list"),
    (lambda: TensorMap(np.zeros((4, 8), np.complex64), box=(4, 8)),
     "element type must be a 1-, 2-, 4- or 8-byte"),
    (lambda: TensorMap(np.zeros((1,) * 6 + (8,), np.uint16), box=(1,) * 6 + (8,)),
     "rank must be 1 to 5, got 7"),
    (lambda: TensorMap.at(0, "u8", (1 << 32 | 1,), (1,), box=(16,)), r"dimensions must be in \[1, 2\^32\]"),
    (lambda: TensorMap(U16[:, ::2], box=(8, 8)), "innermost stride must be the element size"),
    (lambda: TensorMap(np.zeros((4, 12), np.uint16), box=(4, 8), swizzle="none"),
     "outer strides must be positive multiples of 16 bytes"),
    (lambda: TensorMap.at(0, "u16", (4, 8), (1 << 40, 2), box=(4, 8)), "below 2\\^40"),
    (lambda: TensorMap(U16, box=(8,)), "box must have 2 entries"),
    (lambda: TensorMap(U16, box=(257, 8), swizzle="none"), r"box entries must be in \[1, 256\]"),
    (lambda: TensorMap(U16, box=(0, 8)), r"box entries must be in \[1, 256\]"),
    (lambda: TensorMap(U16, box=(8, 12)), "inner box bytes must be a multiple of 16, got 24"),
    (lambda: TensorMap(U16, box=(8, 64), swizzle="32B"), "inner box bytes must be <= the 32B swizzle span"),
    (lambda: TensorMap(U16, box=(8, 8), swizzle="256B"), "swizzle must be one of none, 32B, 64B, 128B"),
    (lambda: TensorMap(U16, box=(8, 8), elem_strides=(1,)), "elem_strides must have 2 entries"),
    (lambda: TensorMap(U16, box=(8, 8), elem_strides=(9, 1)), r"elem_strides entries must be in \[1, 8\]"),
    (lambda: TensorMap(U16, box=(8, 8), oob_fill="inf"), "oob_fill must be 'zero' or 'nan'"),
    (lambda: TensorMap(U16, box=(8, 8), oob_fill="nan"),
     "oob_fill 'nan' must have a floating-point element type"),
    (lambda: TensorMap(U16, box=(8, 8), dtype="f32"), "must match the array's 2-byte elements"),
    (lambda: TensorMap(U16, box=(8, 8.5)), "box must be a sequence of integers"),
    (lambda: TensorMap.at(8, "u16", (4, 8), (16,), box=(4, 8)), "address must be 16-byte aligned, got 0x8"),
    (lambda: TensorMap(U16, box=(8, 8)).bind(-16), "address must be a non-negative integer"),
    (lambda: TensorMap.at(0, "u16", (4, 8), (16, 2, 1), box=(4, 8)), "strides_bytes must have 2 entries"),
])
def test_construction_errors(make, message):
    with pytest.raises(LaunchArgumentError, match=message):
        make()


def test_size_one_axes_take_any_stride():
    array = np.zeros((4, 32), np.uint16)[:, None, :]  # np.newaxis: stride 0
    tmap = TensorMap(array, box=(4, 1, 32), swizzle="64B")
    assert tmap.strides[1] % 16 == 0 and tmap.strides[1] > 0


def test_maps_are_immutable_and_bind_copies():
    tmap = TensorMap(U16, box=(8, 8))
    with pytest.raises(AttributeError, match="immutable"):
        tmap.box = (1, 8)
    bound_map = tmap.bind(0x1000)
    assert tmap.address is None and bound_map.address == 0x1000 and bound_map.box == tmap.box


def test_copy_errors():
    mem = FakeMemory()
    smem = new_smem()
    unbound = TensorMap(U16, box=(8, 8))
    with pytest.raises(ProtocolError, match="must be bound to a global address"):
        tma_load(unbound, mem, (0, 0), smem, 1024)
    tmap = bound(U16, mem, box=(8, 64), swizzle="128B")
    with pytest.raises(ProtocolError, match=r"tensor coordinates must be 2 values"):
        tma_load(tmap, mem, (0,), smem, 1024)
    with pytest.raises(ProtocolError, match=r"tensor coordinates must be .s32 values"):
        tma_load(tmap, mem, (0, 1 << 31), smem, 1024)
    with pytest.raises(MemoryFault, match="must be 128-byte aligned for a tensor copy, got 0x440"):
        tma_load(tmap, mem, (0, 0), smem, 1024 + 64)
    with pytest.raises(MemoryFault, match="outside shared memory"):
        tma_store(tmap, mem, (0, 0), smem, smem.size - 512)
    with pytest.raises(ProtocolError, match="shared memory must be a 1-D uint8 array"):
        tma_load(tmap, mem, (0, 0), smem.view(np.uint16), 1024)


def test_global_fault_names_the_access():
    mem = FakeMemory()
    storage = np.zeros((8, 64), np.uint16)
    address = mem.add(storage)
    tmap = TensorMap.at(address, "bf16", (64, 64), (128,), box=(8, 64))  # claims more rows than exist
    smem = new_smem()
    tma_load(tmap, mem, (0, 0), smem, 1024)  # rows 0..7 are inside the allocation
    with pytest.raises(MemoryFault, match="outside every allocation"):
        tma_load(tmap, mem, (0, 8), smem, 1024)


@pytest.mark.parametrize("fa4_name, ptx_name", [("fp16", "f16"), ("fp32", "f32"), ("fp8_e4m3", "e4m3")])
def test_fa4_dtype_names_are_accepted(fa4_name, ptx_name):
    size = {"f16": 2, "f32": 4, "e4m3": 1}[ptx_name]
    array = np.zeros((8, 16), np.dtype(f"u{size}"))
    assert TensorMap(array, box=(8, 16), swizzle="none", dtype=fa4_name).format == ptx_name
    with pytest.raises(LaunchArgumentError, match="must match the array's"):
        TensorMap(np.zeros((8, 16), np.uint64), box=(8, 16), swizzle="none", dtype=fa4_name)
