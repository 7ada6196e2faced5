"""What the serving ops (``flash_attn_varlen``, ``flash_attn_with_kvcache``) share: their integer metadata's
checks, the one host copy of its values (and the memo that skips it for metadata checked before), and the
guard that never launches a kernel built without the op's parameters.

The metadata (prefix sums, key counts, block tables) is read by the kernel from device memory: a bad value
would be an illegal memory access, so the ops check every value before a launch. Reading the values means a
device-to-host copy, which waits for the current stream; ``Checked`` remembers the tensors whose values passed,
so a model's layers (which share one batch's metadata) copy once, and a call checked eagerly can be captured
in a CUDA graph.
"""

from __future__ import annotations

import functools
import weakref

import numpy as np
import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.configs.attention import AttentionConfig, paged_head_dims, varlen_head_dims
from fa4_mlir.errors import LaunchError, Unsupported


def check_index_tensor(op: str, name: str, t: torch.Tensor, ndim: int, layout: str) -> None:
    """The rules of an integer metadata tensor the kernel reads through a pointer: int32, ``ndim``-D
    (``layout`` names its dimensions), contiguous."""
    if t.dtype != torch.int32:
        raise LaunchError(f"{op}: {name} dtype must be torch.int32, got {t.dtype}; pass {name}.int()")
    if t.dim() != ndim:
        raise LaunchError(f"{op}: {name} must be {ndim}-D {layout}, got shape {tuple(t.shape)}")
    if not t.is_contiguous():
        raise LaunchError(f"{op}: {name} must be contiguous, got stride {tuple(t.stride())}; "
                          f"pass {name}.contiguous()")


def check_bound(op: str, name: str, value) -> int:
    """``value`` if it is an int >= 0 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise LaunchError(f"{op}: {name} must be an int >= 0, got {value!r}")
    return value


class Checked:
    """The metadata tensors whose values passed an op's checks: a later call with the same tensor objects
    (None where the call had none), unmodified (``_version``: torch bumps it on every in-place write), and the
    same ``rest`` (the shapes and bounds the checks used) skips the host copy. A replay of a captured call reads
    the tensors' values as they are then, like FlashAttention's: the bounds stay the captured ones."""

    def __init__(self):
        self._last: tuple | None = None

    @staticmethod
    def _state(tensors: tuple, rest: tuple) -> tuple:
        return (*((None, None) if t is None else (t._version, t.data_ptr()) for t in tensors), *rest)

    def seen(self, tensors: tuple, rest: tuple) -> bool:
        last = self._last
        return (last is not None and len(last[0]) == len(tensors)
                and all((r is None and t is None) or (r is not None and r() is t) for r, t in zip(last[0], tensors))
                and last[1] == self._state(tensors, rest))

    def remember(self, tensors: tuple, rest: tuple) -> None:
        self._last = (tuple(None if t is None else weakref.ref(t) for t in tensors), self._state(tensors, rest))


def host_values(op: str, tensors: dict[str, torch.Tensor]) -> list[np.ndarray]:
    """The int32 ``tensors``' values on the host as int64 (no difference of int32 values overflows), in their
    shapes. On a GPU: one device-to-host copy of them all (concatenated on the current stream), which waits for
    the stream; refused under CUDA graph capture, where it cannot run."""
    ts = list(tensors.values())
    if all(t.device.type == "cpu" for t in ts):
        return [t.numpy().astype(np.int64) for t in ts]
    if torch.cuda.is_current_stream_capturing():
        raise LaunchError(f"{op}: the call must run outside CUDA graph capture (its metadata checks copy "
                          f"{' and '.join(tensors)} to the host), got a capturing stream")
    flat = torch.cat([t.reshape(-1) for t in ts]).cpu().numpy().astype(np.int64)
    out, at = [], 0
    for t in ts:
        out.append(flat[at:at + t.numel()].reshape(tuple(t.shape)))
        at += t.numel()
    return out


def require_param(op: str, config: AttentionConfig, kernel, param: str, build: str):
    """``kernel`` if it takes ``param`` (the ``build`` the op needs); Unsupported otherwise: a kernel built
    without it would read the wrong memory."""
    if not any(p["name"] == param for p in kernel.params):
        raise Unsupported(f"{op}: the {config.describe()} kernel must take {param} (the {build} build), got a "
                          f"kernel without it: {build} attention is not implemented for this config yet")
    return kernel


class Kernels:
    """One op's loaded GPU kernels by (device, config, FA4_DEBUG), each checked once (``require_param``)."""

    def __init__(self, op: str, param: str, build: str):
        self.op, self.param, self.build = op, param, build
        self._loaded: dict[tuple, runtime.Kernel] = {}

    def checked(self, config: AttentionConfig, kernel):
        return require_param(self.op, config, kernel, self.param, self.build)

    def get(self, device: int, config: AttentionConfig) -> runtime.Kernel:
        key = (device, config, knobs.debug_timeout_ms())
        found = self._loaded.get(key)
        if found is None:
            kernel = runtime.load("attention", config, device=device, debug=key[-1] or False)
            found = self._loaded[key] = self.checked(config, kernel)
        return found


@functools.cache
def serving_head_dims(target: str, paged: bool) -> tuple[int, ...]:
    """The head dims of the packed (``varlen``) or paged kernel on ``target``, memoised."""
    return paged_head_dims(target) if paged else varlen_head_dims(target)
