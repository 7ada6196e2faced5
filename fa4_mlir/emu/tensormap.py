"""TMA tensor maps and the data movement of ``cp.async.bulk.tensor`` (tile mode), in NumPy.

Sources (PTX ISA, "Tensors": "Tiled Mode" -> "Bounding Box", "Traversal-Stride", "Out of Boundary
Access"; "Tensor-map" -> "Swizzling Modes"; instruction "cp.async.bulk.tensor"; CUDA Driver API
"Tensor Map Object Management" -> ``cuTensorMapEncodeTiled``; CUDA C++ Programming Guide "TMA Swizzle"
-> "The Swizzle Modes", table "Requirements and properties of the different swizzle patterns").

Axis order. A ``TensorMap`` takes ``box``, ``elem_strides``, shapes and strides in NumPy order,
outermost first, like ``array.shape``. PTX's tensor coordinates ``{c0, c1, ...}`` (and the driver's
``globalDim``/``boxDim`` arrays) are innermost first: ``c0`` indexes the *last* NumPy axis. ``tma_load``
and ``tma_store`` take ``coords`` in PTX order.

Shared-memory image. The box is written densely in row-major order (innermost dimension contiguous),
``ceil(box[i] / elem_strides[i])`` elements along axis ``i`` (the driver ignores the innermost
traversal stride: TMA does not stride dimension 0 without interleave), and then every byte address
``a`` of it is replaced by ``swizzle(a, mode)``, a function of the *absolute* shared-window address
(see ``swizzle``). With a destination that is not aligned to the pattern's repeat (1024/512/256 bytes)
the pattern starts at an offset, exactly the "swizzle base offset" ``(dstMem / 128) % 8`` (``% 4``,
``% 2``) of the ISA's "Swizzling Modes" and the programming guide's offset formula.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from fa4_mlir.emu.errors import LaunchArgumentError, MemoryFault, ProtocolError

SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
# bits of the 16-byte chunk index that a mode XORs with bits [7, 7+B) of the address (Swizzle<B,4,3>)
_SWIZZLE_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
# the address after which the pattern repeats (ISA "Swizzling Modes": 256/512/1024-byte boundary)
SWIZZLE_REPEAT = {"none": 16, "32B": 256, "64B": 512, "128B": 1024}
SMEM_ALIGN = 128  # programming guide: TMA needs a 128-byte aligned shared address in every mode
GLOBAL_ALIGN = 16  # driver: globalAddress 16-byte aligned
MAX_RANK, MAX_BOX, MAX_ELEM_STRIDE = 5, 256, 8
MAX_DIM, MAX_STRIDE = 1 << 32, 1 << 40

# Element formats: bytes, whether the driver counts it as floating point (OOB-NaN allowed).
FORMATS = {
    "u8": (1, False), "s8": (1, False), "e4m3": (1, False), "e5m2": (1, False),
    "u16": (2, False), "s16": (2, False), "f16": (2, True), "bf16": (2, True),
    "u32": (4, False), "s32": (4, False), "f32": (4, True), "tf32": (4, True),
    "u64": (8, False), "s64": (8, False), "f64": (8, True),
}
_NUMPY_FORMATS = {"uint8": "u8", "int8": "s8", "uint16": "u16", "int16": "s16", "float16": "f16",
                  "uint32": "u32", "int32": "s32", "float32": "f32", "uint64": "u64", "int64": "s64",
                  "float64": "f64", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
# The ISA names the fill "a special NaN called OOB-NaN" without giving its bits. We write 0x7FF7 in
# every 16-bit half of the element (f16/bf16 0x7FF7, f32 0x7FF77FF7, f64 0x7FF7...7FF7): a NaN in each
# format. The pattern is what a third-party emulator reports measuring on GPUs, not an NVIDIA document.
OOB_NAN_HALF = 0x7FF7


def swizzle(address, mode: str):
    """The ISA's swizzle of shared-memory byte ``address`` (int or integer array) for ``mode``.

    PTX ISA "Swizzling Modes": 16-byte chunks are permuted inside each 128-byte line; line ``r`` of
    the 256/512/1024-byte repeat holds chunk ``c`` of the source at chunk ``c ^ r``. As bits of the
    byte address: 32B mode XORs bit 4 with bit 7, 64B bits [4,6) with [7,9), 128B bits [4,7) with
    [7,10) (CuTe ``Swizzle<1|2|3, 4, 3>`` in the ISA's wgmma "Canonical Layouts"). An involution, so it
    is also its own inverse; bits 0-3 and 7 and up never change.
    """
    bits = _SWIZZLE_BITS.get(mode)
    if bits is None:
        raise ProtocolError(f"swizzle mode must be one of {', '.join(SWIZZLE_BYTES)}, got {mode!r}")
    if bits == 0:
        return address
    return address ^ (((address >> 7) & ((1 << bits) - 1)) << 4)


# fa4's dtype names (manifests, configs) for the same formats
_FA4_NAMES = {"fp16": "f16", "fp32": "f32", "fp64": "f64", "fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2"}


def _format_of(dtype, array_dtype=None) -> tuple[str, np.dtype]:
    """(format name, storage dtype) from a NumPy dtype, a PTX-style format name or an fa4 dtype name."""
    if isinstance(dtype, str):
        dtype = _FA4_NAMES.get(dtype, dtype)
    if isinstance(dtype, str) and dtype in FORMATS:
        name = dtype
    else:
        try:
            np_dtype = np.dtype(dtype)
        except TypeError:
            np_dtype = None
        name = _NUMPY_FORMATS.get(np_dtype.name) if np_dtype is not None else None
        if name is None:
            raise LaunchArgumentError(
                f"TensorMap element type must be a 1-, 2-, 4- or 8-byte integer or float (or one of "
                f"{', '.join(FORMATS)}), got {dtype!r}")
    size = FORMATS[name][0]
    if array_dtype is not None and np.dtype(array_dtype).itemsize != size:
        have = np.dtype(array_dtype).itemsize
        raise LaunchArgumentError(f"TensorMap dtype {name!r} must match the array's {have}-byte elements, "
                                  f"got a {size}-byte format")
    return name, np.dtype(f"u{size}")


class TensorMap:
    """A tiled TMA tensor map (``cuTensorMapEncodeTiled``): the emulator's kernel argument type.

    ``TensorMap(array, box=(...), swizzle="128B", elem_strides=None, oob_fill="zero", dtype=None)``
    describes ``array`` (a NumPy array or strided view; its innermost stride must be its element size);
    ``box`` and ``elem_strides`` are outermost first like ``array.shape``. ``dtype`` names the element
    format when the array's dtype is only a container (``"bf16"`` for a ``uint16`` array of bf16 bits).
    ``TensorMap.at(address, dtype, shape, strides_bytes, box, ...)`` describes a tensor at a global
    address instead. The machine gives an array-based map its address at launch with ``bind``.

    The constructor checks what ``cuTensorMapEncodeTiled`` checks and raises ``LaunchArgumentError``
    naming the rule. The object is immutable.
    """

    __slots__ = ("array", "format", "dtype", "elem_bytes", "shape", "strides", "box", "elem_strides",
                 "swizzle", "oob_fill", "address", "loaded", "box_bytes", "_cache")

    def __init__(self, array, box, swizzle: str = "128B", elem_strides=None, oob_fill: str = "zero",
                 dtype=None):
        if not isinstance(array, np.ndarray):
            raise LaunchArgumentError(f"TensorMap array must be a numpy.ndarray, got {type(array).__name__}")
        name, _ = _format_of(array.dtype if dtype is None else dtype, array.dtype)
        strides = list(array.strides)
        # A size-1 axis is only ever read at coordinate 0, so its stride is free: NumPy leaves odd
        # values there (0 for np.newaxis); give it a legal one instead of rejecting the view.
        for i in range(array.ndim - 2, -1, -1):
            if array.shape[i] == 1 and (strides[i] <= 0 or strides[i] % GLOBAL_ALIGN):
                inner = strides[i + 1] * array.shape[i + 1]
                strides[i] = max(GLOBAL_ALIGN, -(-inner // GLOBAL_ALIGN) * GLOBAL_ALIGN)
        self._init(array, name, array.shape, strides, box, swizzle, elem_strides, oob_fill, None)

    @classmethod
    def at(cls, address: int, dtype, shape, strides_bytes, box, swizzle: str = "128B", elem_strides=None,
           oob_fill: str = "zero") -> TensorMap:
        """A map of the tensor at global ``address``; ``shape`` and ``strides_bytes`` outermost first
        (``strides_bytes`` has one entry per axis, the innermost being the element size, or only the
        ``rank - 1`` outer strides, as the driver takes them)."""
        name, _ = _format_of(dtype)
        shape, strides = tuple(int(s) for s in shape), [int(s) for s in strides_bytes]
        if len(strides) == len(shape) - 1:
            strides.append(FORMATS[name][0])
        if len(strides) != len(shape):
            raise LaunchArgumentError(f"TensorMap strides_bytes must have {len(shape)} entries (or "
                                      f"{len(shape) - 1} outer ones), got {len(strides)}")
        self = object.__new__(cls)
        self._init(None, name, shape, strides, box, swizzle, elem_strides, oob_fill, _address(address))
        return self

    def _init(self, array, name, shape, strides, box, swizzle_mode, elem_strides, oob_fill, address):
        set_ = functools.partial(object.__setattr__, self)
        elem = FORMATS[name][0]
        shape, strides = tuple(int(s) for s in shape), tuple(int(s) for s in strides)
        rank = len(shape)
        if not 1 <= rank <= MAX_RANK:
            raise LaunchArgumentError(f"TensorMap rank must be 1 to {MAX_RANK}, got {rank} (shape {shape})")
        for size in shape:
            if not 1 <= size <= MAX_DIM:
                raise LaunchArgumentError(f"TensorMap dimensions must be in [1, 2^32], got shape {shape}")
        if strides[-1] != elem:
            raise LaunchArgumentError(
                f"TensorMap innermost stride must be the element size ({elem} bytes), got {strides[-1]} "
                f"bytes (strides {strides}); pass np.ascontiguousarray(...)")
        for stride in strides[:-1]:
            if stride <= 0 or stride % GLOBAL_ALIGN or stride >= MAX_STRIDE:
                raise LaunchArgumentError(
                    f"TensorMap outer strides must be positive multiples of {GLOBAL_ALIGN} bytes below 2^40, "
                    f"got strides {strides} (bytes); pad the innermost dimension to a multiple of "
                    f"{max(1, GLOBAL_ALIGN // elem)} elements")
        box = _int_tuple(box, "box")
        if len(box) != rank:
            raise LaunchArgumentError(f"TensorMap box must have {rank} entries (one per axis, outermost "
                                      f"first), got {len(box)}: {box}")
        if any(not 1 <= b <= MAX_BOX for b in box):
            raise LaunchArgumentError(f"TensorMap box entries must be in [1, {MAX_BOX}], got {box}")
        inner = box[-1] * elem
        if inner % 16:
            raise LaunchArgumentError(f"TensorMap inner box bytes must be a multiple of 16, got {inner} "
                                      f"({box[-1]} elements of {elem} bytes)")
        if swizzle_mode not in SWIZZLE_BYTES:
            raise LaunchArgumentError(f"TensorMap swizzle must be one of {', '.join(SWIZZLE_BYTES)}, "
                                      f"got {swizzle_mode!r}")
        span = SWIZZLE_BYTES[swizzle_mode]
        if span and inner > span:
            raise LaunchArgumentError(f"TensorMap inner box bytes must be <= the {swizzle_mode} swizzle span "
                                      f"({span}), got {inner}; split the box or use a wider swizzle")
        es = (1,) * rank if elem_strides is None else _int_tuple(elem_strides, "elem_strides")
        if len(es) != rank:
            raise LaunchArgumentError(f"TensorMap elem_strides must have {rank} entries (outermost first), "
                                      f"got {len(es)}: {es}")
        if any(not 1 <= e <= MAX_ELEM_STRIDE for e in es):
            raise LaunchArgumentError(f"TensorMap elem_strides entries must be in [1, {MAX_ELEM_STRIDE}], "
                                      f"got {es}")
        if oob_fill not in ("zero", "nan"):
            raise LaunchArgumentError(f"TensorMap oob_fill must be 'zero' or 'nan', got {oob_fill!r}")
        if oob_fill == "nan" and not FORMATS[name][1]:
            raise LaunchArgumentError(f"TensorMap oob_fill 'nan' must have a floating-point element type "
                                      f"(f16, bf16, f32, tf32, f64), got {name}")
        # The driver ignores the innermost traversal stride ("TMA doesn't support the stride for
        # dimension zero"): the inner box always loads box[-1] elements.
        loaded = tuple(-(-b // e) for b, e in zip(box[:-1], es[:-1])) + (box[-1],)
        for key, value in (("array", array), ("format", name), ("dtype", np.dtype(f"u{elem}")),
                           ("elem_bytes", elem), ("shape", shape), ("strides", strides), ("box", box),
                           ("elem_strides", es), ("swizzle", swizzle_mode), ("oob_fill", oob_fill),
                           ("address", address), ("loaded", loaded),
                           ("box_bytes", math.prod(loaded) * elem), ("_cache", {})):
            set_(key, value)

    def __setattr__(self, key, value):
        raise AttributeError(f"TensorMap is immutable; {key!r} cannot be set (use bind for the address)")

    @property
    def rank(self) -> int:
        return len(self.shape)

    def bind(self, address: int, strides_bytes=None) -> TensorMap:
        """A copy of this map at global ``address`` (the machine's launch step). ``strides_bytes``
        (outermost first) replaces the strides when the machine placed a copy of the array with another
        layout."""
        strides = self.strides if strides_bytes is None else strides_bytes
        new = object.__new__(TensorMap)
        new._init(self.array, self.format, self.shape, strides, self.box, self.swizzle, self.elem_strides,
                  self.oob_fill, _address(address))
        return new

    def __repr__(self) -> str:
        where = "unbound" if self.address is None else f"0x{self.address:x}"
        return (f"TensorMap({self.format}, shape={self.shape}, strides={self.strides}, box={self.box}, "
                f"elem_strides={self.elem_strides}, swizzle={self.swizzle!r}, oob_fill={self.oob_fill!r}, "
                f"{where})")

    # -- geometry, cached on the (immutable) map ------------------------------------------------------
    def _steps(self) -> list[np.ndarray]:
        """Per axis, the element offsets (in coordinates) of the loaded elements from the box start."""
        if "steps" not in self._cache:
            es = self.elem_strides[:-1] + (1,)
            self._cache["steps"] = [np.arange(n, dtype=np.int64) * e for n, e in zip(self.loaded, es)]
        return self._cache["steps"]

    def _rel_bytes(self) -> np.ndarray:
        """Global byte offsets, from the box start, of every byte of the box in row-major order."""
        if "rel" not in self._cache:
            rel = np.zeros((), np.int64)
            for steps, stride in zip(self._steps(), self.strides):
                rel = rel[..., None] + steps * stride
            rel = rel.reshape(-1)[:, None] + np.arange(self.elem_bytes, dtype=np.int64)
            rel = rel.reshape(-1)
            rel.setflags(write=False)
            self._cache["rel"] = rel
        return self._cache["rel"]

    def _fill(self) -> np.ndarray:
        if "fill" not in self._cache:
            if self.oob_fill == "zero":
                fill = np.zeros(self.box_bytes, np.uint8)
            else:
                half = np.array([OOB_NAN_HALF], "<u2").view(np.uint8)
                fill = np.tile(half, self.box_bytes // 2)
            fill.setflags(write=False)
            self._cache["fill"] = fill
        return self._cache["fill"]


def _address(address) -> int:
    if isinstance(address, bool) or not isinstance(address, (int, np.integer)) or address < 0:
        raise LaunchArgumentError(f"TensorMap address must be a non-negative integer, got {address!r}")
    if address % GLOBAL_ALIGN:
        raise LaunchArgumentError(f"TensorMap address must be {GLOBAL_ALIGN}-byte aligned, got "
                                  f"0x{int(address):x}; a view that starts mid-row is not, pass "
                                  f"np.ascontiguousarray(...)")
    return int(address)


def _int_tuple(values, what: str) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise LaunchArgumentError(f"TensorMap {what} must be a sequence of integers, "
                                  f"got {values!r}") from None
    if any(o != v for o, v in zip(out, values)):
        raise LaunchArgumentError(f"TensorMap {what} must be a sequence of integers, got {values!r}")
    return out


@functools.lru_cache(maxsize=256)
def _smem_index(loaded: tuple[int, ...], elem_bytes: int, mode: str,
                phase: int) -> tuple[np.ndarray, int, int]:
    """Shared byte addresses of the box's bytes (row-major) for a destination ``phase`` bytes past a
    1024-byte boundary, relative to that boundary; with their min and max. Adding a multiple of 1024
    commutes with every swizzle (it only reads bits 4-9), so one array serves every destination."""
    n = math.prod(loaded) * elem_bytes
    index = swizzle(np.arange(phase, phase + n, dtype=np.int64), mode)
    index.setflags(write=False)
    return index, int(index.min()), int(index.max())


def _check_copy(tmap: TensorMap, coords, smem: np.ndarray, smem_address: int, what: str):
    """Validate one copy; returns (coordinates outermost first, shared byte indices)."""
    if not isinstance(tmap, TensorMap):
        raise ProtocolError(f"{what}: the tensor map operand must be a TensorMap, got {type(tmap).__name__}")
    if tmap.address is None:
        raise ProtocolError(f"{what}: the TensorMap must be bound to a global address (the machine binds "
                            f"kernel arguments at launch), got an unbound {tmap!r}")
    if not (isinstance(smem, np.ndarray) and smem.dtype == np.uint8 and smem.ndim == 1):
        raise ProtocolError(f"{what}: shared memory must be a 1-D uint8 array, "
                            f"got {getattr(smem, 'dtype', smem)!r}")
    coords = tuple(int(c) for c in coords)
    if len(coords) != tmap.rank:
        raise ProtocolError(f"{what}: tensor coordinates must be {tmap.rank} values (.{tmap.rank}d, "
                            f"innermost first), got {len(coords)}: {coords}")
    for c in coords:
        if not -(1 << 31) <= c < (1 << 31):
            raise ProtocolError(f"{what}: tensor coordinates must be .s32 values, got {coords}")
    smem_address = int(smem_address)
    if smem_address % SMEM_ALIGN:
        raise MemoryFault(f"{what}: the shared memory address must be {SMEM_ALIGN}-byte aligned for a tensor "
                          f"copy, got 0x{smem_address:x}")
    phase = smem_address % 1024
    index, lo, hi = _smem_index(tmap.loaded, tmap.elem_bytes, tmap.swizzle, phase)
    base = smem_address - phase
    if base + lo < 0 or base + hi >= smem.size:
        raise MemoryFault(f"{what}: the {tmap.box_bytes}-byte box at shared address 0x{smem_address:x} "
                          f"touches [0x{base + lo:x}, 0x{base + hi + 1:x}), outside shared memory "
                          f"[0, 0x{smem.size:x})")
    return coords[::-1], (index + base if base else index)


def _store_extent(tmap: TensorMap) -> tuple[int, ...]:
    """The extents a TMA store writes: the H100 writes whole 16-byte chunks of the innermost dimension,
    so a row whose byte length is not a multiple of 16 also gets the elements of its last partial chunk
    (measured: a 300-column bf16 D with a 304-element row stride had columns 300-303 written; see
    docs/emulator.md). Never past the next outer stride, which is a multiple of 16."""
    if tmap.rank < 2:
        return tmap.shape
    inner = -(-tmap.shape[-1] * tmap.elem_bytes // 16) * 16 // tmap.elem_bytes
    inner = min(inner, tmap.strides[-2] // tmap.elem_bytes)
    return tmap.shape[:-1] + (max(inner, tmap.shape[-1]),)


def _global_part(tmap: TensorMap, np_coords, mem, what: str, store: bool = False):
    """(buffer, byte indices into it, byte mask of the box or None when all in bounds); buffer is None
    when no element of the box is inside the tensor."""
    masks, lo_rel, hi_rel, full, start = [], 0, 0, True, 0
    shape = _store_extent(tmap) if store else tmap.shape
    for c, steps, size, stride in zip(np_coords, tmap._steps(), shape, tmap.strides):
        pos = c + steps
        ok = (pos >= 0) & (pos < size)
        if not ok.any():
            return None, None, None
        full &= bool(ok.all())
        masks.append(ok)
        inside = pos[ok]
        lo_rel += int(inside[0]) * stride
        hi_rel += int(inside[-1]) * stride
        start += c * stride
    nbytes = hi_rel - lo_rel + tmap.elem_bytes
    buf, offset = mem.resolve(tmap.address + lo_rel, nbytes, what)
    index = tmap._rel_bytes() + (offset - lo_rel + start)
    if full:
        return buf, index, None
    valid = np.ones((), bool)
    for ok in masks:
        valid = valid[..., None] & ok
    mask = np.repeat(valid.reshape(-1), tmap.elem_bytes)
    return buf, index[mask], mask


def tma_load(tmap: TensorMap, mem, coords, smem: np.ndarray, smem_address: int,
             what: str = "cp.async.bulk.tensor.shared::cta.global.tile") -> int:
    """``cp.async.bulk.tensor.Nd.shared::cta.global.tile``: copy the box at ``coords`` (PTX order,
    innermost first, signed) into ``smem`` (indexed by shared-window address) at ``smem_address``.

    Elements outside the tensor read as zero or OOB-NaN (``tmap.oob_fill``), and count: the return
    value is the whole box in bytes, what the copy's ``complete_tx`` reports to the mbarrier.
    """
    np_coords, sidx = _check_copy(tmap, coords, smem, smem_address, what)
    buf, gidx, mask = _global_part(tmap, np_coords, mem, what)
    if buf is None:
        smem[sidx] = tmap._fill()
    elif mask is None:
        smem[sidx] = buf[gidx]
    else:
        payload = tmap._fill().copy()
        payload[mask] = buf[gidx]
        smem[sidx] = payload
    return tmap.box_bytes


def tma_store(tmap: TensorMap, mem, coords, smem: np.ndarray, smem_address: int,
              what: str = "cp.async.bulk.tensor.global.shared::cta.tile.bulk_group") -> int:
    """``cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group``: write the box held at
    ``smem_address`` (same layout and swizzle as a load) to the tensor at ``coords``; elements outside
    the tensor are not written, except those that share a 16-byte chunk of a row with an element inside
    it (``_store_extent``, the H100's behaviour). Returns the box's size in bytes (what was read from
    shared memory)."""
    np_coords, sidx = _check_copy(tmap, coords, smem, smem_address, what)
    buf, gidx, mask = _global_part(tmap, np_coords, mem, what, store=True)
    if buf is not None:
        payload = smem[sidx]
        buf[gidx] = payload if mask is None else payload[mask]
    return tmap.box_bytes
