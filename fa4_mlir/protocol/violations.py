"""What the verifier reports: a violation of one bug class at one op, with a witness trace."""

from __future__ import annotations

import dataclasses

from fa4_mlir.protocol.model import Barrier, Event, Kernel, Process, Site

# Every bug class, in the order ties at one step are reported (the likelier cause first).
CLASSES = ("init", "bounds", "deadlock", "under-arrival", "over-arrival", "tx-mismatch", "parity",
           "named-barrier", "race", "fence", "tmem", "cta-pair", "unsupported", "limit")


@dataclasses.dataclass
class Violation:
    cls: str
    step: int
    site: Site
    message: str
    key: tuple = ()
    barriers: list[Barrier] = dataclasses.field(default_factory=list)
    steps: list[int] = dataclasses.field(default_factory=list)
    witness: list[str] = dataclasses.field(default_factory=list)

    def headline(self) -> str:
        return f"protocol error [{self.cls}]: {self.message}"


@dataclasses.dataclass
class Line:
    step: int
    process: str
    text: str
    site: Site
    barriers: tuple[Barrier, ...]


class Witness:
    """The canonical schedule as trace lines, and the slice of it that explains a violation."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.lines: list[Line] = []
        self.completed: list[str] = []  # phases completed by the event being recorded

    def record(self, step: int, p: Process, e: Event, text: str, barriers) -> None:
        who = p.name if self.kernel.cluster == 1 else f"{p.name}@CTA{p.cta}"
        if self.completed:
            text += "".join(f" -> {done} completes" for done in self.completed)
            self.completed = []
        self.lines.append(Line(step, who, text, e.site, tuple(barriers)))

    def note_completion(self, label: str) -> None:
        self.completed.append(label)

    def explain(self, v: Violation, limit: int) -> list[str]:
        """The last ``limit`` trace lines that touch the violation's barriers or steps (or the last lines)."""
        if limit <= 0:
            return []
        steps = set(v.steps) | {v.step}
        chosen = [ln for ln in self.lines if set(ln.barriers) & set(v.barriers) or ln.step in steps]
        if len(chosen) < 2:
            chosen = [ln for ln in self.lines if ln.step <= max(steps)]
        chosen = [ln for ln in chosen if ln.step <= max(steps)][-limit:]
        return [f"step {ln.step}: {ln.process}: {ln.site.where()}: {ln.text}" for ln in chosen]
