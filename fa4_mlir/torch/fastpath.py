"""The host fast path of ``torch.ops.fa4.*``: a call with a layout seen before skips the checks and
the packing, which were done for that layout, and only reads the new tensors' addresses.

An op keys a ``Plan`` by everything its checks read except the addresses: the tensors' shapes,
strides, dtypes and devices, its flags and scalars, the requested emulator (``emulated._active``) and
the environment that picks the device and the kernel build (``env_state``). The first call of a
layout runs the full op (every check, every error message) and stores the plan; a later call with the
same key checks the one thing left, the addresses' 16-byte alignment (else it takes the full path,
which raises the error), allocates the outputs and launches the plan's ``PackedLaunch``
(``fa4_mlir.runtime.launcher``). Plans are kept per op, the oldest dropped first past ``PLANS``.
"""

from __future__ import annotations

import os

PLANS = 256  # plans kept per op
_ENV_NAMES = ("FA4_DEVICE", "FA4_DEBUG", "FA4_DEBUG_TIMEOUT_MS")
# os.environ.get costs 0.3-0.7 us per name (it encodes the key and decodes the value); the bytes
# mapping beneath it (POSIX), which os.environ keeps in step, a dict lookup.
_RAW = getattr(os.environ, "_data", None)
_RAW_NAMES = tuple(os.environ.encodekey(n) for n in _ENV_NAMES) if _RAW is not None else ()


def env_state() -> tuple:
    """The raw values of FA4_DEVICE, FA4_DEBUG and FA4_DEBUG_TIMEOUT_MS (None where unset)."""
    if _RAW is not None:
        get = _RAW.get
        return get(_RAW_NAMES[0]), get(_RAW_NAMES[1]), get(_RAW_NAMES[2])
    return tuple(os.environ.get(n) for n in _ENV_NAMES)


class Plan:
    """What a fast call needs: the ``PackedLaunch``, the outputs' shapes and dtype, and the device
    (``torch.device`` for allocating, its index for the current stream)."""

    __slots__ = ("launch", "out_shape", "out_dtype", "aux_shape", "device", "index")

    def __init__(self, launch, out_shape: tuple, out_dtype, aux_shape: tuple | None, device) -> None:
        self.launch, self.out_shape, self.out_dtype, self.aux_shape = launch, tuple(out_shape), out_dtype, aux_shape
        self.device, self.index = device, device.index


class Plans(dict):
    """key -> Plan, at most ``PLANS`` of them (the oldest dropped first)."""

    def put(self, key, plan: Plan) -> None:
        if len(self) >= PLANS:
            self.pop(next(iter(self)), None)
        self[key] = plan
