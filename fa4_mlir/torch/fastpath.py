"""The host fast path of ``torch.ops.fa4.*``: a call with a layout seen before skips the checks and
the packing, which were done for that layout, and only reads the new tensors' addresses.

An op keys a ``Plan`` by everything its checks read except the addresses: the tensors' shapes,
strides, dtypes and devices, its flags and scalars, the requested emulator (``emulated._active``) and
the environment that picks the device and the kernel build (``env_state``). The first call of a
layout runs the full op (every check, every error message) and stores the plan; a later call with the
same key checks the one thing left, the addresses' 16-byte alignment (else it takes the full path,
which raises the error), allocates the outputs and launches the plan's ``PackedLaunch``
(``fa4_mlir.runtime.launcher``). Plans are kept per op, the oldest dropped first past ``PLANS``.

Every microsecond here is per call (the budget of a whole ``torch.ops.fa4.*`` call is 15 us with the
dispatcher's ~6): the key is one tuple, an output is ``torch.empty_like`` of a stored template (half the
cost of ``torch.empty(shape, dtype=, device=)``, which parses its arguments), and the launch rewrites
only the addresses that changed since the plan's last launch. bench/host_path_stubbed.py measures it.
Where it can be built, the C++ host launcher (``fa4_mlir.torch.host_launcher``) takes these calls
before Python is entered: the dispatcher's call into a Python kernel alone costs most of the budget.
"""

from __future__ import annotations

import os

import torch

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
    """What a fast call needs: the ``PackedLaunch`` (``launch``) and its bound ``launch`` method
    (``run``), the outputs' templates (``out_like``, ``aux_like``: see ``template``), the device index
    (for the current stream) and ``unused``, the address a call passes for a pointer the kernel does
    not dereference (attention's lse without return_lse): the one packed, so it is never rewritten."""

    __slots__ = ("launch", "run", "out_like", "aux_like", "index", "unused")

    def __init__(self, launch, out: torch.Tensor, aux: torch.Tensor | None = None, unused: int = 0) -> None:
        self.launch, self.run = launch, launch.launch
        self.out_like, self.aux_like = template(out), None if aux is None else template(aux)
        self.index, self.unused = out.device.index, unused


def template(t: torch.Tensor) -> torch.Tensor:
    """A tensor whose ``torch.empty_like`` is a new tensor like ``t`` (shape, strides, dtype, device)
    that holds none of ``t``'s memory: a zero-size tensor for an empty ``t``, else one element
    expanded to ``t``'s shape (``empty_like`` of a tensor with repeated elements is contiguous), where
    ``t`` is contiguous (checked on the meta device, no allocation)."""
    if t.numel() == 0:
        return t.new_empty(t.shape)
    meta = torch.empty((1,), dtype=t.dtype, device="meta").expand(t.shape)
    if torch.empty_like(meta).stride() != t.stride():
        raise ValueError(f"template: t must be a contiguous tensor, got strides {t.stride()} for shape "
                         f"{tuple(t.shape)}")
    return t.new_empty((1,)).expand(t.shape)


class Plans(dict):
    """key -> Plan, at most ``PLANS`` of them (the oldest dropped first)."""

    def put(self, key, plan: Plan) -> None:
        if len(self) >= PLANS:
            self.pop(next(iter(self)), None)
        self[key] = plan
