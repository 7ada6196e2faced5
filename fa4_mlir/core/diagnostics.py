"""Located diagnostics in the ``file:line:col: severity: message`` form of mlir-opt."""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    severity: str  # "error" | "warning" | "note" | "remark"
    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None
    notes: tuple[Diagnostic, ...] = ()

    @classmethod
    def at(cls, location: ir.Location | None, severity: str, message: str, notes=()) -> Diagnostic:
        file, line, col = file_line_col(location)
        return cls(severity, message, file, line, col, tuple(notes))

    @classmethod
    def from_mlir(cls, d: ir.Diagnostic) -> Diagnostic:
        severity = str(d.severity).rsplit(".", 1)[-1].lower()
        return cls.at(d.location, severity, d.message, [cls.from_mlir(n) for n in d.notes])

    def place(self) -> str:
        if self.file is None:
            return ""
        if not self.line:  # line 0 is what MLIR reports for whole-buffer errors
            return f"{self.file}: "
        return f"{self.file}:{self.line}:{self.col}: "

    def __str__(self) -> str:
        text = f"{self.place()}{self.severity}: {self.message}"
        return "\n".join([text, *(str(n) for n in self.notes)])


def file_line_col(loc: ir.Location | None) -> tuple[str | None, int | None, int | None]:
    """The first file location inside ``loc`` (through name, call-site and fused locations)."""
    seen = 0
    while loc is not None and seen < 32:
        seen += 1
        if loc.is_a_file():
            return loc.filename, loc.start_line, loc.start_col
        if loc.is_a_name():
            loc = loc.child_loc
        elif loc.is_a_callsite():
            loc = loc.callee
        elif loc.is_a_fused():
            inner = list(loc.locations)
            loc = inner[0] if inner else None
        else:
            return None, None, None
    return None, None, None


class DiagnosticCollector:
    """Context manager that captures every diagnostic the Context emits (and stops their printing)."""

    def __init__(self, ctx: ir.Context):
        self.ctx = ctx
        self.diagnostics: list[Diagnostic] = []
        self._handler = None

    def _handle(self, d: ir.Diagnostic) -> bool:
        self.diagnostics.append(Diagnostic.from_mlir(d))
        return True

    def __enter__(self) -> DiagnosticCollector:
        self._handler = self.ctx.attach_diagnostic_handler(self._handle)
        return self

    def __exit__(self, *exc) -> None:
        self._handler.detach()
