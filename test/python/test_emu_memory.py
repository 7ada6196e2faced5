"""Global memory placement (``fa4_mlir.emu.memory``): how host arrays become global allocations."""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu.memory import GlobalMemory


def _foreign_strided(rows: int, cols: int, row_stride: int) -> tuple[bytearray, np.ndarray]:
    """A strided uint16 view of a buffer NumPy does not own (like a torch tensor's .numpy() of a
    slice): its own root, not contiguous."""
    buf = bytearray(rng_bytes(rows * row_stride * 2))
    return buf, np.ndarray((rows, cols), np.uint16, buffer=buf, strides=(row_stride * 2, 2))


def rng_bytes(n: int) -> bytes:
    return np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_a_strided_foreign_view_behind_a_tensor_map_is_placed_in_place():
    buf, view = _foreign_strided(5, 64, 96)
    assert view.base is not None and not view.flags.c_contiguous
    memory = GlobalMemory()
    address = memory.add_array(view, "q", strided=True)
    for row in range(5):  # the view's own strides address its rows
        got, off = memory.resolve(address + row * 192, 128, "read")
        assert np.array_equal(got[off:off + 128].view(np.uint16), view[row])
    got, off = memory.resolve(address + 4 * 192, 128, "write")
    got[off:off + 2] = [0x34, 0x12]  # a write lands in the caller's buffer at once
    assert view[4, 0] == 0x1234 and buf[4 * 192:4 * 192 + 2] == b"\x34\x12"


def test_a_strided_foreign_view_behind_a_pointer_is_a_contiguous_copy_written_back():
    _, view = _foreign_strided(3, 8, 16)
    memory = GlobalMemory()
    address = memory.add_array(view, "p")
    got, off = memory.resolve(address, 3 * 8 * 2, "read")  # the kernel indexes it as contiguous
    assert np.array_equal(got[off:off + 48].view(np.uint16).reshape(3, 8), view)
    got[off:off + 48] = 0
    memory.finish()
    assert not view.any()
