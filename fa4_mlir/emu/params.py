"""Kernel arguments: checked against the ``.entry`` parameter list and packed into the param buffer.

An argument is a NumPy array (a pointer to global memory; the kernel's writes land in the array),
``None`` (a null pointer), a Python or NumPy scalar (converted to the parameter's PTX type and
range-checked), ``bytes`` for an aggregate ``.param .align A .b8 name[N]`` (length checked), an
``emu.Aggregate`` for one built from typed fields (a struct passed by value, such as CuTe DSL's tensor
``{pointer, shape, stride}``: an array field becomes its global address), or an ``emu.TensorMap`` (for a
128-byte aggregate: passed by value, as a ``__grid_constant__`` CUtensorMap; for a 64-bit parameter: a
pointer to a copy of it in global memory).

The 128 bytes of an emulator tensor map are not NVIDIA's (undocumented) format: they hold a magic
tag and an index into the launch's table of maps, so a TMA instruction given anything else fails
with a clear message instead of reading garbage.
"""

from __future__ import annotations

import numbers
import struct

import numpy as np

from fa4_mlir.emu.errors import LaunchArgumentError, ProtocolError
from fa4_mlir.emu.tensormap import TensorMap

MAGIC = b"FA4EMUTM"
TENSOR_MAP_BYTES = 128
_INT_RANGES = {"s8": (-(1 << 7), (1 << 7) - 1), "s16": (-(1 << 15), (1 << 15) - 1), "s32": (-(1 << 31), (1 << 31) - 1),
               "s64": (-(1 << 63), (1 << 63) - 1), "u8": (0, 255), "u16": (0, 65535), "u32": (0, (1 << 32) - 1),
               "u64": (0, (1 << 64) - 1), "b8": (-(1 << 7), 255), "b16": (-(1 << 15), 65535),
               "b32": (-(1 << 31), (1 << 32) - 1), "b64": (-(1 << 63), (1 << 64) - 1)}


class Aggregate:
    """A struct passed by value in a ``.b8`` aggregate parameter: ``fields`` is a sequence of
    ``(type, value)`` laid out in order at their natural alignment (a field of N bytes at the next multiple
    of N), as LLVM lays out the structs CuTe DSL and C compilers pass by value; the rest of the parameter is
    zero. ``type`` is a PTX scalar type (``u64``, ``s32``, ``f32``, ...); ``value`` is a number, ``None``
    (a null pointer) or a NumPy array (its global address: the kernel's writes land in it; the type must
    be 64-bit)."""

    def __init__(self, fields):
        self.fields = [tuple(f) for f in fields]
        for f in self.fields:
            if len(f) != 2 or not isinstance(f[0], str):
                raise LaunchArgumentError(f"an Aggregate field must be (type, value), got {f!r}")

    def __repr__(self) -> str:
        return f"Aggregate({[(t, type(v).__name__ if isinstance(v, np.ndarray) else v) for t, v in self.fields]})"


class _Field:
    """Enough of a parameter (type, size, name) for ``_encode`` to encode one Aggregate field."""
    is_aggregate = False

    def __init__(self, type_name: str, size: int, name: str):
        self.type, self.size, self.name = type_name, size, name


def _encode_aggregate(p, value: Aggregate, what: str, memory, tensor_maps: list) -> bytes:
    from fa4_mlir.emu import types as T
    raw = bytearray(p.size)
    offset = 0
    for i, (type_name, field) in enumerate(value.fields):
        if type_name not in _INT_RANGES and type_name not in ("f32", "f64"):
            raise LaunchArgumentError(f"{what}: field {i} type must be a PTX integer or f32/f64 type, got "
                                      f"'{type_name}'")
        size = T.width(type_name)
        offset = -(-offset // size) * size
        if offset + size > p.size:
            raise LaunchArgumentError(f"{what} is {p.size} bytes: the fields must fit, got field {i} (.{type_name}) "
                                      f"at bytes {offset}..{offset + size - 1}")
        raw[offset:offset + size] = _encode(_Field(type_name, size, f"{p.name}.{i}"), field,
                                            f"{what} field {i} (.{type_name})", memory, tensor_maps)
        offset += size
    return bytes(raw)


def encode_tensor_map(index: int) -> bytes:
    return MAGIC + struct.pack("<I", index) + bytes(TENSOR_MAP_BYTES - len(MAGIC) - 4)


def decode_tensor_map(blob: np.ndarray, table: list, where: str):
    raw = bytes(blob)
    if len(raw) < 12 or raw[:8] != MAGIC:
        raise ProtocolError(f"{where}: the tensor-map operand does not point at a tensor map made by emu.TensorMap "
                            f"(found bytes {raw[:8]!r}); pass an emu.TensorMap for this parameter")
    index = struct.unpack("<I", raw[8:12])[0]
    if index >= len(table):
        raise ProtocolError(f"{where}: tensor map #{index} does not belong to this launch")
    return table[index]


def pack(kernel, args, memory, tensor_maps: list) -> np.ndarray:
    """The parameter buffer of ``kernel`` for ``args`` (in ``.entry`` order)."""
    params = kernel.params
    if not isinstance(args, (list, tuple)):
        raise LaunchArgumentError(f"args must be a list in .entry order, got {type(args).__name__}")
    if len(args) != len(params):
        names = ", ".join(f"{p.name} (.{p.type}{'[%d]' % (p.size // _width(p)) if p.is_aggregate else ''})"
                          for p in params)
        raise LaunchArgumentError(f"kernel {kernel.name} takes {len(params)} arguments ({names}), got {len(args)}")
    buf = np.zeros(kernel.param_bytes, np.uint8)
    for p, value in zip(params, args):
        what = f"argument '{p.name}' (.param .{p.type}{'[%d]' % (p.size // _width(p)) if p.is_aggregate else ''})"
        raw = _encode(p, value, what, memory, tensor_maps)
        buf[p.offset:p.offset + p.size] = np.frombuffer(raw, np.uint8)
    return buf


def _width(p) -> int:
    from fa4_mlir.emu import types as T
    return T.width(p.type)


def _encode(p, value, what: str, memory, tensor_maps: list) -> bytes:
    if p.is_aggregate:
        if isinstance(value, TensorMap):
            if p.size != TENSOR_MAP_BYTES:
                raise LaunchArgumentError(f"{what} must be {p.size} bytes, got a TensorMap (128 bytes)")
            tensor_maps.append(_bind(value, memory, what))
            return encode_tensor_map(len(tensor_maps) - 1)
        if isinstance(value, Aggregate):
            return _encode_aggregate(p, value, what, memory, tensor_maps)
        if isinstance(value, (bytes, bytearray, memoryview)):
            raw = bytes(value)
            if len(raw) != p.size:
                raise LaunchArgumentError(f"{what} must be {p.size} bytes, got {len(raw)}")
            return raw
        raise LaunchArgumentError(f"{what} must be bytes of length {p.size}, an emu.Aggregate or an emu.TensorMap, "
                                  f"got {type(value).__name__}")
    size = p.size
    if isinstance(value, np.ndarray):
        if size != 8:
            raise LaunchArgumentError(f"{what} must be a 64-bit parameter to take an array (a pointer), got "
                                      f".{p.type}")
        if value.ndim == 0:
            return _encode(p, value[()], what, memory, tensor_maps)
        return struct.pack("<Q", memory.add_array(value, p.name))
    if value is None:
        if size != 8:
            raise LaunchArgumentError(f"{what} must be a 64-bit parameter to take None (a null pointer)")
        return struct.pack("<Q", 0)
    if isinstance(value, TensorMap):
        if size != 8:
            raise LaunchArgumentError(f"{what} must be a 64-bit pointer or a 128-byte aggregate to take a TensorMap")
        tensor_maps.append(_bind(value, memory, what))
        address = memory.add_bytes(TENSOR_MAP_BYTES, f"{p.name} (tensor map)")
        buf, off = memory.resolve(address, TENSOR_MAP_BYTES, what)
        buf[off:off + TENSOR_MAP_BYTES] = np.frombuffer(encode_tensor_map(len(tensor_maps) - 1), np.uint8)
        return struct.pack("<Q", address)
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if p.type in ("f32", "f64"):
        if not isinstance(value, (numbers.Real, np.floating, np.integer)):
            raise LaunchArgumentError(f"{what} must be a number, got {type(value).__name__}")
        return struct.pack("<f" if p.type == "f32" else "<d", float(value))
    if p.type in ("f16", "bf16"):
        raise LaunchArgumentError(f"{what}: pass a .{p.type} parameter as its 16-bit pattern (int)")
    if isinstance(value, (numbers.Integral, np.integer)):
        low, high = _INT_RANGES[p.type]
        value = int(value)
        if not low <= value <= high:
            raise LaunchArgumentError(f"{what} must be in [{low}, {high}], got {value}")
        return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    raise LaunchArgumentError(f"{what} must be an int, got {type(value).__name__}")


def _bind(tmap: TensorMap, memory, what: str) -> TensorMap:
    if tmap.address is not None:
        return tmap
    if tmap.array is None:
        raise LaunchArgumentError(f"{what}: the TensorMap has neither an array nor an address")
    return tmap.bind(memory.add_array(tmap.array, what, strided=True))
