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
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.attention_op import paged_head_dims, varlen_head_dims
from fa4_mlir.errors import LaunchError, Unsupported
from fa4_mlir.kernels.attention import gather_arguments
from fa4_mlir.torch.tensors import host_array, require_tensors


def check_index_tensor(op: str, name: str, t: torch.Tensor, ndim: int, layout: str) -> None:
    """The rules of an integer metadata tensor the kernel reads through a pointer: int32, ``ndim``-D
    (``layout`` names its dimensions), contiguous."""
    require_tensors(op, {name: t})
    if t.dtype != torch.int32:
        raise LaunchError(f"{op}: {name} dtype must be torch.int32, got {t.dtype}; pass {name}.int()")
    if t.dim() != ndim:
        raise LaunchError(f"{op}: {name} must be {ndim}-D {layout}, got shape {tuple(t.shape)}")
    if not t.is_contiguous():
        raise LaunchError(f"{op}: {name} must be contiguous, got stride {tuple(t.stride())}; "
                          f"pass {name}.contiguous()")


def check_page_size(op: str, what: str, page: int) -> None:
    """A paged cache's page_size (``what``: the shape it is read from): >= 1. Both targets take every size: TMA
    loads the pages it can (``AttentionConfig.page_chunk``), the load warp gathers the rest
    (``AttentionConfig.page_gather``)."""
    if page < 1:
        raise LaunchError(f"{op}: page_size ({what}) must be >= 1, got {page}")


GATHER_SPAN = 1 << 36  # bytes a gathered cache may span: the load warp's 32-bit offsets count 16-byte pieces


def check_gathered_caches(op: str, config: AttentionConfig, k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    """The caches of a gathered paged kernel (``config.page_gather``; nothing for a TMA-paged one) each within
    ``GATHER_SPAN`` (``check_gather_span``): checked before the op writes or launches anything."""
    if config.page_gather:
        for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
            check_gather_span(op, name, t.shape, t.stride(), t.element_size())


def check_gather_span(op: str, name: str, shape, strides, element_bytes: int) -> None:
    """A cache the gathered load warp (``AttentionConfig.page_gather``) reads: its elements lie within
    ``GATHER_SPAN`` bytes of its first (64 GiB; a view of a wider buffer spans what its strides reach)."""
    span = (sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + 1) * element_bytes
    if span > GATHER_SPAN:
        raise LaunchError(f"{op}: {name} must span <= {GATHER_SPAN >> 30} GiB from its first element where its "
                          f"pages are gathered (page sizes TMA cannot load: 32-bit offsets of 16-byte pieces), got "
                          f"{span} bytes (shape {tuple(shape)}, strides {tuple(strides)}); pass a page size that is "
                          f"a multiple of 16, or split the cache")


def cache_arguments(config: AttentionConfig, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    on_emulator: bool) -> dict:
    """``kernels.attention.gather_arguments`` for the caches (num_pages, page_size, Hk, D) of a gathered paged
    kernel (``config.page_gather``): device pointers and the tensors' strides, or on the emulator C-contiguous
    copies of their bits (the kernel only reads them) and their strides; ``{}`` for a TMA-paged kernel. The
    op checked the caches' spans before (``check_gathered_caches``)."""
    if not config.page_gather:
        return {}
    if on_emulator:
        arrays = [np.ascontiguousarray(host_array(t)) for t in (k_cache, v_cache)]
        strides = [tuple(s // a.itemsize for s in a.strides[:3]) for a in arrays]
        return gather_arguments(config, *arrays, *strides)
    return gather_arguments(config, k_cache.data_ptr(), v_cache.data_ptr(), k_cache.stride()[:3],
                            v_cache.stride()[:3])


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
