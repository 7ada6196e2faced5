"""A user's kernel file: a Python module whose ``build(target)`` returns its ``KernelSource``.

``fa4-compile path/to/my_kernel.py`` and ``runtime.load_file("path/to/my_kernel.py")`` (which runs
fa4-compile once and caches the artifact by the file's content) load it through ``load_kernel_file``:
the module is executed under a private name, its ``build`` called with the target. A file that does not
import, has no ``build`` or returns something else is a ``ConfigError`` naming the file and what to do.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import traceback

from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels.source import KernelSource


def load_kernel_file(path: str | os.PathLike, target: str) -> KernelSource:
    """Import ``path`` and return ``build(target)`` of it."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise ConfigError(f"kernel file '{path}' must exist, got no such file")
    name = "fa4_user_kernel_" + hashlib.sha256(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's code: report where it failed, not our stack
        raise ConfigError(f"kernel file '{path}' must import cleanly, got {_where(exc, path)}") from None
    build = getattr(module, "build", None)
    if not callable(build):
        raise ConfigError(f"kernel file '{path}' must define build(target) returning its KernelSource "
                          f"(fa4_mlir.dsl.Kernel.source), got no build function")
    try:
        source = build(target)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"kernel file '{path}': build('{target}') must return a KernelSource, got "
                          f"{_where(exc, path)}") from None
    if not isinstance(source, KernelSource):
        raise ConfigError(f"kernel file '{path}': build('{target}') must return a KernelSource "
                          f"(fa4_mlir.dsl.Kernel.source), got {type(source).__name__}")
    return source


def _where(exc: BaseException, path: str) -> str:
    """``Type: message`` at the deepest line of the user's file in the traceback."""
    line = next((f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__)) if f.filename == path), None)
    if isinstance(exc, SyntaxError) and exc.filename == path:
        line = exc.lineno
    at = f" at line {line}" if line else ""
    return f"{type(exc).__name__}: {exc}{at}"
