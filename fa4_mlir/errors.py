"""The exceptions of fa4-mlir: one hierarchy, so callers can catch ``Fa4Error``.

Messages follow "X must be Y, got Z" and add "; <what to do>" when there is a fix.
"""

from __future__ import annotations


class Fa4Error(Exception):
    """Base class of every error fa4-mlir raises on purpose."""


class ConfigError(Fa4Error, ValueError):
    """A configuration value is invalid or does not fit the target."""


class VerifyError(Fa4Error):
    """IR breaks an invariant of the fa4 dialect; carries the located diagnostics."""

    def __init__(self, diagnostics):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class PipelineError(Fa4Error, ValueError):
    """A textual pass pipeline cannot be parsed or scheduled."""

    def __init__(self, message: str, *, column: int | None = None):
        self.column = column
        super().__init__(message)


class LoweringError(Fa4Error):
    """A pass could not lower an op; the message names the op."""


class Unsupported(Fa4Error, NotImplementedError):
    """A valid request that fa4-mlir does not implement (yet)."""


class ArtifactError(Fa4Error):
    """A compiled kernel is missing or unreadable; the message says how to build it."""


class LaunchError(Fa4Error, ValueError):
    """A launch was refused before reaching the GPU: wrong device, dtype, shape, stride or alignment."""


class CudaError(Fa4Error, RuntimeError):
    """The CUDA driver reported an error; ``code`` is its CUresult name."""

    def __init__(self, message: str, code: str = ""):
        super().__init__(message)
        self.code = code


class KernelTrap(CudaError):
    """A debug build trapped: a barrier wait outlived its limit (the device printed which one)."""
