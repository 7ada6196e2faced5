"""The descriptors of ``tcgen05.mma`` (sm_100a): the 32-bit instruction descriptor and the 64-bit
shared-memory matrix descriptor, decoded bit by bit, and the tensor-memory address format.

Sources (PTX ISA 8.7+, "TensorCore 5th Generation Family Instructions"):
- "Instruction descriptor" (table "Instruction descriptor format for .kind::tf32, .kind::f16,
  .kind::f8f6f4 and .kind::i8", Table 42 in PTX 8.7):

      bits 0-1   sparsity selector        bit 2   sparsity flag (1 = sparse)
      bit 3      saturate (integer kinds) bits 4-5 D format: 0 F16, 1 F32, 2 S32
      bits 7-9   A format                 bits 10-12  B format, per kind (below)
      bit 13     negate A                 bit 14  negate B
      bit 15     transpose A (0: K-major) bit 16  transpose B (0: K-major)
      bits 17-22 N >> 3                   bits 24-28  M >> 4
      bits 30-31 maximum shift (.ws only) bits 6, 23, 29 reserved

  A/B format codes: kind::f16 0 F16, 1 BF16; kind::tf32 2 TF32; kind::f8f6f4 0 E4M3, 1 E5M2, 3 E2M3,
  4 E3M2, 5 E2M1 (A and B may differ; 2, 6, 7 are not in the table). D format: kind::f16 F16 or F32,
  kind::tf32 F32. For kind::f8f6f4 the 8.7 table lists F32 only, while CUTLASS and later ISA text also
  give F16: an F16 D decodes, and the MMA then reports it as not modelled.
  (CUTLASS's ``UMMA::InstrDescriptor`` packs the same fields in the same order.)
- "Shared memory descriptor" ("Matrix Descriptors"): bits 0-13 start address >> 4, 16-29 leading
  byte offset >> 4, 32-45 stride byte offset >> 4, 46-48 the fixed constant 0b001, 49-51 matrix base
  offset, 52 leading-byte-offset mode (0: relative), 53-60 fixed 0, 61-63 swizzle mode: 0 none,
  1 128-byte with 32-byte atomicity, 2 128-byte, 4 64-byte, 6 32-byte. The canonical layouts the
  offsets describe are wgmma's ("Shared Memory Matrix Layout"), so operands load with
  ``wgmma_layout.load_operand``.
- "Tensor Memory" -> "Tensor Memory Addressing": a 32-bit address, lane in bits 31-16 and column in
  bits 15-0; 128 lanes x 512 columns of 32-bit cells per CTA.

Anything the emulator does not model (sparsity, saturation, .ws shifts, the 32-byte-atomic swizzle,
an absolute LBO mode, a non-zero base offset, the fp6/fp4 formats E2M3/E3M2/E2M1, kinds other than f16, tf32
and f8f6f4) is an ``Unsupported`` error, never ignored.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.emu.errors import ProtocolError, Unsupported
from fa4_mlir.emu.isa.wgmma_layout import Descriptor

TMEM_LANES = 128
TMEM_COLUMNS = 512

_F16_FORMATS = {0: "f16", 1: "bf16"}
# kind -> {A/B format code: type}; None marks a format of the table the emulator does not model
_FORMATS = {
    "f16": _F16_FORMATS,
    "tf32": {2: "tf32"},
    "f8f6f4": {0: "e4m3", 1: "e5m2", 3: None, 4: None, 5: None},
}
_F8F6F4_UNMODELLED = {3: "e2m3", 4: "e3m2", 5: "e2m1"}
_D_OF_KIND = {"f16": (0, 1), "tf32": (1,), "f8f6f4": (0, 1)}
ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8}
_D_FORMATS = {0: "f16", 1: "f32", 2: "s32"}
_SWIZZLE = {0: "none", 2: "128B", 4: "64B", 6: "32B"}
_IDESC_RESERVED = (1 << 6) | (1 << 23) | (1 << 29)


@dataclasses.dataclass(frozen=True)
class InstrDescriptor:
    """A decoded instruction descriptor: shape, types and operand majorness. ``k`` is the K of one
    instruction: 256 bits of A's row ("Matrix shape": 16 for f16/bf16, 8 for tf32, 32 for 8-bit)."""

    m: int
    n: int
    d_type: str
    a_type: str
    b_type: str
    negate_a: bool
    negate_b: bool
    a_k_major: bool
    b_k_major: bool
    kind: str = "f16"

    @property
    def k(self) -> int:
        return 256 // ELEMENT_BITS[self.a_type]


def decode_instr_descriptor(idesc: int, kind: str = "f16") -> InstrDescriptor:
    """Decode ``idesc`` for ``.kind::<kind>`` (f16, tf32 or f8f6f4) per the ISA table above."""
    idesc = int(idesc) & 0xFFFFFFFF
    if kind not in _FORMATS:
        raise Unsupported(f"tcgen05.mma .kind::{kind} is not modelled by the emulator (kind::f16, kind::tf32 and "
                          f"kind::f8f6f4 are)")
    if idesc & _IDESC_RESERVED:
        raise ProtocolError(f"tcgen05 instruction descriptor reserved bits (6, 23, 29) must be 0, got 0x{idesc:08x}")
    if idesc & 0b111:
        raise Unsupported(f"sparse tcgen05.mma (instruction descriptor bits 0-2 = {idesc & 7}) is not modelled, "
                          f"got 0x{idesc:08x}")
    if idesc >> 3 & 1:
        raise ProtocolError(f"tcgen05 instruction descriptor saturate bit (3) must be 0 for .kind::{kind}, "
                            f"got 0x{idesc:08x}")
    if idesc >> 30:
        raise Unsupported(f"tcgen05 instruction descriptor maximum shift (bits 30-31 = {idesc >> 30}, .ws only) is "
                          f"not modelled, got 0x{idesc:08x}")
    d_code, a_code, b_code = idesc >> 4 & 3, idesc >> 7 & 7, idesc >> 10 & 7
    if d_code not in _D_OF_KIND[kind]:
        allowed = " or ".join(f"{c} ({_D_FORMATS[c]})" for c in _D_OF_KIND[kind])
        raise ProtocolError(f"tcgen05 .kind::{kind} D format (bits 4-5) must be {allowed}, got {d_code} "
                            f"in 0x{idesc:08x}")
    formats = _FORMATS[kind]
    if a_code not in formats or b_code not in formats:
        allowed = ", ".join(f"{c} ({t or _F8F6F4_UNMODELLED[c]})" for c, t in formats.items())
        raise ProtocolError(f"tcgen05 .kind::{kind} A/B formats (bits 7-9, 10-12) must be {allowed}, got "
                            f"{a_code}/{b_code} in 0x{idesc:08x}")
    unmodelled = [_F8F6F4_UNMODELLED[c] for c in (a_code, b_code) if formats[c] is None]
    if unmodelled:
        raise Unsupported(f"tcgen05.mma .kind::f8f6f4 with {'/'.join(unmodelled)} operands (A format {a_code}, B "
                          f"format {b_code} in 0x{idesc:08x}) is not modelled: only e4m3 and e5m2 are; the fp6/fp4 "
                          f"formats e2m3, e3m2 and e2m1 sit in padded 8-bit containers the emulator does not read")
    n, m = (idesc >> 17 & 0x3F) << 3, (idesc >> 24 & 0x1F) << 4
    return InstrDescriptor(m=m, n=n, d_type=_D_FORMATS[d_code], a_type=formats[a_code],
                           b_type=formats[b_code], negate_a=bool(idesc >> 13 & 1), negate_b=bool(idesc >> 14 & 1),
                           a_k_major=not idesc >> 15 & 1, b_k_major=not idesc >> 16 & 1, kind=kind)


def encode_instr_descriptor(m: int, n: int, a_type: str = "bf16", b_type: str = "bf16", d_type: str = "f32",
                            a_k_major: bool = True, b_k_major: bool = True) -> int:
    """The descriptor ``decode_instr_descriptor`` inverts (tests and tools); the kind follows from the
    types (f16/bf16, tf32, e4m3/e5m2)."""
    codes = {t: c for formats in _FORMATS.values() for c, t in formats.items() if t}
    return ({"f16": 0, "f32": 1}[d_type] << 4 | codes[a_type] << 7 | codes[b_type] << 10
            | (not a_k_major) << 15 | (not b_k_major) << 16 | (n >> 3) << 17 | (m >> 4) << 24)


def decode_smem_descriptor(desc: int) -> Descriptor:
    """Decode a tcgen05 shared-memory descriptor into the layout fields ``wgmma_layout`` reads."""
    desc = int(desc)
    if desc < 0:
        desc += 1 << 64
    if not 0 <= desc < 1 << 64:
        raise ProtocolError(f"a tcgen05 shared-memory descriptor must be a 64-bit value, got {desc}")
    if desc >> 46 & 7 != 1:
        raise ProtocolError(f"tcgen05 shared-memory descriptor bits 46-48 must hold the fixed constant 0b001, got "
                            f"0b{desc >> 46 & 7:03b} in 0x{desc:016x} (a wgmma descriptor?)")
    if desc & (0x3 << 14 | 0x3 << 30 | 0xFF << 53):
        raise ProtocolError(f"tcgen05 shared-memory descriptor reserved bits (14-15, 30-31, 53-60) must be 0, got "
                            f"0x{desc:016x}")
    mode = desc >> 61
    if mode == 1:
        raise Unsupported(f"the 128-byte swizzle with 32-byte atomicity (descriptor mode 1) is not modelled, got "
                          f"0x{desc:016x}")
    if mode not in _SWIZZLE:
        raise ProtocolError(f"tcgen05 shared-memory descriptor swizzle mode (bits 61-63) must be 0, 1, 2, 4 or 6, "
                            f"got {mode} in 0x{desc:016x}")
    if desc >> 52 & 1:
        raise Unsupported(f"the absolute leading-byte-offset mode (descriptor bit 52) is not modelled, got "
                          f"0x{desc:016x}")
    base = desc >> 49 & 7
    if base:
        raise Unsupported(f"a non-zero matrix base offset (bits 49-51 = {base}) is not modelled, got 0x{desc:016x}")
    return Descriptor(start_address=(desc & 0x3FFF) << 4, leading_byte_offset=(desc >> 16 & 0x3FFF) << 4,
                      stride_byte_offset=(desc >> 32 & 0x3FFF) << 4, base_offset=0, swizzle=_SWIZZLE[mode])


def encode_smem_descriptor(start_address: int, leading_byte_offset: int, stride_byte_offset: int,
                           swizzle_mode: str = "128B") -> int:
    codes = {v: k for k, v in _SWIZZLE.items()}

    def enc(x):
        return (int(x) & 0x3FFFF) >> 4
    return (enc(start_address) | enc(leading_byte_offset) << 16 | enc(stride_byte_offset) << 32 | 1 << 46
            | codes[swizzle_mode] << 61)


def split_tmem_address(taddr: int) -> tuple[int, int]:
    """(lane, column) of a tensor-memory address, range-checked."""
    taddr = int(taddr) & 0xFFFFFFFF
    lane, column = taddr >> 16, taddr & 0xFFFF
    if lane >= TMEM_LANES or column >= TMEM_COLUMNS:
        raise ProtocolError(f"a tensor-memory address must have lane < {TMEM_LANES} (bits 31-16) and column < "
                            f"{TMEM_COLUMNS} (bits 15-0), got 0x{taddr:08x} (lane {lane}, column {column})")
    return lane, column
