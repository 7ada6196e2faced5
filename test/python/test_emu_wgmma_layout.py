"""fa4_mlir.emu.isa.wgmma_layout against the PTX ISA's wgmma "Matrix Descriptor Format", "Shared
Memory Matrix Layout" / "Canonical Layouts" and "Register Fragments" figures.

Operand images are made the way kernels make them: TMA loads (fa4_mlir.emu.tensormap) of tiles with a
swizzle, read back through descriptors built as CUTLASS and our compiler build them.
"""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir.emu.errors import MemoryFault, ProtocolError, Unsupported
from fa4_mlir.emu.isa.wgmma_layout import (Descriptor, a_fragment_coords, accumulator_coords,
                                           decode_descriptor, encode_descriptor, load_operand)
from fa4_mlir.emu.tensormap import TensorMap, tma_load

WIDTH = {"128B": 128, "64B": 64, "32B": 32}


class FakeMemory:
    def __init__(self, array: np.ndarray):
        self.buf = np.ascontiguousarray(array).reshape(-1).view(np.uint8)

    def resolve(self, address, nbytes, what):
        assert 0x1000 <= address and address + nbytes <= 0x1000 + self.buf.size
        return self.buf, address - 0x1000


def stage(tile: np.ndarray, inner: int, mode: str, smem: np.ndarray, base: int,
          rows: int | None = None) -> int:
    """TMA-load ``tile`` (rows x cols, innermost contiguous) into ``smem`` at ``base`` as boxes of
    ``rows`` x ``inner`` columns, one after another (column blocks, as kernels do for a head dim wider
    than the swizzle); returns the bytes of one box."""
    rows = tile.shape[0] if rows is None else rows
    mem = FakeMemory(tile)
    tmap = TensorMap(tile, box=(rows, inner), swizzle=mode).bind(0x1000)
    for j in range(tile.shape[1] // inner):
        tma_load(tmap, mem, (j * inner, 0), smem, base + j * tmap.box_bytes)
    return tmap.box_bytes


def raw_descriptor(start, lbo, sbo, layout, base=0):
    """Bit by bit from the ISA table (independent of encode_descriptor)."""
    return (((start >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32
            | base << 49 | layout << 62)


# -- descriptors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout,mode", [(0, "none"), (1, "128B"), (2, "64B"), (3, "32B")])
def test_decode_fields(layout, mode):
    rng = np.random.default_rng(layout)
    for _ in range(50):
        start, lbo, sbo = (int(v) * 16 for v in rng.integers(0, 1 << 14, 3))
        d = decode_descriptor(raw_descriptor(start, lbo, sbo, layout))
        assert d == Descriptor(start, lbo, sbo, 0, mode)
        assert encode_descriptor(start, lbo, sbo, mode) == raw_descriptor(start, lbo, sbo, layout)


def test_decode_isa_examples():
    # "Canonical Layouts" examples: K-major no-swizzle tf32 (LBO 64*4 -> 16, SBO 32*4 -> 8) and
    # MN-major 64B bf16 (LBO 256*2 -> 32, SBO 512*2 -> 64).
    d = decode_descriptor(16 << 16 | 8 << 32)
    assert (d.leading_byte_offset, d.stride_byte_offset, d.swizzle) == (256, 128, "none")
    d = decode_descriptor(32 << 16 | 64 << 32 | 2 << 62)
    assert (d.leading_byte_offset, d.stride_byte_offset, d.swizzle) == (512, 1024, "64B")
    # matrix-descriptor-encode keeps address bits 4..17 only; a negative (signed i64) value decodes too.
    assert decode_descriptor(raw_descriptor(0x3FFF0, 16, 1024, 1)).start_address == 0x3FFF0
    assert decode_descriptor(raw_descriptor(0x400, 16, 1024, 3) - (1 << 64)).swizzle == "32B"


def test_our_compilers_descriptors_decode_to_the_canonical_offsets():
    lower_wgmma = pytest.importorskip("fa4_mlir.passes.lower_wgmma")
    for mode, width in WIDTH.items():
        k_major = decode_descriptor(lower_wgmma.wgmma_descriptor_bits(mode) | (0x2400 >> 4))
        assert k_major == Descriptor(0x2400, 16, 8 * width, 0, mode)  # LBO unused (1), SBO = 8 rows
        mn_major = decode_descriptor(lower_wgmma.wgmma_descriptor_bits(mode, 8192) | (0x2400 >> 4))
        assert mn_major == Descriptor(0x2400, 8192, 8 * width, 0, mode)  # LBO = next M/N block


@pytest.mark.parametrize("bit", [14, 15, 30, 31, 46, 47, 48, 52, 57, 61])
def test_reserved_bits_are_an_error(bit):
    with pytest.raises(ProtocolError, match=rf"reserved bits .* must be 0, got bits \[{bit}\]"):
        decode_descriptor(raw_descriptor(0x400, 16, 1024, 1) | 1 << bit)


def test_base_offset():
    with pytest.raises(Unsupported, match="base offset must be 0 .*got base offset 3"):
        decode_descriptor(raw_descriptor(0x400, 16, 1024, 1, base=3))
    # "valid for all swizzling modes except the no-swizzle mode": ignored there
    assert decode_descriptor(raw_descriptor(0x400, 16, 128, 0, base=3)).base_offset == 3
    with pytest.raises(Unsupported, match="base offset must be 0"):
        load_operand(np.zeros(8192, np.uint8), Descriptor(1024, 16, 1024, 2, "128B"), 64, 16, 2, True)
    with pytest.raises(ProtocolError, match="64-bit value"):
        decode_descriptor(1 << 64)


# -- K-major operands -------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", list(WIDTH))
@pytest.mark.parametrize("rows", [64, 128])
def test_k_major_bf16_tile_each_k_step(mode, rows):
    width = WIDTH[mode]
    tile = np.arange(rows * 128, dtype=np.uint16).reshape(rows, 128)  # head dim 128: several boxes
    smem = np.zeros(96 * 1024, np.uint8)
    base = 2048
    box_bytes = stage(tile, width // 2, mode, smem, base)
    for ks in range(128 // 16):
        byte = 32 * ks  # kernels: +32 bytes per k16 step inside a row, next box past its end
        start = base + byte // width * box_bytes + byte % width
        desc = decode_descriptor(raw_descriptor(start, 16, 8 * width, {"128B": 1, "64B": 2, "32B": 3}[mode]))
        got = load_operand(smem, desc, rows, 16, 2, k_major=True)
        assert got.dtype == np.uint16 and got.shape == (rows, 16)
        assert (got == tile[:, 16 * ks:16 * ks + 16]).all(), (mode, ks)


def test_k_major_interleaved_core_matrices():
    # No swizzle: 8x16-byte core matrices; TMA boxes of 16-byte rows give SBO = 128 (next 8 rows)
    # and LBO = the box size (next 8 K elements).
    tile = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    smem = np.zeros(32 * 1024, np.uint8)
    box_bytes = stage(tile, 8, "none", smem, 1024)
    assert box_bytes == 64 * 16
    for ks in range(4):
        desc = Descriptor(1024 + 2 * ks * box_bytes, box_bytes, 128, 0, "none")
        assert (load_operand(smem, desc, 64, 16, 2, True) == tile[:, 16 * ks:16 * ks + 16]).all()


@pytest.mark.parametrize("elem_bytes,k", [(1, 32), (4, 8)])
def test_k_major_fp8_and_tf32(elem_bytes, k):
    dtype = {1: np.uint8, 4: np.uint32}[elem_bytes]
    cols = 128 // elem_bytes
    tile = (np.arange(64 * cols) % 251).astype(dtype).reshape(64, cols) if elem_bytes == 1 else \
        np.arange(64 * cols, dtype=dtype).reshape(64, cols)
    smem = np.zeros(32 * 1024, np.uint8)
    stage(tile, cols, "128B", smem, 4096)
    for ks in range(4):
        got = load_operand(smem, Descriptor(4096 + 32 * ks, 16, 1024, 0, "128B"), 64, k, elem_bytes, True)
        assert got.dtype == dtype and (got == tile[:, k * ks:k * ks + k]).all()


def test_unaligned_tile_reads_what_tma_wrote():
    # A tile 384 bytes past a 1024-byte boundary: TMA and wgmma both swizzle the absolute address.
    tile = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    smem = np.zeros(32 * 1024, np.uint8)
    stage(tile, 64, "128B", smem, 2048 + 384)
    for ks in range(4):
        got = load_operand(smem, Descriptor(2048 + 384 + 32 * ks, 16, 1024, 0, "128B"), 64, 16, 2, True)
        assert (got == tile[:, 16 * ks:16 * ks + 16]).all()


# -- MN-major (transposed) operands -----------------------------------------------------------------------

@pytest.mark.parametrize("mode", list(WIDTH))
def test_mn_major_b_each_k_step(mode):
    # B = V (K rows x N columns, N contiguous), e.g. P @ V: boxes of W/2 columns x all K rows, one
    # after another; LBO = block stride (next W bytes of N), SBO = 8 K-rows of W bytes.
    width = WIDTH[mode]
    v = np.arange(64 * 128, dtype=np.uint16).reshape(64, 128)
    smem = np.zeros(96 * 1024, np.uint8)
    block = stage(v, width // 2, mode, smem, 1024)
    for ks in range(64 // 16):
        desc = Descriptor(1024 + ks * 16 * width, block, 8 * width, 0, mode)
        got = load_operand(smem, desc, 128, 16, 2, k_major=False)
        assert (got == v[16 * ks:16 * ks + 16, :].T).all(), (mode, ks)


def test_mn_major_interleaved():
    # No swizzle: core matrices of 8 K-rows x 16 bytes of N; SBO = next 8 N (a box), LBO = next 8 K.
    v = np.arange(32 * 64, dtype=np.uint16).reshape(32, 64)
    smem = np.zeros(32 * 1024, np.uint8)
    box_bytes = stage(v, 8, "none", smem, 1024)
    for ks in range(2):
        desc = Descriptor(1024 + ks * 16 * 16, 128, box_bytes, 0, "none")
        assert (load_operand(smem, desc, 64, 16, 2, False) == v[16 * ks:16 * ks + 16].T).all()


def test_operand_errors():
    smem = np.zeros(4096, np.uint8)
    desc = Descriptor(1024, 16, 1024, 0, "128B")
    with pytest.raises(MemoryFault, match="reads shared address 0x1000, outside shared memory"):
        load_operand(smem, desc, 64, 16, 2, True)
    with pytest.raises(ProtocolError, match="K must span 32 bytes"):
        load_operand(smem, desc, 64, 32, 2, True)
    with pytest.raises(ProtocolError, match="MN-major.* must have 16-bit elements"):
        load_operand(smem, desc, 64, 32, 1, False)
    with pytest.raises(ProtocolError, match="multiple of 8"):
        load_operand(smem, desc, 60, 16, 2, True)


def test_a_wgmma_computed_from_the_layouts():
    # D = A @ B^T with A, B K-major bf16-like integers, D scattered to threads by accumulator_coords.
    rng = np.random.default_rng(0)
    a = rng.integers(0, 7, (64, 64)).astype(np.uint16)
    b = rng.integers(0, 7, (32, 64)).astype(np.uint16)
    smem = np.zeros(64 * 1024, np.uint8)
    stage(a, 64, "128B", smem, 1024)
    stage(b, 64, "128B", smem, 16384)
    d = np.zeros((64, 32))
    for ks in range(4):
        fa = load_operand(smem, Descriptor(1024 + 32 * ks, 16, 1024, 0, "128B"), 64, 16, 2, True)
        fb = load_operand(smem, Descriptor(16384 + 32 * ks, 16, 1024, 0, "128B"), 32, 16, 2, True)
        d += fa.astype(float) @ fb.astype(float).T
    expected = a.astype(float) @ b.astype(float).T
    assert (d == expected).all()
    row, col = accumulator_coords(32)
    registers = d[row, col]  # thread t, register i
    assert registers[5, 0] == expected[1, 2] and registers[37, 3] == expected[16 + 1 + 8, 3]


# -- register fragments -----------------------------------------------------------------------------------

@pytest.mark.parametrize("n", list(range(8, 257, 8)))
def test_accumulator_fragment_is_a_bijection(n):
    row, col = accumulator_coords(n)
    assert row.shape == col.shape == (128, n // 2)
    flat = np.sort((row * n + col).reshape(-1))
    assert (flat == np.arange(64 * n)).all()


def test_accumulator_fragment_matches_the_figure():
    row, col = accumulator_coords(16)
    # Figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D": T0 holds d0,d1 at
    # row 0 columns 0,1; d2,d3 at row 8; d4..d7 8 columns right. T5: row 1, columns 2,3. Warp 1
    # starts at row 16.
    assert list(zip(row[0], col[0])) == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    assert list(zip(row[5, :2], col[5, :2])) == [(1, 2), (1, 3)]
    assert (row[32:64].min(), row[32:64].max()) == (16, 31)
    t, i = np.arange(128)[:, None], np.arange(64)[None, :]
    r, c = accumulator_coords(128)
    assert (r == 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 2) % 2)).all()
    assert (c == 8 * (i // 4) + 2 * (t % 4) + i % 2).all()


@pytest.mark.parametrize("elem_bytes,k", [(2, 16), (1, 32), (4, 8)])
def test_a_fragment_is_a_bijection(elem_bytes, k):
    row, col = a_fragment_coords(k, elem_bytes)
    assert row.shape == (128, k // 2)
    assert (np.sort((row * k + col).reshape(-1)) == np.arange(64 * k)).all()


def test_a_fragment_matches_the_figures():
    r16, c16 = a_fragment_coords(16, 2)
    ra, ca = accumulator_coords(16)
    assert (r16 == ra).all() and (c16 == ca).all()  # k16: the m16n8k16 pattern, per warp
    r8, c8 = a_fragment_coords(32, 1)  # fp8: four consecutive K per register
    assert list(zip(r8[1], c8[1]))[:5] == [(0, 4), (0, 5), (0, 6), (0, 7), (8, 4)]
    assert (c8[0, 8], r8[0, 8]) == (16, 0)
    rt, ct = a_fragment_coords(8, 4)  # tf32: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
    assert list(zip(rt[6], ct[6])) == [(1, 2), (9, 2), (1, 6), (9, 6)]
    with pytest.raises(ProtocolError, match="K must span 32 bytes"):
        a_fragment_coords(16, 1)
    with pytest.raises(ProtocolError, match="N must be a multiple of 8"):
        accumulator_coords(12)
