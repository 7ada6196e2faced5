"""Source locations: every op the authoring API creates carries the kernel author's file and line.

The location is the first Python frame outside this package (and outside ``contextlib``, whose
``with`` machinery sits between a ``with kernel.role(...)`` line and the API), so a verifier or
lowering error about an op names the line of the kernel file that created it.
"""

from __future__ import annotations

import contextlib
import os
import sys

from fa4_mlir._mlir import ir

_SKIP = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.dirname(contextlib.__file__) + os.sep
         + "contextlib.py")


_OUTSIDE: dict[str, bool] = {}  # co_filename -> not part of the API (asked once per file)
_POSITIONS: dict = {}  # code object -> its instructions' positions (computed once per code object)


def _outside(filename: str) -> bool:
    known = _OUTSIDE.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        known = _OUTSIDE[filename] = not (path.startswith(_SKIP[0]) or path == _SKIP[1])
    return known


_LOCATIONS: dict = {}  # (code object, instruction offset) -> Location, in the Context of _CONTEXT
_CONTEXT: list = [None]


def here() -> ir.Location:
    """The file, line and column of the author's code that is calling into the API now."""
    frame = sys._getframe(1)
    while frame is not None and not _outside(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:  # called from inside the package only (its own tests): no author frame
        return ir.Location.unknown()
    context = ir.Context.current
    if _CONTEXT[0] is not context:  # a Location belongs to one Context: start over in a new one
        _LOCATIONS.clear()
        _CONTEXT[0] = context
    key = (frame.f_code, frame.f_lasti)
    location = _LOCATIONS.get(key)
    if location is None:
        location = _LOCATIONS[key] = _location(frame)
    return location


def _location(frame) -> ir.Location:
    code = frame.f_code
    positions = _POSITIONS.get(code)
    if positions is None:
        positions = _POSITIONS[code] = list(code.co_positions())
    index = frame.f_lasti // 2
    column = 0
    if 0 <= index < len(positions) and positions[index][2] is not None:
        column = positions[index][2]
    return ir.Location.file(code.co_filename, frame.f_lineno, column + 1)


class Located:
    """A dialect module whose op builders get ``loc=here()`` unless the caller passes one:
    ``b.fa4.tma_load(...)``, ``b.arith.addi(...)``, ``b.llvm.load(...)``."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name: str):
        target = getattr(self._module, name)
        if not callable(target) or isinstance(target, type) and not issubclass(target, ir.OpView):
            return target

        def build(*args, **kwargs):
            kwargs.setdefault("loc", here())
            return target(*args, **kwargs)
        build.__name__ = name
        build.__doc__ = target.__doc__
        return build

    def __dir__(self):
        return dir(self._module)
