"""The emulator's exceptions: every failure of a PTX program on the CPU is an ``EmulationError``.

They derive from ``fa4_mlir.errors.Fa4Error`` so callers of the compiler and the emulator catch one
hierarchy. Messages name what went wrong, where (PTX line, warp, lane) and what to do.
"""

from __future__ import annotations

from fa4_mlir.errors import Fa4Error


class EmulationError(Fa4Error):
    """Base class: a PTX program could not be loaded or did something the ISA forbids."""


class PtxSyntaxError(EmulationError, ValueError):
    """PTX text that does not parse; the message starts with ``line:column``."""

    def __init__(self, message: str, line: int, column: int, source: str = "<ptx>"):
        self.line, self.column, self.source = line, column, source
        super().__init__(f"{source}:{line}:{column}: {message}")


class Unsupported(EmulationError, NotImplementedError):
    """Valid PTX outside the subset the emulator implements (names the opcode and the PTX line)."""


class LaunchArgumentError(EmulationError, ValueError):
    """A launch argument does not match the kernel's parameter list (count, type, range, length)."""


class MemoryFault(EmulationError):
    """An access outside every allocation, misaligned, or to the wrong state space."""


class Deadlock(EmulationError):
    """Every live warp is blocked and no asynchronous work is pending; ``blocked`` lists them."""

    def __init__(self, message: str, blocked: list[str] | None = None):
        self.blocked = list(blocked or [])
        super().__init__(message)


class ProtocolError(EmulationError):
    """A rule of the ISA broken at run time: an mbarrier arrive past its count, a register read while a
    wgmma still writes it, an exit with async work pending, a barrier thread count mismatch."""


class Trap(EmulationError):
    """The kernel executed ``trap`` (on a GPU: an illegal-instruction error that ends the context).
    ``output`` is what the launch printed before (``vprintf``): a debug build's reason for trapping."""

    def __init__(self, message: str, output: list[str] | None = None):
        self.output = list(output or [])
        super().__init__(message)
