"""Every FA4_* environment variable, typed, with its default. No other module reads os.environ.

Read at call time (never at import), so tests and tools can set them per process.
"""

from __future__ import annotations

import os


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def show_traceback() -> bool:
    """FA4_TRACEBACK=1: tools print the Python traceback of an internal error instead of one line."""
    return _flag("FA4_TRACEBACK")


def isolate() -> bool:
    """FA4_ISOLATE=0 runs fa4-opt in-process (debugging); by default MLIR work runs in a forked child
    so that an MLIR abort becomes an error message instead of killing the tool."""
    return os.environ.get("FA4_ISOLATE", "1").strip() not in ("0", "false", "no", "off")


DEFAULT_DEBUG_TIMEOUT_MS = 100
# A debug build compares the wait's elapsed %globaltimer nanoseconds with timeout * 10^6 as a
# 64-bit integer: longer timeouts do not fit (about 292 years).
MAX_DEBUG_TIMEOUT_MS = ((1 << 63) - 1) // 1_000_000


def debug_timeout_ms() -> int:
    """FA4_DEBUG=1: the runtime loads debug builds, whose barrier waits trap after
    FA4_DEBUG_TIMEOUT_MS milliseconds (default 100) instead of hanging, and checks every launch
    synchronously. Returns 0 when debug mode is off."""
    if not _flag("FA4_DEBUG"):
        return 0
    text = os.environ.get("FA4_DEBUG_TIMEOUT_MS", "").strip()
    if not text:
        return DEFAULT_DEBUG_TIMEOUT_MS
    if not text.isdigit() or not 0 < int(text) <= MAX_DEBUG_TIMEOUT_MS:
        from fa4_mlir.errors import ConfigError

        raise ConfigError(f"FA4_DEBUG_TIMEOUT_MS must be a whole number of milliseconds in "
                          f"[1, {MAX_DEBUG_TIMEOUT_MS}], got '{text}'")
    return int(text)


def cache_dir() -> str:
    """FA4_CACHE_DIR: where the runtime keeps compiled kernels (default $XDG_CACHE_HOME/fa4-mlir,
    else ~/.cache/fa4-mlir)."""
    explicit = os.environ.get("FA4_CACHE_DIR", "").strip()
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fa4-mlir")


def require_gpu() -> bool:
    """FA4_REQUIRE_GPU=1: GPU tests fail instead of skipping when no GPU (or torch) is there."""
    return _flag("FA4_REQUIRE_GPU")


DEVICES = ("cuda", "emulator")
EMULATOR_TARGETS = ("sm_100a", "sm_90a")


def device() -> str:
    """FA4_DEVICE: where ``torch.ops.fa4.*`` run. "cuda" (the default): on the GPU that holds the
    tensors. "emulator": on CPU tensors, in the PTX emulator (``fa4_mlir.emu``), for a target chosen
    by FA4_EMU_TARGET (see ``fa4_mlir.torch.emulated``)."""
    text = os.environ.get("FA4_DEVICE", "").strip().lower() or "cuda"
    if text not in DEVICES:
        from fa4_mlir.errors import ConfigError

        raise ConfigError(f"FA4_DEVICE must be one of {', '.join(DEVICES)}, got '{text}'")
    return text


def emulator_target() -> str:
    """FA4_EMU_TARGET: the kernel target the emulator runs for ``torch.ops.fa4.*`` (default sm_100a,
    the code no GPU here can run)."""
    text = os.environ.get("FA4_EMU_TARGET", "").strip() or EMULATOR_TARGETS[0]
    if text not in EMULATOR_TARGETS:
        from fa4_mlir.errors import ConfigError

        raise ConfigError(f"FA4_EMU_TARGET must be one of {', '.join(EMULATOR_TARGETS)}, got '{text}'")
    return text


def emulator_seed() -> int:
    """FA4_EMU_SEED: the emulator's scheduler seed for ``torch.ops.fa4.*`` (default 0)."""
    text = os.environ.get("FA4_EMU_SEED", "").strip() or "0"
    if not text.isdigit():
        from fa4_mlir.errors import ConfigError

        raise ConfigError(f"FA4_EMU_SEED must be a non-negative whole number, got '{text}'")
    return int(text)


def emulator_race_checks() -> bool | str:
    """FA4_EMU_RACE_CHECKS=0 turns the PTX emulator's race checks off (cross-proxy shared-memory and
    tcgen05 ordering, ``fa4_mlir.emu.races``) for speed; they are on by default; ``implicit-tcgen05-fences``
    lets every thread synchronisation perform the tcgen05 fences (for CUTLASS's and Triton's Blackwell
    code, which never emits them). ``Program.launch``'s ``race_checks`` argument
    overrides it."""
    text = os.environ.get("FA4_EMU_RACE_CHECKS", "1").strip().lower()
    if text == "implicit-tcgen05-fences":
        return text
    if text not in ("0", "1", "true", "false", "yes", "no", "on", "off"):
        from fa4_mlir.errors import ConfigError

        raise ConfigError(f"FA4_EMU_RACE_CHECKS must be 0, 1 or implicit-tcgen05-fences, got '{text}'")
    return text in ("1", "true", "yes", "on")


HOST_LAUNCHER_MODES = ("auto", "on", "off")


def host_launcher() -> str:
    """FA4_HOST_LAUNCHER: whether ``torch.ops.fa4.flash_attention`` / ``gemm_residual`` launch a known
    layout from C++ (``fa4_mlir.torch.host_launcher``). "auto" (default): where a C++ compiler and the
    CUDA headers are found, build it once per torch version (in FA4_CACHE_DIR) and use it, else stay
    in Python; "on" (1): the same, but a failed build is an error; "off" (0): never."""
    text = os.environ.get("FA4_HOST_LAUNCHER", "").strip().lower() or "auto"
    text = {"1": "on", "true": "on", "yes": "on", "0": "off", "false": "off", "no": "off"}.get(text, text)
    if text not in HOST_LAUNCHER_MODES:
        from fa4_mlir.errors import ConfigError

        raise ConfigError(f"FA4_HOST_LAUNCHER must be one of auto, on (1), off (0), got "
                          f"'{os.environ['FA4_HOST_LAUNCHER'].strip()}'")
    return text
