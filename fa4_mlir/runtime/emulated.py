"""Artifacts on the CPU: ``runtime.load(..., device="emulator")`` runs a kernel's PTX in ``fa4_mlir.emu``.

``EmulatedKernel`` has ``Kernel``'s surface (``name``, ``manifest``, ``params``, ``threads``,
``cluster``, ``smem_bytes``, ``resident_ctas``, ``debug_timeout_ms``) and its ``launch(grid, args)``
takes the same arguments with the same checks, in host memory:

* a tensor-map parameter takes a ``GlobalTensor.host(array, dtype)`` (encoded with the manifest's
  box and swizzle after the same TMA rules as on a GPU, ``check_tiled``) or an ``emu.TensorMap``;
* a pointer parameter takes a NumPy array (the kernel's writes land in it) or None;
* scalars are checked as on a GPU (``kernel.check_scalar``).

The launch runs synchronously (``stream`` is checked and otherwise ignored) and returns the
emulator's ``Stats`` (instructions, warp_instructions, ctas, seconds). ``seed`` picks the emulator's
interleaving of warps and the completion times of asynchronous copies and MMAs. The PTX is the
artifact's ``<entry>.ptx``, which fa4-compile writes next to the cubin (and the cache keeps). It is
parsed at load; instructions the emulator lacks (tcgen05 in sm_100a code, for now) are the
emulator's ``Unsupported`` error at the first launch. Every failure of the program itself
(``Deadlock``, ``MemoryFault``, ``ProtocolError``, a ``trap``) is the emulator's ``EmulationError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fa4_mlir import emu
from fa4_mlir.errors import ArtifactError, LaunchError
from fa4_mlir.runtime import EMULATOR
from fa4_mlir.runtime.artifacts import Artifact
from fa4_mlir.runtime.kernel import bind_args, check_grid, check_scalar, unsupported_kind
from fa4_mlir.runtime.tensormap import GlobalTensor, check_tiled

DEFAULT_TARGET = "sm_90a"  # the emulator runs Hopper code; tcgen05 (sm_100a) comes later
# The CTAs the emulated "GPU" holds at once, the size of a persistent grid (launch_geometry's ctas).
# Two, so that a persistent kernel's CTAs share the tiles and each walks several of them (phases
# across tiles), at the emulator's speed: 0.05-0.3 s per 128-row tile on one core (2026-11, fa4-emu).
RESIDENT_CTAS = 2
# manifest dtype -> the emulator's element format
_FORMATS = {"bf16": "bf16", "fp16": "f16", "fp32": "f32", "fp8_e4m3": "e4m3"}


class EmulatedKernel:
    """One artifact on the PTX emulator. ``launch(grid, args, seed=...)`` runs it on the CPU."""

    device = EMULATOR
    resident_ctas = RESIDENT_CTAS

    def __init__(self, artifact: Artifact):
        self.artifact = artifact
        self.manifest = artifact.manifest
        self.name = self.manifest["entry"]
        self.params = sorted(self.manifest["params"], key=lambda p: p["index"])
        self.threads = tuple(self.manifest["threads"])
        self.cluster = tuple(self.manifest.get("cluster") or (1, 1, 1))
        self.smem_bytes = int(self.manifest["smem_bytes"])
        self.debug_timeout_ms = artifact.debug_timeout_ms
        static = int(self.manifest.get("static_smem_bytes") or 0)
        if self.smem_bytes + static > emu.MAX_SMEM:
            raise LaunchError(f"kernel {self.name} shared memory must fit the emulator's {emu.MAX_SMEM} B per "
                              f"block (sm_90's and sm_100's), got {self.smem_bytes} B dynamic + {static} B static")
        ptx = artifact.path / f"{self.name}.ptx"
        if not ptx.is_file():
            raise ArtifactError(f"PTX '{ptx}' does not exist; the emulator runs the <entry>.ptx that fa4-compile "
                                f"writes next to the cubin: rebuild the artifact with fa4-compile")
        self.ptx_path = ptx
        self.program = emu.load_ptx(ptx)
        entry = self.program.module.function(self.name)
        if entry is None or not entry.is_entry:
            raise ArtifactError(f"PTX '{ptx}' must define the manifest's kernel {self.name}, got "
                                f"{', '.join(self.program.kernels) or 'no kernel'}")
        if len(entry.params) != len(self.params):
            raise ArtifactError(f"PTX '{ptx}' must take the manifest's {len(self.params)} parameters, got "
                                f"{len(entry.params)}; rebuild the artifact with fa4-compile")
        self._ptx_types = [p.type for p in entry.params]

    def __repr__(self) -> str:
        return f"<fa4 kernel {self.name} {self.manifest['target']} on the emulator>"

    def launch(self, grid: Sequence[int], args: Mapping[str, object] | Sequence[object], *, stream=None,
               seed: int = 0):
        """Run on ``grid`` with ``args`` by parameter name (or in order); returns the emulator's Stats."""
        grid = check_grid(grid, self.cluster)
        values = bind_args(self.name, self.params, args)
        _check_stream(stream)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise LaunchError(f"seed must be an int >= 0, got {seed!r}")
        packed = [self._arg(p, v, t) for p, v, t in zip(self.params, values, self._ptx_types)]
        return self.program.launch(self.name, grid=grid, block=self.threads, cluster=self.cluster,
                                   smem_bytes=self.smem_bytes, args=packed, seed=seed)

    def _arg(self, param: dict, value, ptx_type: str):
        kind, what = param["kind"], f"argument '{param['name']}' of {self.name}"
        if kind == "tensormap":
            return self._tensor_map(param, value, what)
        if kind == "ptr":
            if value is not None and not isinstance(value, np.ndarray):
                raise LaunchError(f"{what} must be a NumPy array (global memory on the emulator) or None, got "
                                  f"{type(value).__name__}")
            return value
        if kind not in ("f32", "i32", "i64"):
            raise unsupported_kind(kind, what)
        value = check_scalar(kind, value, what)
        if kind != "f32" and value < 0 and ptx_type.startswith("u"):
            value += 1 << (32 if kind == "i32" else 64)  # the bits the GPU receives
        return value

    def _tensor_map(self, param: dict, value, what: str):
        spec = param.get("tensor_map")
        if isinstance(value, emu.TensorMap):
            if spec is not None:
                _check_emu_map(value, spec, what)
            return value
        if not isinstance(value, GlobalTensor):
            raise LaunchError(f"{what} must be a GlobalTensor over a NumPy array (GlobalTensor.host) or an "
                              f"emu.TensorMap on the emulator, got {type(value).__name__}")
        if value.array is None:
            raise LaunchError(f"{what} must be a host GlobalTensor on the emulator (GlobalTensor.host(array, "
                              f"dtype)), got one at device address 0x{value.address:x}")
        if spec is None:
            raise LaunchError(f"{what}: the manifest has no tensor-map spec; pass an emu.TensorMap")
        check_tiled(value, spec, what)
        return emu.TensorMap(host_view(value, what), box=tuple(reversed(spec["box"])),
                             swizzle=spec.get("swizzle", "none"), dtype=_FORMATS[spec["dtype"]])


def host_view(tensor: GlobalTensor, what: str = "tensor") -> np.ndarray:
    """The NumPy view that a host ``GlobalTensor`` describes (its address, shape and strides over its
    array's memory), after ``check_tiled`` (positive strides, unit innermost stride)."""
    array = tensor.array
    elem = array.itemsize
    start = array.__array_interface__["data"][0]
    strides = tuple(s * elem for s in tensor.strides)
    if tensor.address == start and tensor.shape == array.shape and strides == array.strides:
        return array
    low, high = _byte_bounds(array)
    end = tensor.address + sum((n - 1) * s for n, s in zip(tensor.shape, strides)) + elem
    if tensor.address < low or end > high or (tensor.address - start) % elem:
        raise LaunchError(f"{what} must lie inside the memory of its host array (bytes [0x{low:x}, 0x{high:x})), "
                          f"got [0x{tensor.address:x}, 0x{end:x})")
    offset = (tensor.address - start) // elem
    if offset < 0:  # only an array with negative strides has memory before its first element
        raise LaunchError(f"{what} must start at or after its host array's first element, got an offset of "
                          f"{offset} elements")
    as_strided = np.lib.stride_tricks.as_strided
    origin = as_strided(array, shape=(offset + 1,), strides=(elem,))[offset:]
    return as_strided(origin, shape=tensor.shape, strides=strides)


def _byte_bounds(array: np.ndarray) -> tuple[int, int]:
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # NumPy < 2
        byte_bounds = np.byte_bounds
    low, high = byte_bounds(array)
    return int(low), int(high)


def _check_emu_map(tmap, spec: dict, what: str) -> None:
    """An emu.TensorMap must match what the kernel was compiled for: element type, box, swizzle."""
    want = _FORMATS.get(spec["dtype"])
    if tmap.format != want:
        raise LaunchError(f"{what} must be {spec['dtype']} (the kernel was compiled for it), got a TensorMap "
                          f"of {tmap.format}")
    box = tuple(reversed(spec["box"]))
    if tmap.box != box or tmap.swizzle != spec.get("swizzle", "none"):
        raise LaunchError(f"{what} must have the manifest's box {box} (outermost first) and swizzle "
                          f"{spec.get('swizzle', 'none')}, got box {tmap.box} and swizzle {tmap.swizzle}")


def _check_stream(stream) -> None:
    """The emulator runs each launch to completion: any stream a GPU launch takes is accepted."""
    handle = getattr(stream, "cuda_stream", stream)
    if handle is None or (isinstance(handle, int) and not isinstance(handle, bool) and handle >= 0) or \
            type(handle).__name__ == "CUstream":
        return
    raise LaunchError(f"stream must be a CUstream, an int handle or have .cuda_stream, got {stream!r}")
