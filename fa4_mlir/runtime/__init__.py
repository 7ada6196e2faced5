"""fa4_mlir.runtime: load and launch fa4-compile output with cuda-python. No MLIR import.

    from fa4_mlir import runtime
    from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
    from fa4_mlir.kernels.copy_pipeline import launch_geometry

    config = CopyPipelineConfig(target="sm_90a")
    kernel = runtime.load("copy-pipeline", config)
    grid, tiles = launch_geometry(config, rows, cols, kernel.resident_ctas)
    kernel.launch(grid, {"src": GlobalTensor(...), "dst": GlobalTensor(...), **tiles, "scale": 1.0})

``load`` finds the artifact in the cache (``FA4_CACHE_DIR``) or, where the compiler is installed,
builds it once; ``load_file`` does the same for an fa4 ``.mlir`` file and ``load_artifact`` reads an
``fa4-compile -o DIR`` directory. With ``FA4_DEBUG=1`` they load debug builds, whose barrier waits
trap instead of hanging. Loaded kernels are kept per process: a repeated ``load`` costs a dict lookup.

A launch repeated with new buffers of one layout can be packed once: ``kernel.packed(grid, args)``
checks ``args`` and encodes their tensor maps, and its ``launch(addresses, stream)`` writes only the
addresses that changed since its last launch and calls ``cuLaunchKernelEx`` through ctypes
(``fa4_mlir.runtime.launcher``; the torch ops' fast path). ``Kernel.launch`` too calls the driver through ctypes where libcuda opens.

``device="emulator"`` loads the artifact's PTX into the CPU emulator (``fa4_mlir.emu``) instead: an
``EmulatedKernel`` whose ``launch`` takes NumPy memory (``GlobalTensor.host``) and returns the
emulator's statistics; see ``fa4_mlir.runtime.emulated``. Without a config it builds sm_90a.
"""

from __future__ import annotations

import os
import threading

from fa4_mlir import knobs
from fa4_mlir.errors import ArtifactError, CudaError, KernelTrap, LaunchError
from fa4_mlir.runtime import driver
from fa4_mlir.runtime.artifacts import Artifact, ArtifactKey, fetch, read_artifact
from fa4_mlir.runtime.kernel import Kernel, target_for_capability
from fa4_mlir.runtime.tensormap import GlobalTensor

EMULATOR = "emulator"  # the device name of the CPU emulator (fa4_mlir.runtime.emulated)
_loaded: dict[tuple, Kernel] = {}
_lock = threading.Lock()


def device_target(device: int | None = None) -> str:
    """The fa4 target of ``device`` (default: the current one); LaunchError if fa4 has none for it."""
    ordinal = driver.current_device() if device is None else device
    major, minor = driver.capability(ordinal)
    target = target_for_capability(major, minor)
    if target is None:
        raise LaunchError(f"device {ordinal} ({driver.device_name(ordinal)}) must be an sm_90 or sm_100 GPU "
                          f"(fa4 kernels use wgmma or tcgen05), got sm_{major}{minor}")
    return target


def load(kernel: str, config=None, *, device: int | str | None = None,
         debug: bool | int | None = None) -> Kernel:
    """The built-in ``kernel`` (e.g. "copy-pipeline") built for ``config`` (its config class; default
    config for the device's target, sm_90a on the emulator), loaded on ``device`` (a GPU index, default:
    current; or "emulator"). ``debug``: True (default limit), a limit in ms, False, or None to follow
    FA4_DEBUG."""
    from fa4_mlir.kernels import KERNELS

    if kernel not in KERNELS:
        raise LaunchError(f"kernel must be one of {', '.join(KERNELS)}, got '{kernel}'")
    config_cls = KERNELS[kernel][0]
    if config is not None and not isinstance(config, config_cls):
        raise LaunchError(f"config of '{kernel}' must be a {config_cls.__name__}, got {type(config).__name__}")
    timeout = _timeout(debug)
    ordinal = _device(device)
    if config is None:
        config = config_cls(target=_default_target(ordinal))
    return _load(ArtifactKey.for_config(kernel, config, timeout), ordinal)


def load_file(path: str | os.PathLike, *, target: str | None = None, device: int | str | None = None,
              debug: bool | int | None = None) -> Kernel:
    """An fa4 ``.mlir`` kernel file, compiled for ``target`` (default: the device's) and cached."""
    ordinal = _device(device)
    return _load(ArtifactKey.for_file(path, target or _default_target(ordinal), _timeout(debug)), ordinal)


def load_artifact(path: str | os.PathLike, *, device: int | str | None = None) -> Kernel:
    """An artifact written by ``fa4-compile -o DIR``: the directory or its ``<kernel>.json``."""
    ordinal = _device(device)
    if ordinal == EMULATOR:
        from fa4_mlir.runtime.emulated import EmulatedKernel

        return EmulatedKernel(read_artifact(path))
    return Kernel(read_artifact(path), ordinal)


def _device(device) -> int | str:
    """A GPU ordinal (None: the current device) or EMULATOR."""
    if device == EMULATOR and isinstance(device, str):
        return EMULATOR
    if device is not None and (not isinstance(device, int) or isinstance(device, bool)):
        raise LaunchError(f"device must be a GPU index (int), None (the current GPU) or '{EMULATOR}', "
                          f"got {device!r}")
    return driver.current_device() if device is None else device


def _default_target(ordinal: int | str) -> str:
    if ordinal == EMULATOR:
        from fa4_mlir.runtime.emulated import DEFAULT_TARGET

        return DEFAULT_TARGET
    return device_target(ordinal)


def _timeout(debug: bool | int | None) -> int:
    if debug is None:
        return knobs.debug_timeout_ms()
    if debug is True:
        return knobs.DEFAULT_DEBUG_TIMEOUT_MS
    if debug is False:
        return 0
    if not isinstance(debug, int) or debug <= 0:
        raise LaunchError(f"debug must be a bool or a barrier-wait limit in ms > 0, got {debug!r}")
    return debug


def _load(key: ArtifactKey, ordinal: int | str) -> Kernel:
    memo = (key, ordinal)
    found = _loaded.get(memo)
    if found is None:
        with _lock:
            found = _loaded.get(memo)
            if found is None:
                if ordinal == EMULATOR:
                    from fa4_mlir.runtime.emulated import EmulatedKernel

                    found = _loaded[memo] = EmulatedKernel(fetch(key))
                else:
                    found = _loaded[memo] = Kernel(fetch(key), ordinal)
    return found


def __getattr__(name: str):
    if name == "EmulatedKernel":  # imported on first use: it loads the emulator
        from fa4_mlir.runtime.emulated import EmulatedKernel

        return EmulatedKernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EMULATOR", "Artifact", "ArtifactError", "ArtifactKey", "CudaError", "EmulatedKernel", "GlobalTensor",
           "Kernel", "KernelTrap", "LaunchError", "device_target", "load", "load_artifact", "load_file", "read_artifact"]
