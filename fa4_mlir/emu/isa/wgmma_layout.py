"""Where ``wgmma.mma_async`` finds its operands: shared-memory matrix descriptors, the canonical
shared-memory layouts they describe, and the register fragments of A (RS form) and of D.

Sources (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" -> "Register Fragments
and Shared Memory Matrix Layouts": "Register Fragments" (figures "WGMMA .m64nNk16 / .m64nNk8 /
.m64nNk32 register fragment layout for matrix A / accumulator matrix D"), "Shared Memory Matrix
Layout" -> "Major-ness supported by Strides" ("Leading Dimension Byte Offset", "Stride Dimension Byte
Offset"), "Canonical Layouts", "Matrix Descriptor Format").

Canonical layouts (CuTe notation from the ISA, in elements; ``T = 16 / elem_bytes`` elements make 16
bytes, ``W`` is the swizzle width 32/64/128 bytes, ``x = W / 16``). For an element at (``mn``, ``kk``)
with ``mn`` the M (A) or N (B) index and ``kk`` the K index, the byte offset from the start address is:

    K-major, no swizzle   ((8,m),(T,2k)):((1T,SBO),(1,LBO))
        (mn % 8) * 16 + (mn // 8) * SBO + (kk % T) * eb + (kk // T) * LBO
        core matrices of 8 rows x 16 bytes; LBO steps along K, SBO along M/N.
    K-major, swizzled     ((8,m),(T,2k)):((xT,SBO),(1,T))
        (mn % 8) * W + (mn // 8) * SBO + kk * eb
        rows of W bytes; SBO steps 8 rows; LBO is "not used, assumed to be 1".
    MN-major, no swizzle  ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
        (mn % T) * eb + (mn // T) * SBO + (kk % 8) * 16 + (kk // 8) * LBO
        core matrices of 8 K-rows x 16 bytes; SBO steps along M/N, LBO along K.
    MN-major, swizzled    ((T,x,m),(8,k)):((1,T,LBO),(xT,SBO))
        (mn % (W/eb)) * eb + (mn // (W/eb)) * LBO + (kk % 8) * W + (kk // 8) * SBO
        K-rows of W bytes; LBO steps from one W-byte block of M/N to the next, SBO steps 8 K-rows.

The address read is then ``swizzle(start + offset)`` (``Swizzle<1|2|3,4,3>`` applied to the absolute
shared address; see ``fa4_mlir.emu.tensormap.swizzle``): with base offset 0 the ISA anchors the
pattern at 1024/512/256-byte boundaries, which is what the absolute address bits give. So a kernel that
steps K inside a 128B-swizzled row by adding 32 bytes to the start address reads what a TMA load with
the same swizzle wrote.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from fa4_mlir.emu.errors import MemoryFault, ProtocolError, Unsupported
from fa4_mlir.emu.tensormap import swizzle

_LAYOUTS = {0: "none", 1: "128B", 2: "64B", 3: "32B"}
_LAYOUT_CODES = {v: k for k, v in _LAYOUTS.items()}
_WIDTH = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
# Bits the wgmma descriptor leaves undefined: 14-15, 30-31, 46-48, 52-61.
_RESERVED = (0x3 << 14) | (0x3 << 30) | (0x7 << 46) | (0x3FF << 52)
_STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32}
_REPEAT = {"128B": 1024, "64B": 512, "32B": 256}  # "Starting address of the repeating pattern"


@dataclasses.dataclass(frozen=True)
class Descriptor:
    """A decoded wgmma matrix descriptor; addresses and offsets in bytes."""

    start_address: int
    leading_byte_offset: int
    stride_byte_offset: int
    base_offset: int
    swizzle: str


def decode_descriptor(desc: int) -> Descriptor:
    """Decode the 64-bit ``desc`` per the ISA's "Matrix Descriptor Format" (wgmma, sm_90):

        bits 0-13   matrix-descriptor-encode(start address) = (addr & 0x3FFFF) >> 4
        bits 16-29  matrix-descriptor-encode(leading dimension byte offset)
        bits 32-45  matrix-descriptor-encode(stride dimension byte offset)
        bits 49-51  matrix base offset (valid for the swizzled modes only)
        bits 62-63  swizzle mode: 0 none (or interleave), 1 128B, 2 64B, 3 32B

    Reserved bits set are a ``ProtocolError``. A non-zero base offset with a swizzled mode (the
    pattern starting off its 1024/512/256-byte boundary) is ``Unsupported``: the emulator anchors the
    pattern at the absolute address. The ISA says the base offset is not valid with no swizzle; it is
    ignored there. (tcgen05's shared-memory descriptor differs: a fixed 0b001 at bits 46-48 and a 3-bit
    mode at 61-63; this decoder is for wgmma only.)
    """
    desc = int(desc)
    if -(1 << 63) <= desc < 0:
        desc += 1 << 64
    if not 0 <= desc < 1 << 64:
        raise ProtocolError(f"a wgmma matrix descriptor must be a 64-bit value, got {desc}")
    reserved = desc & _RESERVED
    if reserved:
        bits = [b for b in range(64) if reserved >> b & 1]
        raise ProtocolError(f"wgmma matrix descriptor reserved bits (14-15, 30-31, 46-48, 52-61) must be 0, "
                            f"got bits {bits} set in 0x{desc:016x}")
    mode = _LAYOUTS[desc >> 62 & 3]
    base = desc >> 49 & 7
    if base and mode != "none":
        raise Unsupported(_base_offset_message(base, mode, f" in 0x{desc:016x}"))
    return Descriptor(start_address=(desc & 0x3FFF) << 4, leading_byte_offset=(desc >> 16 & 0x3FFF) << 4,
                      stride_byte_offset=(desc >> 32 & 0x3FFF) << 4, base_offset=base, swizzle=mode)


def _base_offset_message(base: int, mode: str, where: str = "") -> str:
    return (f"wgmma matrix descriptor base offset must be 0 (the {mode} pattern starting at a "
            f"{_REPEAT[mode]}-byte boundary; other offsets are not emulated), got base offset {base}{where}")


def encode_descriptor(start_address: int, leading_byte_offset: int, stride_byte_offset: int,
                      swizzle_mode: str = "128B", base_offset: int = 0) -> int:
    """The descriptor ``decode_descriptor`` inverts (for tests and tools); byte values are encoded
    with matrix-descriptor-encode, ``(x & 0x3FFFF) >> 4``."""
    if swizzle_mode not in _LAYOUT_CODES:
        raise ProtocolError(f"swizzle mode must be one of {', '.join(_LAYOUT_CODES)}, got {swizzle_mode!r}")

    def enc(x):
        return (int(x) & 0x3FFFF) >> 4

    return (enc(start_address) | enc(leading_byte_offset) << 16 | enc(stride_byte_offset) << 32
            | (int(base_offset) & 7) << 49 | _LAYOUT_CODES[swizzle_mode] << 62)


@functools.lru_cache(maxsize=512)
def _operand_index(lbo: int, sbo: int, mode: str, rows: int, k: int, elem_bytes: int, k_major: bool,
                   phase: int) -> tuple[np.ndarray, int, int]:
    """Byte addresses, relative to ``start - phase`` (``phase = start % 1024``), of every byte of the
    (rows, k) operand, shape (rows, k, elem_bytes); with their min and max."""
    mn = np.arange(rows, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    eb, t, width = elem_bytes, 16 // elem_bytes, _WIDTH[mode]
    if k_major and not width:
        off = (mn % 8) * 16 + (mn // 8) * sbo + (kk % t) * eb + (kk // t) * lbo
    elif k_major:
        off = (mn % 8) * width + (mn // 8) * sbo + kk * eb
    elif not width:
        off = (mn % t) * eb + (mn // t) * sbo + (kk % 8) * 16 + (kk // 8) * lbo
    else:
        per_row = width // eb
        off = (mn % per_row) * eb + (mn // per_row) * lbo + (kk % 8) * width + (kk // 8) * sbo
    index = swizzle(off + phase, mode)[..., None] + np.arange(eb, dtype=np.int64)
    index.setflags(write=False)
    return index, int(index.min()), int(index.max())


def load_operand(smem: np.ndarray, desc: Descriptor, rows: int, k: int, elem_bytes: int,
                 k_major: bool, transposable: tuple = (2,)) -> np.ndarray:
    """The (rows, k) matrix of raw element bits (uint16 for 16-bit types, uint8 for fp8, uint32 for
    tf32) that ``desc`` describes in ``smem`` (uint8, indexed by shared-window address).

    ``rows`` is M (64) for A or N for B, ``k`` the instruction's K (16 for 16-bit types, 32 for fp8, 8
    for tf32: always 32 bytes). ``k_major`` is ``imm-trans == 0``; MN-major (transposed) operands exist
    for 16-bit types only (``transposable``: the element sizes an MN-major operand may have; tcgen05.mma
    also allows 8-bit ones). Row ``i`` of the result is M/N index ``i``; column ``j`` is K index ``j``.
    """
    if not isinstance(desc, Descriptor):
        desc = decode_descriptor(desc)
    if elem_bytes not in _STORAGE:
        raise ProtocolError(f"wgmma operand elements must be 1, 2 or 4 bytes, got {elem_bytes}")
    if k * elem_bytes != 32:
        raise ProtocolError(f"wgmma K must span 32 bytes ({32 // elem_bytes} elements of {elem_bytes} "
                            f"bytes), got k={k}")
    if rows <= 0 or rows % 8:
        raise ProtocolError(f"wgmma operand rows (M or N) must be a positive multiple of 8, got {rows}")
    if not k_major and elem_bytes not in transposable:
        sizes = " or ".join(f"{8 * b}-bit" for b in transposable)
        raise ProtocolError(f"a transposed (MN-major) operand must have {sizes} elements, got {elem_bytes}-byte "
                            f"elements")
    if desc.base_offset and desc.swizzle != "none":
        raise Unsupported(_base_offset_message(desc.base_offset, desc.swizzle))
    start = desc.start_address
    phase = start % 1024
    index, lo, hi = _operand_index(desc.leading_byte_offset, desc.stride_byte_offset, desc.swizzle, rows, k,
                                   elem_bytes, bool(k_major), phase)
    base = start - phase
    if base + lo < 0 or base + hi >= smem.size:
        bad = index.reshape(-1) + base
        first = int(bad[(bad < 0) | (bad >= smem.size)][0])
        raise MemoryFault(f"wgmma operand (descriptor start 0x{start:x}, LBO {desc.leading_byte_offset}, SBO "
                          f"{desc.stride_byte_offset}, swizzle {desc.swizzle}) reads shared address "
                          f"0x{first:x}, outside shared memory [0, 0x{smem.size:x})")
    raw = smem[index + base if base else index]
    return np.ascontiguousarray(raw).view(_STORAGE[elem_bytes]).reshape(rows, k)


def operand_addresses(desc: Descriptor, rows: int, k: int, elem_bytes: int, k_major: bool) -> np.ndarray:
    """The shared addresses (int64, flat) of every byte ``load_operand`` reads for these arguments,
    without its checks (it reports a bad descriptor when the wgmma reads)."""
    phase = desc.start_address % 1024
    index, _, _ = _operand_index(desc.leading_byte_offset, desc.stride_byte_offset, desc.swizzle, rows, k,
                                 elem_bytes, bool(k_major), phase)
    return index.reshape(-1) + (desc.start_address - phase)


def accumulator_coords(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of the D elements thread ``t`` (0..127 of the warpgroup) holds in register order
    d0, d1, ... for ``wgmma .m64nNk*`` with an f32 (or s32) accumulator: arrays of shape (128, n/2).

    ISA figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D": warp ``w = t/32``
    owns rows 16w..16w+15; lane ``l`` holds rows ``16w + l/4`` and ``+8`` at columns
    ``2*(l%4) + {0,1}`` of every 8-column block: ``row = 16*(t//32) + (t%32)//4 + 8*((i//2)%2)``,
    ``col = 8*(i//4) + 2*(t%4) + i%2``. (An f16 D packs the same elements two per register.)
    """
    if n % 8 or not 8 <= n <= 256:
        raise ProtocolError(f"wgmma N must be a multiple of 8 in [8, 256], got {n}")
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 2) % 2)
    col = 8 * (i // 4) + 2 * (t % 4) + i % 2
    return row + 0 * col, col + 0 * row


def a_fragment_coords(k: int, elem_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of the A elements thread ``t`` holds when A comes from registers (the RS form), in
    element order a0, a1, ... (four 32-bit registers, low half / low byte first): shape (128, k/2).

    ISA figures "WGMMA .m64nNk16 / .m64nNk32 / .m64nNk8 register fragment layout for matrix A": with
    ``p = 4 / elem_bytes`` elements per register, register ``r = i // p`` of lane ``l`` in warp ``w``
    holds row ``16w + l/4 + 8*(r%2)``, columns ``p*(l%4) + i%p + 4p*(r//2)``. For 16-bit types (k16)
    that is the accumulator pattern above with n = 16; for fp8 (k32) each register holds 4 consecutive
    K elements; for tf32 (k8) one.
    """
    if elem_bytes not in (1, 2, 4) or k * elem_bytes != 32:
        raise ProtocolError(f"wgmma A fragment K must span 32 bytes (k16 for 16-bit, k32 for 8-bit, k8 for "
                            f"tf32), got k={k} with {elem_bytes}-byte elements")
    p = 4 // elem_bytes
    t = np.arange(128)[:, None]
    i = np.arange(4 * p)[None, :]
    r = i // p
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * (r % 2)
    col = p * (t % 4) + i % p + 4 * p * (r // 2)
    return row + 0 * col, col + 0 * row
