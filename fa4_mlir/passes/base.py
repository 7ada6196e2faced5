"""The base of fa4 Python passes and the ``name{opt=value}`` option syntax they share with mlir-opt."""

from __future__ import annotations

import dataclasses
import inspect
from typing import ClassVar

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.errors import PipelineError


@dataclasses.dataclass(frozen=True)
class Fa4Pass:
    """A module pass written in Python. Subclasses set ``name`` and implement ``run``.

    The first line of a subclass's docstring is the invariant the pass establishes; fields are its
    options (``fa4-foo{bar=1}`` sets field ``bar``). ``run`` returns the diagnostics it found; any
    error fails the pipeline.
    """

    name: ClassVar[str]

    def run(self, module: ir.Operation) -> list[Diagnostic]:
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "").split("\n", 1)[0]

    @classmethod
    def from_options(cls, options: dict[str, str]) -> Fa4Pass:
        """Build the pass from ``{opt: text}``; unknown options and bad values raise PipelineError."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for key, text in options.items():
            if key not in fields:
                known = ", ".join(fields) or "none"
                raise PipelineError(f"pass '{cls.name}' has no option '{key}' (options: {known})")
            values[key] = _parse_option(cls.name, key, text, fields[key].type)
        return cls(**values)


def _parse_option(pass_name: str, key: str, text: str, annotation) -> object:
    kind = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    try:
        if kind == "bool":
            if text.lower() in ("1", "true"):
                return True
            if text.lower() in ("0", "false"):
                return False
            raise ValueError
        if kind == "int":
            return int(text, 0)
        return text
    except ValueError:
        raise PipelineError(f"option '{key}' of pass '{pass_name}' must be a {kind}, got '{text}'") from None
