"""fa4-mlir: a Python compiler for warp-specialised attention kernels on the MLIR Python bindings.

Importing this package does not import MLIR: the runtime and torch entry points must work on machines
that only run kernels. The compiler lives in ``fa4_mlir.core``, ``fa4_mlir.dialects`` and ``fa4_mlir.passes``.
"""

from fa4_mlir.errors import ConfigError, Fa4Error, PipelineError, Unsupported, VerifyError

__version__ = "0.1.0"

__all__ = ["ConfigError", "Fa4Error", "PipelineError", "Unsupported", "VerifyError", "__version__"]
