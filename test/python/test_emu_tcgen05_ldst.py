"""tcgen05.ld / tcgen05.st in every shape, .num and .pack::16b / .unpack::16b, on hand-written PTX.

The expected (lane, column) of every register is derived here independently of the emulator's table
(``isa.tmem_fragments``): from the thread/value -> bit layouts that CUTLASS's
``Copy_Traits<SM100_TMEM_LOAD_*>`` give for the ISA's "Matrix fragments" figures (a CuTe layout is a
(shape, stride) pair: a coordinate's offset is the dot product of its colexicographic digits with the
strides), then a logical bit ``b`` of a TMEM row is column ``b // 32`` (``b // 16``, low half, packed).
Stores are checked by reading the tensor memory directly (the test keeps the ``TensorMemory``
objects), loads by seeding the tensor memory with a known pattern, and one shape against another by
a store with one and a load with the other.
"""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir import emu
from fa4_mlir.emu import tmem as tmem_module

HEADER = """
.version 8.7
.target sm_100a
.address_size 64
.shared .align 4 .b8 slot[4];
"""


# -- the independent mapping ----------------------------------------------------------------------------
def _offset(coord: int, shape, stride) -> int:
    """CuTe: the offset of linear coordinate ``coord`` in the layout shape:stride (nested tuples)."""
    if isinstance(shape, int):
        return coord * stride
    total = 0
    for s, d in zip(shape, stride):
        size = int(np.prod(_flat(s)))
        total += _offset(coord % size, s, d)
        coord //= size
    return total


def _flat(s):
    return [s] if isinstance(s, int) else [x for y in s for x in _flat(y)]


def _dst_layout(shape: str, num: int):
    """CUTLASS's DstLayout (thread, value-bit) -> logical bit for the Nx op of ``shape``, and R, the
    bits of one TMEM lane row the op moves (copy_traits_sm100.hpp; the 1x/2x forms generalised by
    their repeat stride)."""
    if shape == "32x32b":
        rbits = 32 * num
        return (32, rbits), (rbits, 1), rbits
    if shape == "16x64b":
        rbits = 64 * num
        return ((2, 2, 8), (32, num)), ((8 * rbits, 32, rbits), (1, 64)), rbits
    if shape == "16x128b":
        rbits = 128 * num
        return ((4, 8), (32, 2, num)), ((32, rbits), (1, 8 * rbits, 128)), rbits
    if shape == "16x256b":
        rbits = 256 * num
        return ((4, 8), (64, 2, num)), ((64, rbits), (1, 8 * rbits, 256)), rbits
    raise AssertionError(shape)


def expected_cells(shape: str, num: int, packed: bool) -> dict:
    """{(thread, register): (lane offset, column offset, block)} of every register, from the layouts."""
    out = {}
    if shape == "16x32bx2":  # two 16x32b halves: thread t -> lane t % 16 of block t // 16, register i -> column i
        for t in range(32):
            for r in range(num):
                out[t, r] = (t % 16, 2 * r if packed else r, t // 16)
        return out
    (tshape, vshape), (tstride, vstride), rbits = _dst_layout(shape, num)
    nregs = int(np.prod(_flat(vshape))) // 32
    for t in range(32):
        for r in range(nregs):
            bit = _offset(t, tshape, tstride) + _offset(32 * r, vshape, vstride)
            lane, in_row = divmod(bit, rbits)
            out[t, r] = (lane, in_row // 16 if packed else in_row // 32, 0)
    return out


def test_the_independent_mapping_covers_each_cell_once():
    for shape, nums in SHAPE_NUMS.items():
        for num in nums:
            cells = expected_cells(shape, num, False)
            assert len(set(cells.values())) == len(cells), (shape, num)
    # spot checks against the ISA's prose: 16x64b moves 64 bits (2 columns) of 16 lanes per repeat
    assert expected_cells("16x64b", 1, False)[5, 0] == (8 + 1, 0, 0)   # t=5: lane 8*(5%2) + 5//4, column (5//2)%2
    assert expected_cells("16x256b", 1, False)[6, 3] == (9, 5, 0)       # r=3: h=1, e=1; t=6: lane 1+8, column 2*2+1


SHAPE_NUMS = {"32x32b": (1, 2, 8, 128), "16x64b": (1, 4, 128), "16x128b": (1, 2, 64), "16x256b": (1, 2, 32),
              "16x32bx2": (1, 4, 128)}
REGS_PER = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
COLS_PER = {"32x32b": 1, "16x64b": 2, "16x128b": 4, "16x256b": 8, "16x32bx2": 1}
CASES = [(s, n, p) for s, nums in SHAPE_NUMS.items() for n in nums for p in (False, True)]


# -- kernels ------------------------------------------------------------------------------------------------
def kernel(body: str, nregs: int = 8) -> emu.Program:
    return emu.load_ptx(HEADER + f"""
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b32 %v<{max(nregs, 1)}>;
    .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;                 // warp
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra ALLOCATED;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 512;
ALLOCATED:
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.u32 %r2, [slot];
{body}
    tcgen05.fence::before_thread_sync;     // order this warp's tcgen05 accesses before the dealloc
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    @%p1 bra FREED;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 512;
FREED:
    ret;
}}
""")


def vec(n: int) -> str:
    return "{" + ", ".join(f"%v{i}" for i in range(n)) + "}"


def shape_mods(shape: str, num: int, packed: bool, action: str) -> str:
    pack = ("" if not packed else ".pack::16b" if action == "ld" else ".unpack::16b")
    return f"tcgen05.{action}.sync.aligned.{shape}.x{num}{pack}.b32"


def address_code(sub_lane: int, col: int) -> str:
    """%r3 = the warp's TMEM address: lane 32*(warp % 4) + sub_lane, column ``col``."""
    return f"""
    and.b32 %r3, %r1, 3;
    shl.b32 %r3, %r3, 5;
    add.u32 %r3, %r3, {sub_lane};
    shl.b32 %r3, %r3, 16;
    add.u32 %r3, %r3, %r2;
    add.u32 %r3, %r3, {col};
"""


def access(shape: str, num: int, packed: bool, action: str, split: int = 64) -> str:
    nregs = REGS_PER[shape] * num
    imm = f", {split}" if shape == "16x32bx2" else ""
    if action == "ld":
        return (f"    {shape_mods(shape, num, packed, 'ld')} {vec(nregs)}, [%r3]{imm};\n"
                "    tcgen05.wait::ld.sync.aligned;\n")
    return f"    {shape_mods(shape, num, packed, 'st')} [%r3]{imm}, {vec(nregs)};\n    tcgen05.wait::st.sync.aligned;\n"


def fill_registers(nregs: int) -> str:
    """%v<r> = (tid + 1) << 16 | r: both 16-bit halves tell thread and register apart."""
    code = "    add.u32 %r4, %r0, 1;\n    shl.b32 %r4, %r4, 16;\n"
    return code + "".join(f"    or.b32 %v{r}, %r4, {r};\n" for r in range(nregs))


def store_registers(nregs: int) -> str:
    """out[tid, r] = %v<r>."""
    code = f"""
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r0, {4 * nregs};
    add.s64 %rd1, %rd1, %rd2;
"""
    return code + "".join(f"    st.global.u32 [%rd1+{4 * r}], %v{r};\n" for r in range(nregs))


@pytest.fixture
def memories(monkeypatch):
    """Every TensorMemory the launch makes, seeded with ``pattern`` (lane << 9 | column | 0xBEEF0000):
    the test reads and writes cells directly."""
    made = []
    original = tmem_module.TensorMemory.__init__

    def init(self):
        original(self)
        lanes, cols = np.indices(self.cells.shape, dtype=np.uint32)
        self.cells[:] = np.uint32(0xBEEF0000) | (lanes << np.uint32(9)) | cols
        made.append(self)
    monkeypatch.setattr(tmem_module.TensorMemory, "__init__", init)
    return made


def pattern(lane, col):
    return np.uint32(0xBEEF0000) | (np.uint32(lane) << np.uint32(9)) | np.uint32(col)


def placement(shape, num, packed, col):
    """(first column, split offset): ``col`` unless the footprint needs all 512 columns; a 16x32bx2's
    second half right after its first."""
    width = COLS_PER[shape] * num * (2 if packed else 1)
    blocks = 2 if shape == "16x32bx2" else 1
    return (col if blocks * width + col <= 512 else 0), (width if blocks == 2 else 0)


def _block_start(shape, warp, sub_lane, col, split):
    lane0 = 32 * (warp % 4) + sub_lane
    return [(lane0, col), (lane0, col + split)] if shape == "16x32bx2" else [(lane0, col)]


# -- stores: the cells each register lands in ----------------------------------------------------------------
@pytest.mark.parametrize("shape, num, packed", CASES, ids=[f"{s}.x{n}{'.unpack' if p else ''}" for s, n, p in CASES])
def test_store_lands_each_register_in_its_fragment_cell(memories, shape, num, packed):
    nregs = REGS_PER[shape] * num
    sub_lane = 16 if shape != "32x32b" else 0     # a 16-lane block in the upper half of the warp's quarter
    col, split = placement(shape, num, packed, 8)
    body = address_code(sub_lane, col) + fill_registers(nregs) + access(shape, num, packed, "st", split)
    kernel(body, nregs).launch("k", block=(128, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])
    (memory,) = memories
    cells = memory.cells
    want = {}
    for warp in range(4):
        starts = _block_start(shape, warp, sub_lane, col, split)
        for (t, r), (dl, dc, blk) in expected_cells(shape, num, packed).items():
            lane0, col0 = starts[blk]
            value = (32 * warp + t + 1) << 16 | r
            if packed:   # two columns, one 16-bit half each, in their low halves
                want[lane0 + dl, col0 + dc] = value & 0xFFFF
                want[lane0 + dl, col0 + dc + 1] = value >> 16
            else:
                want[lane0 + dl, col0 + dc] = value
    for (lane, c), v in want.items():
        got = int(cells[lane, c])
        if packed:  # the upper halves: the emulator's 0xA5A5 (undefined in the ISA)
            assert got == 0xA5A50000 | v, (lane, c, hex(got), hex(v))
        else:
            assert got == v, (lane, c, hex(got), hex(v))
    touched = np.zeros(cells.shape, bool)
    touched[tuple(np.array(list(want)).T)] = True
    lanes, cols = np.indices(cells.shape)
    np.testing.assert_array_equal(cells[~touched], pattern(lanes[~touched], cols[~touched]))  # nothing else


# -- loads: the cell each register comes from ------------------------------------------------------------------
@pytest.mark.parametrize("shape, num, packed", CASES, ids=[f"{s}.x{n}{'.pack' if p else ''}" for s, n, p in CASES])
def test_load_reads_each_register_from_its_fragment_cell(memories, shape, num, packed):
    nregs = REGS_PER[shape] * num
    sub_lane = 16 if shape != "32x32b" else 0
    col, split = placement(shape, num, packed, 4)
    body = address_code(sub_lane, col) + access(shape, num, packed, "ld", split) + store_registers(nregs)
    out = np.zeros((128, nregs), np.uint32)
    kernel(body, nregs).launch("k", block=(128, 1, 1), smem_bytes=1024, args=[out])
    want = np.zeros_like(out)
    for warp in range(4):
        starts = _block_start(shape, warp, sub_lane, col, split)
        for (t, r), (dl, dc, blk) in expected_cells(shape, num, packed).items():
            lane0, col0 = starts[blk]
            lane, c = lane0 + dl, col0 + dc
            if packed:
                want[32 * warp + t, r] = (pattern(lane, c) & 0xFFFF) | (pattern(lane, c + 1) & 0xFFFF) << 16
            else:
                want[32 * warp + t, r] = pattern(lane, c)
    np.testing.assert_array_equal(out, want)


# -- one shape against another ------------------------------------------------------------------------------
@pytest.mark.parametrize("st_shape, ld_shape, st_num, ld_num, packed", [
    ("16x256b", "16x64b", 2, 8, False),
    ("16x64b", "16x128b", 8, 4, False),
    ("16x128b", "16x256b", 4, 2, True),
    ("16x256b", "16x64b", 1, 4, True),
])
def test_a_store_of_one_shape_reads_back_through_another(memories, st_shape, ld_shape, st_num, ld_num, packed):
    # Same 16 lanes x 16 (packed: 32) columns written by one shape and read by the other.
    assert COLS_PER[st_shape] * st_num == COLS_PER[ld_shape] * ld_num
    st_regs, ld_regs = REGS_PER[st_shape] * st_num, REGS_PER[ld_shape] * ld_num
    body = (address_code(0, 32) + fill_registers(st_regs) + access(st_shape, st_num, packed, "st")
            + access(ld_shape, ld_num, packed, "ld") + store_registers(ld_regs))
    out = np.zeros((128, ld_regs), np.uint32)
    kernel(body, max(st_regs, ld_regs)).launch("k", block=(128, 1, 1), smem_bytes=1024, args=[out])
    # cell -> the 32-bit value the store put there (packed: per 16-bit half), then what the load sees
    held = {}
    for (t, r), (dl, dc, _) in expected_cells(st_shape, st_num, packed).items():
        held[dl, dc] = t, r
    for warp in range(4):
        for (t, r), (dl, dc, _) in expected_cells(ld_shape, ld_num, packed).items():
            ts, rs = held[dl, dc]
            assert out[32 * warp + t, r] == ((32 * warp + ts + 1) << 16 | rs), (warp, t, r)


# -- rules ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", list(SHAPE_NUMS))
@pytest.mark.parametrize("lane", [0, 56])
def test_every_shape_keeps_to_the_warps_32_lanes(shape, lane):
    # warp 1 reaches lanes 32..63: lane 0 is warp 0's, and a block at lane 56 would run to lane 71 (16 lanes)
    # or 87 (32 lanes).
    body = f"""
    setp.ne.u32 %p2, %r1, 1;
    @%p2 bra SKIP;
    add.u32 %r3, %r2, {lane << 16};
""" + access(shape, 1, False, "ld", 8) + "SKIP:\n"
    rows = 32 if shape == "32x32b" else 16
    with pytest.raises(emu.ProtocolError, match=rf"warp 1 \(warp 1 of its warpgroup\) reaches tensor-memory lanes "
                                                rf"32\.\.63 only; this access needs lanes {lane}\.\.{lane + rows - 1}"):
        kernel(body).launch("k", block=(64, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])


@pytest.mark.parametrize("mods, regs, text", [
    ("16x128b.x128", 256, r"\.16x128b \.num must be one of \.x1, \.x2, \.x4, \.x8, \.x16, \.x32, \.x64, got \.x128"),
    ("16x256b.x64", 256, r"\.16x256b \.num must be one of .*\.x32, got \.x64"),
    ("32x32b.x3", 3, r"\.32x32b \.num must be one of .*, got \.x3"),
    ("16x64b.x256", 256, r"\.16x64b \.num must be one of .*\.x128, got \.x256"),
    ("16x16b.x1", 1, r"shape must be one of \.32x32b, \.16x64b, \.16x128b, \.16x256b, \.16x32bx2, got \.16x16b"),
    ("16x128b.x2", 2, r"tcgen05\.ld\.16x128b\.x2 needs 4 registers \(the ISA's \.num table\), got 2"),
    ("16x256b.x1.unpack::16b", 4, r"tcgen05\.ld takes \.pack::16b, not \.unpack::16b"),
])
def test_illegal_shape_num_and_register_counts_are_syntax_errors(mods, regs, text):
    body = f"    tcgen05.ld.sync.aligned.{mods}.b32 {vec(regs)}, [%r2];\n    tcgen05.wait::ld.sync.aligned;\n"
    with pytest.raises(emu.PtxSyntaxError, match=text):
        kernel(body, regs).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])


def test_st_with_pack_and_ld_red_are_rejected():
    body = "    tcgen05.st.sync.aligned.32x32b.x1.pack::16b.b32 [%r2], {%v0};\n"
    with pytest.raises(emu.PtxSyntaxError, match=r"tcgen05\.st takes \.unpack::16b, not \.pack::16b"):
        kernel(body).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])
    body = "    tcgen05.ld.red.sync.aligned.32x32b.x2.max.abs.f32 {%v0, %v1}, %v2, [%r2];\n"
    with pytest.raises(emu.Unsupported, match=r"tcgen05\.ld\.red .* is not modelled"):
        kernel(body).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])


def test_every_thread_must_give_the_same_taddr():
    body = "    add.u32 %r3, %r2, %r0;\n    tcgen05.ld.sync.aligned.16x64b.x1.b32 {%v0}, [%r3];\n"
    with pytest.raises(emu.ProtocolError, match=r"every thread of tcgen05\.ld must give the same taddr, got "
                                                r"0x00000000 in lane 0 and 0x00000001 in lane 1"):
        kernel(body).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])


def test_a_16x128b_store_owns_its_cells_until_wait_st():
    body = fill_registers(4) + """
    tcgen05.st.sync.aligned.16x128b.x2.b32 [%r2], {%v0, %v1, %v2, %v3};
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%v4}, [%r2+7];
    tcgen05.wait::ld.sync.aligned;
    tcgen05.wait::st.sync.aligned;
"""
    with pytest.raises(emu.ProtocolError, match=r"reads tensor memory lanes 0\.\.15, columns 7\.\.7 that the "
                                                r"tcgen05\.st at line \d+ \(warp 0 of CTA \(0, 0, 0\)\) still writes"):
        kernel(body).launch("k", block=(32, 1, 1), smem_bytes=1024, args=[np.zeros(1, np.uint32)])
