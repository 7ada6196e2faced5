"""The compiled host launcher: a known layout's call of ``flash_attention`` / ``gemm_residual`` without
Python (``host_launcher.cpp``).

A Python kernel behind the dispatcher pays about 12 us of host time per call on the H100 machine
before its first line (docs/PERF.md: the op's schema with an empty body), over most of the 15 us
budget of a call. So the planned calls move to C++: the library registers one boxed kernel on the
CUDA key of each op in ``OPS``, which keys the call by its argument stack, looks up the plan the
Python full path made for that key, allocates the outputs, writes the moved addresses and launches.
A miss (and every call it cannot take: misaligned addresses, a driver error, an emulator block open)
runs ``torch.ops.fa4._<op>_full``, the op's Python path with its fast path skipped, which offers its
plan (``offer``): the checks and error messages stay in one place, Python.

``ensure()`` attaches it once per process, on the first plan an op makes: it loads the library built
for this torch and source (``FA4_CACHE_DIR/host-launcher/...``), building it first with
``torch.utils.cpp_extension`` (16 s on the H100 machine, once) where a C++ compiler, ninja and the CUDA
headers are found. FA4_HOST_LAUNCHER (``knobs.host_launcher``) turns it off or makes a failed build an
error; without it the ops keep the Python fast path (``fa4_mlir.torch.fastpath``).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import sys
import threading
import warnings

import torch

from fa4_mlir import knobs
from fa4_mlir.errors import LaunchError

SOURCE = pathlib.Path(__file__).with_name("host_launcher.cpp")
OPS = ("flash_attention", "gemm_residual")  # torch.ops.fa4.<op>, each with its fa4::_<op>_full
_lock = threading.Lock()
_state = {"tried": False, "attached": False, "bypass": 0}


def toolchain_missing() -> str | None:
    """What building the library lacks here (None when nothing): a CUDA build of torch, the CUDA
    toolkit's headers, a C++ compiler, ninja."""
    from torch.utils import cpp_extension

    if torch.version.cuda is None:
        return f"torch {torch.__version__} is not a CUDA build"
    if cpp_extension.CUDA_HOME is None:
        return "no CUDA toolkit (set CUDA_HOME, or put nvcc on PATH)"
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        return f"no C++ compiler ({os.environ.get('CXX', 'c++')})"
    if not cpp_extension.is_ninja_available():
        return "no ninja (pip install ninja)"
    return None


def build_directory() -> pathlib.Path:
    """Where the library for this torch and this source lives: one directory per torch version (its CUDA
    tag included) and source hash, so an upgrade of either builds a new one."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    return pathlib.Path(knobs.cache_dir()) / "host-launcher" / f"torch-{torch.__version__}-{digest}"


def build() -> str:
    """Build (or find built) and load the library; its path. LaunchError naming what is missing."""
    missing = toolchain_missing()
    if missing:
        raise LaunchError(f"the host launcher cannot be built here: {missing}")
    from torch.utils import cpp_extension

    directory = build_directory()
    directory.mkdir(parents=True, exist_ok=True)
    if not any(directory.glob("fa4_host_launcher*.so")):
        print(f"fa4-mlir: building the host launcher for torch {torch.__version__} in {directory} (once; "
              f"FA4_HOST_LAUNCHER=0 skips it)", file=sys.stderr)
    try:
        return cpp_extension.load("fa4_host_launcher", [str(SOURCE)], extra_cflags=["-O2"], with_cuda=True,
                                  build_directory=str(directory), is_python_module=False)
    except Exception as exc:  # the compiler's own report is in the message
        raise LaunchError(f"the host launcher failed to build in {directory}: {exc}") from exc


def ensure() -> bool:
    """Attach the launcher to ``OPS`` if FA4_HOST_LAUNCHER allows and it can be built; True when it
    is attached. Tried once per process (a failed build warns once under "auto")."""
    if _state["tried"]:
        return _state["attached"]
    with _lock:
        if _state["tried"]:
            return _state["attached"]
        mode = knobs.host_launcher()
        if mode == "off":
            _state["tried"] = True
            return False
        if mode == "auto" and toolchain_missing():
            _state["tried"] = True
            return False
        try:
            build()
            _attach()
        except (LaunchError, RuntimeError) as exc:  # RuntimeError: the dispatcher refused a registration
            _state["tried"] = True
            if mode == "on":
                raise LaunchError(f"FA4_HOST_LAUNCHER=on: {exc}; set FA4_HOST_LAUNCHER=auto to fall back to the "
                                  f"Python launch") from None
            warnings.warn(f"fa4-mlir: {exc}; the ops launch from Python (about twice the host time per call); "
                          f"FA4_HOST_LAUNCHER=0 silences this", stacklevel=2)
            return False
        _state["tried"] = True
        return True


def _attach() -> None:
    try:
        for op in OPS:
            torch.ops.fa4_host.attach("fa4", op)
    except RuntimeError:
        torch.ops.fa4_host.detach()  # none of OPS half-attached
        raise
    _state["attached"] = True
    if _state["bypass"]:
        torch.ops.fa4_host.add_bypass(_state["bypass"])


def attached() -> bool:
    return _state["attached"]


def detach() -> None:
    """Remove the C++ kernels (and their plans): the ops take the Python path until ``reattach``."""
    if _state["attached"]:
        torch.ops.fa4_host.detach()
        _state["attached"] = False


def reattach() -> bool:
    """Attach again after ``detach`` (the library stays loaded); False when it was never built."""
    if not _state["tried"]:
        return ensure()
    if not _state["attached"] and hasattr(torch.ops.fa4_host, "attach"):
        try:
            _attach()
        except RuntimeError:  # the dispatcher refused the registration
            return False
    return _state["attached"]


def bypass(delta: int) -> None:
    """Count an emulator block opened (+1) or closed (-1): while one is open the C++ kernels defer
    every call to the Python path, which raises the emulator's placement errors."""
    _state["bypass"] += delta
    if _state["attached"]:
        torch.ops.fa4_host.add_bypass(delta)


def stats() -> dict[str, int]:
    """The C++ side's counters: calls launched from a plan (``hits``), calls deferred to Python
    (``misses``), plans held, ops attached. All zero when it is not attached."""
    if not _state["attached"]:
        return {"hits": 0, "misses": 0, "plans": 0, "ops": 0}
    hits, misses, plans, ops = torch.ops.fa4_host.stats()
    return {"hits": hits, "misses": misses, "plans": plans, "ops": ops}


def clear() -> None:
    """Drop the C++ side's plans (the next call of each layout takes the full path again)."""
    if _state["attached"]:
        torch.ops.fa4_host.clear()


def offer(launch, sources) -> None:
    """Hand ``launch`` (a ``PackedLaunch``) to the C++ side, to be stored under the key of the call
    being served: ``sources`` names, per address slot of the launch, the op argument (index >= 0) or
    output (-1 - index) whose address it takes, or None for a slot that keeps its packed value. A
    launch the C++ side cannot make (a debug build) is not offered, nor anything
    while the launcher is not attached. The C++ plan keeps the raw function and context handles: the
    kernel must stay loaded as long as the process (the runtime never unloads a module, and the ops
    memoise every kernel they load)."""
    if len(sources) != len(launch.slots):
        raise LaunchError(f"offer: sources must name each of the {len(launch.slots)} slots ({', '.join(launch.slots)})"
                          f", got {len(sources)}")
    if not launch.plain or not _state["attached"]:
        return
    kept = [i for i, source in enumerate(sources) if source is not None]
    kernel = launch.kernel
    torch.ops.fa4_host.offer(kernel._function_handle, kernel._context, kernel.device, list(launch.grid),
                             list(kernel.threads), kernel.smem_bytes, launch.param_addresses, launch.param_sizes,
                             [launch.slot_params[i] for i in kept], [int(launch.slot_maps[i]) for i in kept],
                             [sources[i] for i in kept], list(kernel.cluster))
