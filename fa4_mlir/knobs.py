"""Every FA4_* environment variable, typed, with its default. No other module reads os.environ.

Read at call time (never at import), so tests and tools can set them per process.
"""

from __future__ import annotations

import os


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def show_traceback() -> bool:
    """FA4_TRACEBACK=1: tools print the Python traceback of an internal error instead of one line."""
    return _flag("FA4_TRACEBACK")


def isolate() -> bool:
    """FA4_ISOLATE=0 runs fa4-opt in-process (debugging); by default MLIR work runs in a forked child
    so that an MLIR abort becomes an error message instead of killing the tool."""
    return os.environ.get("FA4_ISOLATE", "1").strip() not in ("0", "false", "no", "off")
