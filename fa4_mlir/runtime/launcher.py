"""The launch fast path: libcuda through ctypes and ``PackedLaunch``, a launch whose parameters are
checked, encoded and packed once and whose per-call work is writing the tensors' addresses.

cuda-python converts every argument of every call in Python: about 10 us per ``cuLaunchKernel`` and
as much per ``cuTensorMapEncodeTiled`` on the H100 machine (docs/PERF.md, "Host cost per launch"),
against a budget of 15 us for a whole ``torch.ops.fa4.*`` call. ctypes calls the same driver entry
points with a few hundred nanoseconds of conversion. cuda-python stays the fallback (no libcuda that
ctypes can open) and does everything else (loading, contexts, error names, debug launches).

``PackedLaunch(kernel, grid, args)`` takes ``Kernel.launch``'s arguments, applies the same checks
and encodes the tensor maps (cuda-python's encode, once); each call ``launch(addresses, stream)``
then writes the device addresses that differ from its last launch's (``cuTensorMapReplaceAddress``
for a tensor map, the 8 bytes of a pointer parameter; nothing when all are equal, as in a loop whose
outputs get the caching allocator's same blocks back) into the pre-packed parameter buffer and
launches with ``cuLaunchKernelEx`` and a kept ``CUlaunchConfig`` (4 ready arguments: less ctypes
conversion than ``cuLaunchKernel``'s 11). The buffer is reused: the driver copies the parameter
values when it is called (into the launch, or into the kernel node of a stream being captured), so a
later call that rewrites the buffer never changes an earlier launch or a captured CUDA graph, and a
call that writes nothing launches what the buffer holds, its own addresses. A lock makes the
write-and-launch of one ``PackedLaunch`` atomic across threads (ctypes releases the GIL during the
call).
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
    "cuLaunchKernelEx": (_P, _P, _P, _P),
    "cuTensorMapReplaceAddress": (_P, _P),
    "cuCtxGetCurrent": (_P,),
}


CLUSTER_DIMENSION = 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (cuda.h's CUlaunchAttributeID)


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute (cuda.h): an id, padding to 8 bytes, and a 64-byte value union, of which a
    cluster launch sets ``clusterDim`` (three unsigned ints)."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _U * 16)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h): what ``cuLaunchKernelEx`` reads besides the function and parameters. A
    ``PackedLaunch`` keeps one, so a launch passes 4 ready arguments instead of ``cuLaunchKernel``'s 11
    (0.3 us less ctypes conversion per call)."""

    _fields_ = [("grid", _U * 3), ("block", _U * 3), ("shared_mem_bytes", _U), ("stream", _P), ("attrs", _P),
                ("num_attrs", _U)]


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
        # cuLaunchKernelEx without argtypes, for PackedLaunch, which passes ready ctypes values: it
        # skips the per-argument conversion.
        lib.launch_prepacked = lib["cuLaunchKernelEx"]
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
        # What fa4_mlir.torch.host_launcher copies: each packed parameter's size, and per slot its parameter
        self.param_sizes, self.slot_params = [], []
        for index, (param, value) in enumerate(zip(kernel.params, values)):
            what = f"argument '{param['name']}' of {kernel.name}"
            if param["kind"] == "tensormap":
                if not isinstance(value, GlobalTensor):
                    raise LaunchError(f"{what} must be a GlobalTensor for a PackedLaunch, got {type(value).__name__}")
                _, encoded = kernel._pack(param, value)  # the checks and the (cached) encode
                address = base + TENSOR_MAP_BYTES * sum(is_map for is_map, _ in self._writers)
                ctypes.memmove(address, encoded, TENSOR_MAP_BYTES)
                pointers.append(address)
                self.param_sizes.append(TENSOR_MAP_BYTES)
                self._writers.append((True, address))
                self._addresses.append(value.address)
                self.slots.append(param["name"])
                self.slot_params.append(index)
                continue
            holder, address = kernel._pack(param, value)
            holders.append(holder)  # alive as long as the packed pointer to it
            pointers.append(address)
            self.param_sizes.append(ctypes.sizeof(holder))
            if param["kind"] == "ptr":
                self._writers.append((False, holder))
                self._addresses.append(holder.value or 0)
                self.slots.append(param["name"])
                self.slot_params.append(index)
        if slots is not None:  # the caller's order of the addresses
            if sorted(slots) != sorted(self.slots):
                raise LaunchError(f"slots of a PackedLaunch of {kernel.name} must name its tensor-map and pointer "
                                  f"parameters ({', '.join(self.slots)}), got {', '.join(slots)}")
            order = [self.slots.index(name) for name in slots]
            self.slots = list(slots)
            self._writers = [self._writers[i] for i in order]
            self._addresses = [self._addresses[i] for i in order]
            self.slot_params = [self.slot_params[i] for i in order]
        self.slot_maps = [is_map for is_map, _ in self._writers]
        self.param_addresses = list(pointers)
        self._holders = holders
        self._addresses = tuple(self._addresses)  # what the packed parameters hold now
        self._params = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        self._params_address = ctypes.addressof(self._params)
        self._lock = threading.Lock()
        # A non-debug kernel launches right here: cuLaunchKernelEx with ``_config`` (its stream rewritten
        # when it changes, its cluster shape an attribute) and the ready arguments ``_call``; a debug build
        # through Kernel.launch_packed (which checks the launch's trap flag).
        self._config, self._call = None, None
        if not kernel.debug_timeout_ms:
            self._config = LaunchConfig((_U * 3)(*self.grid), (_U * 3)(*kernel.threads), kernel.smem_bytes)
            if kernel.cluster != (1, 1, 1):  # the cluster shape, an attribute of the launch
                self._attribute = LaunchAttribute(CLUSTER_DIMENSION, b"", (_U * 16)(*kernel.cluster))
                self._config.attrs, self._config.num_attrs = ctypes.addressof(self._attribute), 1
            self._call = (ctypes.byref(self._config), ctypes.c_void_p(kernel._function_handle), self._params, None)
        self.plain = self._call is not None  # launched by cuLaunchKernelEx alone (no debug checks)
        self._stream = None  # the stream handle in ``_config``
        self._context = ctypes.c_void_p()
        self._context_ref = ctypes.byref(self._context)
        self._kernel_context = kernel._context

    def launch(self, addresses: Sequence[int], stream: int) -> None:
        """Launch with ``addresses`` (device addresses in ``slots`` order, best a tuple) on ``stream`` (a
        raw handle, int). A tensor-map address must be 16-byte aligned (TMA); the caller keeps the
        memory alive until the kernel has read it, as for any launch. Addresses equal to the last
        call's (a steady loop reusing the caching allocator's blocks) are not written again."""
        with self._lock:
            if addresses != self._addresses:  # one tuple compare; the writes only for what changed
                self._update(addresses)
            if stream.__class__ is not int or stream != self._stream:
                self._use_stream(stream)
            call = self._call
            if call is None:
                self.kernel.launch_packed(self.grid, self._params_address, stream)
                return
            lib = self._lib
            err = lib.cuCtxGetCurrent(self._context_ref)
            if err:
                raise_for(err, "cuCtxGetCurrent")
            if self._context.value != self._kernel_context:
                driver.activate(self.kernel.device)
            err = lib.launch_prepacked(*call)
            if err:
                raise_for(err, f"launch of {self.kernel.name}")

    def _update(self, addresses: Sequence[int]) -> None:
        """Write the addresses that differ from the packed ones, each checked first."""
        if len(addresses) != len(self.slots):
            raise LaunchError(f"a PackedLaunch of {self.kernel.name} takes {len(self.slots)} addresses "
                              f"({', '.join(self.slots)}), got {len(addresses)}")
        held = list(self._addresses)
        try:
            for i, address in enumerate(addresses):
                if address != held[i]:
                    self._write(i, address)
                    held[i] = address
        finally:  # what the buffer holds, also after a refused address
            self._addresses = tuple(held)

    def _use_stream(self, stream: int) -> None:
        if stream.__class__ is not int:
            raise LaunchError(f"stream of a PackedLaunch must be a raw handle (int), got {stream!r}")
        self._stream = stream
        if self._config is not None:
            self._config.stream = stream

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
