"""``vprintf`` as the CUDA device runtime defines it: a format string in global memory and a buffer of
packed arguments, each aligned to its own size (8-byte for ``%l*``, ``%f``/``%e``/``%g`` (doubles),
``%s`` and ``%p``; 4-byte otherwise)."""

from __future__ import annotations

import re
import struct

import numpy as np

from fa4_mlir.emu.errors import MemoryFault
from fa4_mlir.emu.memory import LOCAL_BASE, WINDOW_SIZE

_SPEC = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+))?(hh|h|ll|l|z|j|t)?([diouxXcsfFeEgGaAp%])")
MAX_STRING = 4096


def _global_string(w, address: int, op) -> str:
    buf, off = w.launch.memory.resolve(address, 1, f"{w.where(op)}: printf string")
    end = buf[off:off + MAX_STRING]
    nul = np.flatnonzero(end == 0)
    return bytes(end[: nul[0] if nul.size else end.size]).decode("utf-8", "replace")


def _local_bytes(w, lane: int, generic: int, nbytes: int, op) -> bytes:
    if not LOCAL_BASE <= generic < LOCAL_BASE + WINDOW_SIZE:
        raise MemoryFault(f"{w.lane_where(op, lane)}: printf arguments must be in local memory, got 0x{generic:x}")
    return w.local_read(lane, generic - LOCAL_BASE, nbytes)


def vprintf(w, op, lane: int, format_slot: int, args_slot: int) -> str:
    fmt_address = struct.unpack("<Q", w.local_read(lane, format_slot, 8))[0]
    args_address = struct.unpack("<Q", w.local_read(lane, args_slot, 8))[0]
    fmt = _global_string(w, fmt_address, op)
    offset, out, pos = 0, [], 0
    for match in _SPEC.finditer(fmt):
        out.append(fmt[pos:match.start()])
        pos = match.end()
        flags, width, precision, length, conv = match.groups()
        if conv == "%":
            out.append("%")
            continue
        wide = conv in "fFeEgGaAsp" or length in ("l", "ll", "z", "j", "t")
        size = 8 if wide else 4
        offset = (offset + size - 1) // size * size
        raw = _local_bytes(w, lane, args_address + offset, size, op)
        offset += size
        spec = "%" + (flags or "") + (width or "") + (f".{precision}" if precision else "")
        if conv in "fFeEgGaA":
            value = struct.unpack("<d", raw)[0]
            out.append((spec + (conv if conv not in "aA" else "e")) % value)
        elif conv == "s":
            out.append((spec + "s") % _global_string(w, struct.unpack("<Q", raw)[0], op))
        elif conv == "p":
            out.append("0x%x" % struct.unpack("<Q", raw)[0])
        elif conv == "c":
            out.append(chr(raw[0]))
        else:
            signed = conv in "di"
            value = int.from_bytes(raw, "little", signed=signed)
            out.append((spec + ("d" if conv in "diu" else conv)) % value)
    out.append(fmt[pos:])
    return "".join(out)
