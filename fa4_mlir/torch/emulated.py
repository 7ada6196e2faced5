"""``torch.ops.fa4.*`` on CPU tensors, in the PTX emulator, when the caller asks for it.

A GPU kernel never runs on CPU tensors by accident: a CPU tensor is an error unless the emulator was
asked for, in code or through the environment:

    with fa4_mlir.torch.emulator(target="sm_100a", seed=3) as emu:
        o = fa4_mlir.torch.flash_attention(q, k, v, causal=True)  # q, k, v on the CPU
    emu.launches  # [(kernel name, emulator Stats)] of what ran

    FA4_DEVICE=emulator FA4_EMU_TARGET=sm_100a FA4_EMU_SEED=0 python my_script.py

The op takes (or builds, where the compiler is installed) the artifact a GPU of that target loads
and runs its PTX on the tensors' own memory (``runtime.load(..., device="emulator")``): the kernel
reads the inputs and writes the output in place, with the emulator's checks on (races, deadlocks,
out-of-bounds accesses), and the op returns what it wrote. Every tensor of a call must then be on
the CPU. It is slow (about a second per 128 x 1024 attention tile on one core): meant for tests and
for running sm_100a kernels on machines without a Blackwell GPU.
"""

from __future__ import annotations

import contextvars

import torch

from fa4_mlir import knobs, runtime
from fa4_mlir.errors import LaunchError
from fa4_mlir.torch import host_launcher
from fa4_mlir.torch.tensors import require_cuda

_ASK = "FA4_DEVICE=emulator or `with fa4_mlir.torch.emulator():`"


class emulator:  # noqa: N801 - used as a context manager, like torch.no_grad
    """Run ``torch.ops.fa4.*`` on CPU tensors in the PTX emulator inside a ``with`` block.

    ``target``: the kernels' target, "sm_100a" (default) or "sm_90a"; ``seed``: the emulator's
    scheduler seed (interleaving of warps, completion times of asynchronous operations).
    ``launches`` lists ``(kernel name, Stats)`` for each kernel run in the block."""

    def __init__(self, target: str = "sm_100a", seed: int = 0):
        if target not in knobs.EMULATOR_TARGETS:
            raise LaunchError(f"emulator target must be one of {', '.join(knobs.EMULATOR_TARGETS)}, got {target!r}")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise LaunchError(f"emulator seed must be an int >= 0, got {seed!r}")
        self.target = target
        self.seed = seed
        self.launches: list[tuple[str, object]] = []
        self._tokens: list = []

    def __enter__(self) -> emulator:
        self._tokens.append(_active.set(self))
        host_launcher.bypass(1)  # the C++ launches defer to Python, which places the call
        return self

    def __exit__(self, *exc) -> None:
        host_launcher.bypass(-1)
        _active.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return f"emulator(target={self.target!r}, seed={self.seed})"

    def load(self, kernel: str, config) -> runtime.Kernel:
        return runtime.load(kernel, config, device=runtime.EMULATOR)

    def run(self, kernel, grid, args) -> None:
        """Launch ``kernel`` (loaded on the emulator) and record its statistics."""
        self.launches.append((kernel.name, kernel.launch(grid, args, seed=self.seed)))


_active: contextvars.ContextVar[emulator | None] = contextvars.ContextVar("fa4_emulator", default=None)


def requested() -> emulator | None:
    """The emulator the caller asked for: the innermost ``with emulator(...)``, else the one
    FA4_DEVICE=emulator describes (FA4_EMU_TARGET, FA4_EMU_SEED); None when neither."""
    active = _active.get()
    if active is not None:
        return active
    if knobs.device() == runtime.EMULATOR:
        return emulator(knobs.emulator_target(), knobs.emulator_seed())
    return None


def placement(op: str, tensors: dict[str, torch.Tensor]) -> int | emulator:
    """Where ``op`` runs on ``tensors``: a CUDA device index (all on that GPU), or the requested
    emulator (all on the CPU). LaunchError naming the misplaced tensor otherwise."""
    emu = requested()
    if emu is None:
        first, device = None, None
        for name, t in tensors.items():
            if t.device.type == "cpu":
                raise LaunchError(f"{op}: {name} must be a CUDA tensor, got device 'cpu'; move it with .cuda(), "
                                  f"or run the kernel in the PTX emulator ({_ASK})")
            index = require_cuda(t, f"{op}: {name}")
            if device is None:
                first, device = name, index
            elif index != device:
                raise LaunchError(f"{op}: {name} must be on {first}'s device cuda:{device}, got '{t.device}'")
        return device
    for name, t in tensors.items():
        if t.device.type != "cpu":
            raise LaunchError(f"{op}: {name} must be a CPU tensor under the PTX emulator ({emu!r}), got device "
                              f"'{t.device}'; move it with .cpu(), or leave the emulator (unset FA4_DEVICE)")
    return emu
