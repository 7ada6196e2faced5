"""The CUDA driver API through cuda-python (``cuda.bindings.driver``): checked calls and contexts.

Every call goes through ``check``, so a driver failure is a ``CudaError`` naming the call and the
CUresult, never a tuple the caller forgets to inspect. Kernels run in a device's primary context,
the one PyTorch and the CUDA runtime use, so modules, streams and memory are shared with them.
"""

from __future__ import annotations

import functools
import threading

from fa4_mlir.errors import CudaError, LaunchError

_lock = threading.Lock()
_contexts: dict[int, object] = {}


@functools.lru_cache(maxsize=1)
def cu():
    """The ``cuda.bindings.driver`` module, or a clear error when cuda-python is missing."""
    try:
        from cuda.bindings import driver
    except ImportError:
        raise CudaError("fa4_mlir.runtime needs cuda-python: pip install 'cuda-bindings>=12.8'",
                        "NOT_INSTALLED") from None
    return driver


def check(result, what: str):
    """Unpack ``(CUresult, *values)``: the value(s), or CudaError naming ``what`` and the error."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != cu().CUresult.CUDA_SUCCESS:
        raise CudaError(f"{what} failed: {error_text(err)}", error_name(err))
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def error_name(err) -> str:
    ok, name = cu().cuGetErrorName(err)
    return name.decode() if ok == cu().CUresult.CUDA_SUCCESS and name else str(err)


def error_text(err) -> str:
    ok, text = cu().cuGetErrorString(err)
    described = text.decode() if ok == cu().CUresult.CUDA_SUCCESS and text else ""
    return f"{error_name(err)} ({described})" if described else error_name(err)


@functools.lru_cache(maxsize=1)
def init() -> int:
    """Initialise the driver once; the number of devices. No driver or no GPU is a CudaError."""
    try:
        check(cu().cuInit(0), "cuInit")
    except RuntimeError as exc:  # cuda-python could not dlopen libcuda
        if isinstance(exc, CudaError):
            raise
        raise CudaError(f"no CUDA driver on this machine ({exc}); fa4_mlir.runtime runs kernels on an "
                        f"NVIDIA GPU with its driver installed", "NO_DRIVER") from None
    count = check(cu().cuDeviceGetCount(), "cuDeviceGetCount")
    if count == 0:
        raise CudaError("no CUDA device is visible (check CUDA_VISIBLE_DEVICES)", "NO_DEVICE")
    return count


def device_count() -> int:
    """Devices visible to the driver; 0 when there is no driver, GPU or cuda-python."""
    try:
        return init()
    except CudaError:
        return 0


def device(ordinal: int):
    count = init()
    if not isinstance(ordinal, int) or not 0 <= ordinal < count:
        raise LaunchError(f"device must be an index in [0, {count}), got {ordinal!r}")
    return check(cu().cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")


def attribute(ordinal: int, name: str) -> int:
    attr = getattr(cu().CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
    return check(cu().cuDeviceGetAttribute(attr, device(ordinal)), f"cuDeviceGetAttribute({name})")


@functools.lru_cache(maxsize=None)
def capability(ordinal: int) -> tuple[int, int]:
    return attribute(ordinal, "COMPUTE_CAPABILITY_MAJOR"), attribute(ordinal, "COMPUTE_CAPABILITY_MINOR")


@functools.lru_cache(maxsize=None)
def device_name(ordinal: int) -> str:
    return check(cu().cuDeviceGetName(256, device(ordinal)), "cuDeviceGetName").split(b"\0")[0].decode()


def current_device() -> int:
    """The device of the calling thread's current context (PyTorch's current device), else 0."""
    init()
    ctx = check(cu().cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        return 0
    return int(check(cu().cuCtxGetDevice(), "cuCtxGetDevice"))


def activate(ordinal: int):
    """Make ``ordinal``'s primary context current on this thread; return it."""
    with _lock:
        ctx = _contexts.get(ordinal)
        if ctx is None:
            ctx = check(cu().cuDevicePrimaryCtxRetain(device(ordinal)), "cuDevicePrimaryCtxRetain")
            _contexts[ordinal] = ctx
    current = check(cu().cuCtxGetCurrent(), "cuCtxGetCurrent")
    if current is None or int(current) != int(ctx):
        check(cu().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx
