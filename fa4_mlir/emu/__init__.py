"""fa4_mlir.emu: run PTX on the CPU. NumPy only: no MLIR, no CUDA.

    from fa4_mlir import emu
    prog = emu.load_ptx(text_or_path)                  # parse errors name line:column
    stats = prog.launch("kernel", grid=(gx, gy, gz), block=(bx, by, bz), cluster=(1, 1, 1),
                        smem_bytes=N, args=[...], seed=0)

Arguments follow the ``.entry`` parameter order: NumPy arrays (global pointers; the kernel's writes
land in them), scalars, ``None`` (null), ``bytes`` or ``emu.Aggregate`` (aggregates) or ``emu.TensorMap`` (see
``fa4_mlir.emu.params``). ``stats`` counts executed instructions (thread and warp level) and time.
Failures are ``EmulationError``s: ``Deadlock``, ``MemoryFault``, ``Unsupported``, ``ProtocolError``,
``PtxSyntaxError``, ``LaunchArgumentError``. The execution model is in ``fa4_mlir.emu.machine`` and
docs/emulator.md.
"""

from __future__ import annotations

import os

import numpy as np

from fa4_mlir.emu.errors import (Deadlock, EmulationError, LaunchArgumentError, MemoryFault, ProtocolError,
                                 PtxSyntaxError, Trap, Unsupported)
from fa4_mlir.emu.params import Aggregate
from fa4_mlir.emu.tensormap import TensorMap

MAX_THREADS = 1024
MAX_SMEM = 232448  # bytes of dynamic shared memory a CTA may opt into on sm_90 and sm_100 (227 KiB)


class Program:
    """A parsed PTX module; ``launch`` runs one of its kernels."""

    def __init__(self, module, source: str):
        self.module = module
        self.source = source
        self._kernels: dict = {}

    @property
    def kernels(self) -> list[str]:
        return [f.name for f in self.module.functions if f.is_entry and f.body is not None]

    def kernel(self, name: str):
        from fa4_mlir.emu.program import compile_kernel

        found = self._kernels.get(name)
        if found is None:
            fn = self.module.function(name)
            if fn is None or not fn.is_entry:
                raise LaunchArgumentError(f"kernel name must be one of {', '.join(self.kernels) or '(none)'}, "
                                          f"got '{name}'")
            found = self._kernels[name] = compile_kernel(self.module, fn, self.source)
        return found

    def launch(self, name: str, grid=(1, 1, 1), block=(32, 1, 1), cluster=(1, 1, 1), smem_bytes: int = 0,
               args=(), seed: int = 0, *, max_delay: int = 400, quantum: int = 64,
               race_checks: bool | str | None = None):
        """Run kernel ``name``; returns ``Stats``. ``seed`` fixes the interleaving of warps and the
        completion times of asynchronous copies and MMAs, in executed warp-instructions (each seed
        bounds them by ``max_delay`` times 1, 16 or 256, and holds some warps back after their
        waits; see ``machine``); ``quantum`` bounds how many instructions a warp runs before the
        scheduler picks again. ``race_checks`` (default: on, unless FA4_EMU_RACE_CHECKS=0) reports
        cross-proxy and tcgen05 ordering races (``fa4_mlir.emu.races``); off saves time;
        ``"implicit-tcgen05-fences"`` checks with every thread synchronisation performing the tcgen05
        fences (``before_thread_sync`` at a release, ``after_thread_sync`` at an acquire): how CUTLASS
        and Triton write Blackwell code."""
        from fa4_mlir.emu.machine import Launch
        from fa4_mlir.emu.memory import GlobalMemory
        from fa4_mlir.emu.params import pack

        kernel = self.kernel(name)
        grid, block, cluster = _dims("grid", grid), _dims("block", block), _dims("cluster", cluster)
        threads = block[0] * block[1] * block[2]
        if threads > MAX_THREADS:
            raise LaunchArgumentError(f"block must have at most {MAX_THREADS} threads, got {block} = {threads}")
        required = kernel.directives.get("reqntid")
        if required and tuple(required) + (1,) * (3 - len(required)) != block:
            raise LaunchArgumentError(f"block must be {tuple(required)} (the kernel's .reqntid), got {block}")
        want_cluster = kernel.directives.get("reqnctapercluster")
        if want_cluster and tuple(want_cluster) + (1,) * (3 - len(want_cluster)) != cluster:
            raise LaunchArgumentError(f"cluster must be {tuple(want_cluster)} (the kernel's .reqnctapercluster), "
                                      f"got {cluster}")
        for axis, (g, c) in enumerate(zip(grid, cluster)):
            if g % c:
                raise LaunchArgumentError(f"grid dimension {'xyz'[axis]} must be a multiple of the cluster's {c}, "
                                          f"got {g}")
        if not isinstance(smem_bytes, (int, np.integer)) or not 0 <= smem_bytes <= MAX_SMEM:
            raise LaunchArgumentError(f"smem_bytes must be an int in [0, {MAX_SMEM}], got {smem_bytes!r}")
        if kernel.static_smem + int(smem_bytes) > MAX_SMEM:
            raise LaunchArgumentError(f"shared memory must fit {MAX_SMEM} bytes, got {kernel.static_smem} static + "
                                      f"{smem_bytes} dynamic")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise LaunchArgumentError(f"seed must be an int >= 0, got {seed!r}")
        if race_checks not in (None, True, False, "implicit-tcgen05-fences"):
            raise LaunchArgumentError(f"race_checks must be True, False, None or 'implicit-tcgen05-fences', "
                                      f"got {race_checks!r}")
        memory = GlobalMemory()
        tensor_maps: list = []
        params = pack(kernel, list(args), memory, tensor_maps)
        if race_checks is None:
            from fa4_mlir import knobs
            race_checks = knobs.emulator_race_checks()
        launch = Launch(kernel, grid, block, cluster, int(smem_bytes), memory, params, int(seed), tensor_maps,
                        max_delay=max_delay, quantum=quantum, race_checks=race_checks)
        for gname, var in kernel.global_symbols.items():
            launch.global_symbols[gname] = _place_global(memory, var)
        with np.errstate(all="ignore"):
            try:
                stats = launch.run()
            finally:
                memory.finish()
        return stats


def _place_global(memory, var) -> int:
    from fa4_mlir.emu import types as T

    count = var.vector
    for d in var.dims:
        count *= d or 1
    size = count * T.width(var.type)
    address = memory.add_bytes(size, var.name)
    if var.init:
        buf, off = memory.resolve(address, size, var.name)
        dtype = T.STORAGE[var.type]
        values = np.array([int(v) & ((1 << (8 * T.width(var.type))) - 1) for v in var.init], dtype)
        raw = values.view(np.uint8)
        buf[off:off + raw.size] = raw
    return address


def _dims(what: str, value) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    try:
        dims = tuple(int(v) for v in value)
    except TypeError:
        raise LaunchArgumentError(f"{what} must be 1 to 3 positive ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise LaunchArgumentError(f"{what} must be 1 to 3 positive ints, got {value!r}")
    return dims + (1,) * (3 - len(dims))


def load_ptx(text_or_path) -> Program:
    """Parse PTX text, or the file at a path (a ``str``/``PathLike`` naming an existing file or ending
    in ``.ptx``)."""
    from fa4_mlir.emu.ptx import parse

    source = "<ptx>"
    if isinstance(text_or_path, os.PathLike) or (isinstance(text_or_path, str) and "\n" not in text_or_path and (
            text_or_path.endswith(".ptx") or os.path.isfile(text_or_path))):
        path = os.fspath(text_or_path)
        if not os.path.isfile(path):
            raise EmulationError(f"PTX file must exist, got '{path}'")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        source = path
    elif isinstance(text_or_path, str):
        text = text_or_path
    else:
        raise EmulationError(f"load_ptx takes PTX text or a path, got {type(text_or_path).__name__}")
    return Program(parse(text, source=source), source)


__all__ = ["Aggregate", "Deadlock", "EmulationError", "LaunchArgumentError", "MemoryFault", "Program", "ProtocolError",
           "PtxSyntaxError", "TensorMap", "Trap", "Unsupported", "load_ptx"]
