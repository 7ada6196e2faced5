"""A loaded kernel: its module on one device and a checked ``launch`` through ``cuLaunchKernelEx``.

Parameters are packed from the manifest's ABI: tensor maps are encoded from ``GlobalTensor``s with
the manifest's box and swizzle and passed by value (``__grid_constant__``), scalars are range-checked.
The launch uses the manifest's block size, cluster shape and dynamic shared memory. A debug build
(``manifest['debug']``) is checked synchronously after each launch outside graph capture, so a barrier
timeout surfaces as ``KernelTrap`` at the launch that caused it.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping, Sequence

from fa4_mlir.errors import CudaError, KernelTrap, LaunchError
from fa4_mlir.runtime import driver
from fa4_mlir.runtime.artifacts import Artifact
from fa4_mlir.runtime.driver import check, cu
from fa4_mlir.runtime.launcher import PackedLaunch, current_context, libcuda, raise_for
from fa4_mlir.runtime.tensormap import GlobalTensor, encode_tiled

TENSOR_MAP_CACHE = 512  # encoded maps kept per kernel (oldest dropped first)
STATIC_SMEM_DEFAULT = 48 * 1024  # dynamic shared memory beyond this needs the opt-in attribute
_SCALARS = {"i32": (ctypes.c_int32, -(1 << 31), (1 << 31) - 1), "i64": (ctypes.c_int64, -(1 << 63), (1 << 63) - 1)}
_TRAP_CODES = ("CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_ASSERT")


def check_grid(grid, cluster: tuple[int, int, int]) -> tuple[int, int, int]:
    """``grid`` as three dims, checked: 1 to 3 positive ints within the hardware's limits, each a
    multiple of the cluster's size along it; LaunchError otherwise."""
    dims = tuple(grid)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise LaunchError(f"grid must be 1 to 3 positive ints, got {grid!r}")
    dims = dims + (1,) * (3 - len(dims))
    limits = (2**31 - 1, 65535, 65535)
    for axis, (d, limit, c) in enumerate(zip(dims, limits, cluster)):
        if d > limit or d % c:
            raise LaunchError(f"grid dimension {'xyz'[axis]} must be <= {limit} and a multiple of the "
                              f"cluster size {c}, got {d}")
    return dims


def bind_args(kernel: str, params: Sequence[dict], args) -> list[object]:
    """``args`` (a mapping by parameter name, or a sequence in order) as a list in ``params`` order."""
    names = [p["name"] for p in params]
    if isinstance(args, Mapping):
        unknown = sorted(set(args) - set(names))
        missing = [n for n in names if n not in args]
        if unknown or missing:
            raise LaunchError(f"arguments of {kernel} must be exactly {', '.join(names)}; "
                              f"missing {missing or 'none'}, unknown {unknown or 'none'}")
        return [args[n] for n in names]
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise LaunchError(f"arguments of {kernel} must be a mapping by name or a sequence in order "
                          f"({', '.join(names)}), got {type(args).__name__}")
    args = list(args)
    if len(args) != len(names):
        raise LaunchError(f"{kernel} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    return args


def check_scalar(kind: str, value, what: str) -> int | float:
    """The value of a scalar parameter of ``kind`` (``f32``, ``i32``, ``i64``), checked as a launch
    passes it; LaunchError for a bad value or a kind this runtime cannot pass."""
    if kind == "f32":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise LaunchError(f"{what} must be a finite number, got {value!r}")
        return float(value)
    if kind in _SCALARS:
        _, low, high = _SCALARS[kind]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise LaunchError(f"{what} must be an int in [{low}, {high}], got {value!r}")
        return int(value)
    raise unsupported_kind(kind, what)


def unsupported_kind(kind: str, what: str) -> LaunchError:
    return LaunchError(f"{what} has kind '{kind}', which this runtime cannot pass; rebuild the artifact")


def target_for_capability(major: int, minor: int) -> str | None:
    """The fa4 target whose code runs on compute capability ``major.minor`` (arch-specific code runs
    only on its own major.minor), or None."""
    return {(9, 0): "sm_90a", (10, 0): "sm_100a"}.get((major, minor))


def check_target(target: str, ordinal: int) -> None:
    major, minor = driver.capability(ordinal)
    if target_for_capability(major, minor) != target:
        raise LaunchError(
            f"the artifact's target must match device {ordinal} ({driver.device_name(ordinal)}, sm_{major}{minor}), "
            f"got a {target} artifact; {target} code runs only on "
            f"sm_{target[3:-1]} GPUs: rebuild with fa4-compile --target "
            f"{target_for_capability(major, minor) or '<a supported target: sm_90a or sm_100a>'}")


class Kernel:
    """One artifact loaded on one device. ``launch(grid, args, stream=...)`` runs it."""

    def __init__(self, artifact: Artifact, device: int = 0):
        self.artifact = artifact
        self.manifest = artifact.manifest
        self.name = self.manifest["entry"]
        self.device = device
        check_target(self.manifest["target"], device)
        self._context = int(driver.activate(device))
        self._module = check(cu().cuModuleLoadData(artifact.cubin), f"cuModuleLoadData({artifact.path})")
        self._function = check(cu().cuModuleGetFunction(self._module, self.name.encode()),
                               f"cuModuleGetFunction({self.name})")
        self._function_handle = int(self._function)  # what the ctypes launch passes
        self.smem_bytes = int(self.manifest["smem_bytes"])
        static = int(self.manifest.get("static_smem_bytes") or 0)
        limit = driver.attribute(device, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        if self.smem_bytes + static > limit:
            raise LaunchError(f"kernel {self.name} shared memory must fit device {device}'s {limit} B per block, "
                              f"got {self.smem_bytes} B dynamic + {static} B static")
        if self.smem_bytes > STATIC_SMEM_DEFAULT:
            check(cu().cuFuncSetAttribute(
                self._function, cu().CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                self.smem_bytes), f"cuFuncSetAttribute({self.name}, max dynamic shared memory)")
        self.params = sorted(self.manifest["params"], key=lambda p: p["index"])
        self.threads = tuple(self.manifest["threads"])
        self.cluster = tuple(self.manifest.get("cluster") or (1, 1, 1))
        self.debug_timeout_ms = artifact.debug_timeout_ms
        self._maps: dict[tuple, object] = {}  # (param, GlobalTensor) -> CUtensorMap
        per_sm = check(cu().cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self._function, self.threads[0] * self.threads[1] * self.threads[2], self.smem_bytes),
            f"cuOccupancyMaxActiveBlocksPerMultiprocessor({self.name})")
        # How many CTAs run at once on the device: the size of a persistent grid. A cluster kernel's CTAs
        # are placed a cluster at a time inside one GPC, so fewer of them fit than SMs x per_sm (GPCs with an
        # odd count of free SMs): the driver's count of active clusters, or a grid of SMs x per_sm CTAs would
        # run its last clusters in a second wave, doubling a persistent kernel's time.
        self.resident_ctas = max(1, per_sm) * driver.attribute(device, "MULTIPROCESSOR_COUNT")
        if self.cluster != (1, 1, 1):
            self.resident_ctas = self._resident_clusters() * self.cluster[0] * self.cluster[1] * self.cluster[2]

    def _resident_clusters(self) -> int:
        """``cuOccupancyMaxActiveClusters`` for this kernel's cluster shape, block and shared memory (at
        least 1: a launch of one cluster always runs)."""
        clusters = check(cu().cuOccupancyMaxActiveClusters(self._function, self._cluster_config(self.cluster)),
                         f"cuOccupancyMaxActiveClusters({self.name})")
        return max(1, clusters)

    def _cluster_config(self, grid, stream=None):
        """A ``CUlaunchConfig`` of ``grid`` with this kernel's block, shared memory and cluster shape (the
        cluster dimension attribute), on ``stream``: what a cluster launch and the cluster occupancy read."""
        config = cu().CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = self.threads
        config.sharedMemBytes = self.smem_bytes
        if stream is not None:
            config.hStream = stream
        attr = cu().CUlaunchAttribute()
        attr.id = cu().CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = self.cluster
        config.attrs, config.numAttrs = [attr], 1
        return config

    def __repr__(self) -> str:
        return f"<fa4 kernel {self.name} {self.manifest['target']} on device {self.device}>"

    # -- launch ---------------------------------------------------------------------------------------
    def launch(self, grid: Sequence[int], args: Mapping[str, object] | Sequence[object], *, stream=0) -> None:
        """Launch on ``grid`` (1 to 3 dims) with ``args`` by parameter name (or in order), on ``stream``
        (a CUstream, an int handle, or an object with ``cuda_stream``, like torch.cuda.Stream)."""
        grid = self._grid(grid)
        values = self._bind(args)
        keep, pointers = [], []
        for param, value in zip(self.params, values):
            holder, address = self._pack(param, value)
            keep.append(holder)
            pointers.append(address)
        array = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        self.launch_packed(grid, ctypes.addressof(array), stream)
        del keep

    def launch_packed(self, grid: tuple[int, int, int], params: int, stream) -> None:
        """Launch on a checked 3-D ``grid`` with ``params``, the address of the packed parameter
        pointers (``void**``), on ``stream``: through ctypes on libcuda where it opens (plain launches),
        else through cuda-python. The driver copies the parameter values during the call."""
        handle = _stream(stream)
        lib = libcuda()
        if lib is not None and self.cluster == (1, 1, 1):
            if current_context(lib) != self._context:
                driver.activate(self.device)
            err = lib.cuLaunchKernel(self._function_handle, *grid, *self.threads, self.smem_bytes, int(handle),
                                     params, None)
            if err:
                raise_for(err, f"launch of {self.name}")
        else:
            driver.activate(self.device)
            if self.cluster == (1, 1, 1):  # the plain launch: no launch-config objects to build
                check(cu().cuLaunchKernel(self._function, *grid, *self.threads, self.smem_bytes, handle, params, 0),
                      f"launch of {self.name}")
            else:
                check(cu().cuLaunchKernelEx(self._cluster_config(grid, handle), self._function, params, 0),
                      f"launch of {self.name}")
        if self.debug_timeout_ms and not _capturing(handle):
            self._check_debug_launch(handle)

    def packed(self, grid: Sequence[int], args: Mapping[str, object] | Sequence[object],
               slots: Sequence[str] | None = None) -> PackedLaunch:
        """A ``PackedLaunch`` of this kernel for the layout of ``args`` (checked now), taking the
        addresses in the order ``slots`` names them (see ``fa4_mlir.runtime.launcher``); LaunchError
        where libcuda cannot be called through ctypes."""
        return PackedLaunch(self, grid, args, slots)

    def _grid(self, grid) -> tuple[int, int, int]:
        return check_grid(grid, self.cluster)

    def _bind(self, args) -> list[object]:
        return bind_args(self.name, self.params, args)

    def _pack(self, param: dict, value):
        kind, what = param["kind"], f"argument '{param['name']}' of {self.name}"
        if kind == "tensormap":
            if isinstance(value, GlobalTensor):
                if value.array is not None:
                    raise LaunchError(f"{what} must be in device memory, got a host GlobalTensor (NumPy memory, "
                                      f"GlobalTensor.host); copy it to device {self.device}, or load the kernel "
                                      f"with device='emulator'")
                if value.device is not None and value.device != self.device:
                    raise LaunchError(f"{what} must be on device {self.device} (where the kernel is loaded), "
                                      f"got device {value.device}")
                if "tensor_map" not in param:
                    raise LaunchError(f"{what}: the manifest has no tensor-map spec; pass an encoded CUtensorMap")
                value = self._tensor_map(param, value, what)
            if not isinstance(value, cu().CUtensorMap):
                raise LaunchError(f"{what} must be a GlobalTensor or a CUtensorMap, got {type(value).__name__}")
            return value, value.getPtr()
        if kind == "f32":
            holder = ctypes.c_float(check_scalar(kind, value, what))
        elif kind in _SCALARS:
            holder = _SCALARS[kind][0](check_scalar(kind, value, what))
        elif kind == "ptr":
            address = value.data_ptr() if hasattr(value, "data_ptr") else value
            if not isinstance(address, int) or address < 0:
                raise LaunchError(f"{what} must be a device address (int) or have data_ptr(), got {value!r}")
            holder = ctypes.c_uint64(address)
        else:
            raise unsupported_kind(kind, what)
        return holder, ctypes.addressof(holder)

    def _tensor_map(self, param: dict, tensor: GlobalTensor, what: str):
        """Encoding costs about 10 us of host time; a map is a pure function of the tensor's address,
        layout and the param's spec, so repeated launches on the same buffers reuse it."""
        key = (param["index"], tensor.address, tensor.dtype, tensor.shape, tensor.strides)
        found = self._maps.get(key)
        if found is None:
            if len(self._maps) >= TENSOR_MAP_CACHE:
                self._maps.pop(next(iter(self._maps)))
            found = self._maps[key] = encode_tiled(tensor, param["tensor_map"], what)
        return found

    def _check_debug_launch(self, stream) -> None:
        err = cu().cuStreamSynchronize(stream)[0]
        if err == cu().CUresult.CUDA_SUCCESS:
            return
        name = driver.error_name(err)
        if name in _TRAP_CODES:
            raise KernelTrap(
                f"kernel {self.name} trapped ({driver.error_text(err)}): this debug build traps when a "
                f"barrier wait lasts {self.debug_timeout_ms} ms or a debug check fails, and the device printed "
                f"why ('fa4 debug: barrier wait timed out ...' naming the barrier, index and phase, or the "
                f"check's message) on stdout; the CUDA context is now unusable, so restart the process", name)
        raise CudaError(f"kernel {self.name} failed: {driver.error_text(err)}", name)


def _stream(stream):
    handle = getattr(stream, "cuda_stream", stream)
    if isinstance(handle, int) and handle >= 0:
        return handle
    if isinstance(handle, cu().CUstream):
        return handle
    raise LaunchError(f"stream must be a CUstream, an int handle or have .cuda_stream, got {stream!r}")


def _capturing(stream) -> bool:
    status = check(cu().cuStreamIsCapturing(stream), "cuStreamIsCapturing")
    return status != cu().CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
