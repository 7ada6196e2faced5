"""The launch fast path: libcuda through ctypes and ``PackedLaunch``, a launch whose parameters are
checked, encoded and packed once and whose per-call work is writing the tensors' addresses.

cuda-python converts every argument of every call in Python: about 10 us per ``cuLaunchKernel`` and
as much per ``cuTensorMapEncodeTiled`` on the H100 machine (docs/PERF.md, "Host cost per launch"),
against a budget of 15 us for a whole ``torch.ops.fa4.*`` call. ctypes calls the same driver entry
points with a few hundred nanoseconds of conversion. cuda-python stays the fallback (no libcuda that
ctypes can open) and does everything else (loading, contexts, error names, cluster launches).

``PackedLaunch(kernel, grid, args)`` takes ``Kernel.launch``'s arguments, applies the same checks
and encodes the tensor maps (cuda-python's encode, once); each call ``launch(addresses, stream)``
then writes the new device addresses (``cuTensorMapReplaceAddress`` for a tensor map whose address
changed, the 8 bytes of a pointer parameter) into the pre-packed parameter buffer and launches.
The buffer is reused: ``cuLaunchKernel`` copies the parameter values when it is called (into the
launch, or into the kernel node of a stream being captured), so a later call that rewrites the
buffer never changes an earlier launch or a captured CUDA graph. A lock makes the write-and-launch
of one ``PackedLaunch`` atomic across threads (ctypes releases the GIL during the call).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Mapping, Sequence

from fa4_mlir.errors import CudaError, LaunchError
from fa4_mlir.runtime import driver
from fa4_mlir.runtime.tensormap import TMA_ALIGN, GlobalTensor

LIBCUDA_NAMES = ("libcuda.so.1", "libcuda.so")  # what cuda-python opens on Linux
TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN = 128, 64  # sizeof / alignof(CUtensorMap)
_U, _P = ctypes.c_uint, ctypes.c_void_p
_PROTOTYPES = {
    "cuLaunchKernel": (_P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P),
    "cuTensorMapReplaceAddress": (_P, _P),
    "cuCtxGetCurrent": (_P,),
}


@functools.lru_cache(maxsize=1)
def libcuda():
    """libcuda as a ``ctypes.CDLL`` with the prototypes this module calls, or None when it cannot be
    opened or lacks one of them (then the runtime launches through cuda-python)."""
    for name in LIBCUDA_NAMES:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            for symbol, argtypes in _PROTOTYPES.items():
                function = getattr(lib, symbol)
                function.argtypes, function.restype = argtypes, ctypes.c_int
        except AttributeError:  # a driver older than CUDA 12.0 (no cuTensorMapReplaceAddress)
            return None
        # The same entry point without argtypes, for callers that pass ready ctypes values: it skips
        # the per-argument conversion (0.5 us of the 1.7 us of a call on a slow core).
        lib.launch_prepacked = lib["cuLaunchKernel"]
        lib.launch_prepacked.restype = ctypes.c_int
        return lib
    return None


def raise_for(err: int, what: str) -> None:
    """CudaError for a CUresult ``err`` returned through ctypes, named as cuda-python names it."""
    code = driver.cu().CUresult(err)
    raise CudaError(f"{what} failed: {driver.error_text(code)}", driver.error_name(code))


def current_context(lib) -> int:
    """The calling thread's current context handle (0 for none), through ctypes."""
    ctx = ctypes.c_void_p()
    err = lib.cuCtxGetCurrent(ctypes.byref(ctx))
    if err:
        raise_for(err, "cuCtxGetCurrent")
    return ctx.value or 0


class PackedLaunch:
    """One kernel's launch for one argument layout: ``launch(addresses, stream)`` runs it with new
    device addresses, one int per tensor-map or pointer parameter, in parameter order or in the
    order ``slots`` names them. Build it with the arguments of a real call (``GlobalTensor``s in
    device memory, scalars, ints for pointers): they are checked as ``Kernel.launch`` checks them."""

    def __init__(self, kernel, grid: Sequence[int], args: Mapping[str, object] | Sequence[object],
                 slots: Sequence[str] | None = None):
        lib = libcuda()
        if lib is None:
            raise LaunchError("PackedLaunch needs libcuda through ctypes (libcuda.so.1); use Kernel.launch")
        self.kernel, self._lib = kernel, lib
        self.grid = kernel._grid(grid)
        values = kernel._bind(args)
        maps = sum(p["kind"] == "tensormap" for p in kernel.params)
        self._map_memory = (ctypes.c_ubyte * (TENSOR_MAP_BYTES * maps + TENSOR_MAP_ALIGN))()
        base = -ctypes.addressof(self._map_memory) % TENSOR_MAP_ALIGN + ctypes.addressof(self._map_memory)
        holders, pointers, self.slots, self._writers, self._addresses = [], [], [], [], []
        for param, value in zip(kernel.params, values):
            what = f"argument '{param['name']}' of {kernel.name}"
            if param["kind"] == "tensormap":
                if not isinstance(value, GlobalTensor):
                    raise LaunchError(f"{what} must be a GlobalTensor for a PackedLaunch, got {type(value).__name__}")
                _, encoded = kernel._pack(param, value)  # the checks and the (cached) encode
                address = base + TENSOR_MAP_BYTES * sum(is_map for is_map, _ in self._writers)
                ctypes.memmove(address, encoded, TENSOR_MAP_BYTES)
                pointers.append(address)
                self._writers.append((True, address))
                self._addresses.append(value.address)
                self.slots.append(param["name"])
                continue
            holder, address = kernel._pack(param, value)
            holders.append(holder)  # alive as long as the packed pointer to it
            pointers.append(address)
            if param["kind"] == "ptr":
                self._writers.append((False, holder))
                self._addresses.append(holder.value or 0)
                self.slots.append(param["name"])
        if slots is not None:  # the caller's order of the addresses
            if sorted(slots) != sorted(self.slots):
                raise LaunchError(f"slots of a PackedLaunch of {kernel.name} must name its tensor-map and pointer "
                                  f"parameters ({', '.join(self.slots)}), got {', '.join(slots)}")
            order = [self.slots.index(name) for name in slots]
            self.slots = list(slots)
            self._writers = [self._writers[i] for i in order]
            self._addresses = [self._addresses[i] for i in order]
        self._holders = holders
        self._params = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        self._params_address = ctypes.addressof(self._params)
        self._lock = threading.Lock()
        # A plain, non-debug kernel launches right here; the others through Kernel.launch_packed.
        direct = kernel.cluster == (1, 1, 1) and not kernel.debug_timeout_ms
        self._direct = (ctypes.c_void_p(kernel._function_handle),
                        *(ctypes.c_uint(n) for n in (*self.grid, *kernel.threads, kernel.smem_bytes))) if direct else None
        self._stream = (None, None)  # the last stream handle and its ctypes value
        self._context = ctypes.c_void_p()
        self._context_ref = ctypes.byref(self._context)

    def launch(self, addresses: Sequence[int], stream: int) -> None:
        """Launch with ``addresses`` (device addresses in ``slots`` order) on ``stream`` (a raw handle,
        int). A tensor-map address must be 16-byte aligned (TMA); the caller keeps the memory alive
        until the kernel has read it, as for any launch."""
        kernel = self.kernel
        if len(addresses) != len(self.slots):
            raise LaunchError(f"a PackedLaunch of {kernel.name} takes {len(self.slots)} addresses "
                              f"({', '.join(self.slots)}), got {len(addresses)}")
        if stream.__class__ is not int:
            raise LaunchError(f"stream of a PackedLaunch must be a raw handle (int), got {stream!r}")
        with self._lock:
            last = self._addresses
            for i, address in enumerate(addresses):
                if address != last[i]:
                    self._write(i, address)
            if self._direct is None:
                kernel.launch_packed(self.grid, self._params_address, stream)
                return
            lib = self._lib
            err = lib.cuCtxGetCurrent(self._context_ref)
            if err:
                raise_for(err, "cuCtxGetCurrent")
            if self._context.value != kernel._context:
                driver.activate(kernel.device)
            handle, value = self._stream
            if handle != stream:
                value = ctypes.c_void_p(stream)
                self._stream = stream, value
            err = lib.launch_prepacked(*self._direct, value, self._params, None)
            if err:
                raise_for(err, f"launch of {kernel.name}")

    def _write(self, i: int, address: int) -> None:
        is_map, writer = self._writers[i]
        if is_map:
            if address % TMA_ALIGN or address <= 0:
                raise LaunchError(f"argument '{self.slots[i]}' of {self.kernel.name} address must be "
                                  f"{TMA_ALIGN}-byte aligned (TMA), got 0x{address:x}")
            err = self._lib.cuTensorMapReplaceAddress(writer, address)
            if err:
                raise_for(err, f"cuTensorMapReplaceAddress({self.slots[i]})")
        else:
            if not isinstance(address, int) or address < 0:
                raise LaunchError(f"argument '{self.slots[i]}' of {self.kernel.name} must be a device address "
                                  f"(int), got {address!r}")
            writer.value = address
        self._addresses[i] = address
